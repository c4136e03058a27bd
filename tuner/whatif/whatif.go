package whatif

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// HoursPerMonth turns hourly prices into monthly ones: 8,760 hours a year
// over 12 months.
const HoursPerMonth = 730

// ErrInput is wrapped by every error Run returns for bad options (a usage
// error), as opposed to a run that failed.
var ErrInput = errors.New("bad what-if input")

// Options are one what-if question: a model, the GPUs to consider, the
// traffic and its SLOs.
type Options struct {
	// Model is a catalog id or alias, or a Hugging Face config.json or a
	// directory holding one (as vLLM's --model DIR).
	Model   string
	GPUs    []string        // catalog GPU ids or aliases
	MaxGPUs int             // GPUs per replica: 1, 2, 4, 8 up to this (default 8)
	Engines []engine.Engine // default vLLM
	Dataset bench.DatasetSpec
	SLO     recommend.SLO
	// TargetRPS is the peak request rate to serve; 0 ranks rows by $ per
	// million output tokens instead of $ per month.
	TargetRPS float64
	// Prices override the catalog's on-demand $/GPU-hour by GPU id;
	// PriceDate says when they were seen ("" = today).
	Prices    map[string]float64
	PriceDate string
	// ReservedDiscount is the share a reservation takes off the on-demand
	// price (0.4 = 40% off).
	ReservedDiscount float64
	// Calibrations are profiles (servetune calibrate), each applied to the
	// rows of its GPU and engine; Force applies the first to every row.
	Calibrations []Calibration
	Force        bool
	// Quantizations are the weight quantizations allowed ("none" keeps the
	// checkpoint's; "fp8", "awq", "gptq"); default none.
	Quantizations []string
	// KVCacheDTypes are the KV cache types allowed; default auto and fp8.
	KVCacheDTypes []string
	// Spec, when set, lets each candidate's search also try speculative
	// decoding at the given acceptance rate (docs/reference.md,
	// "Speculative decoding"); a row takes it where it wins.
	Spec *Speculation
	// MaxModelLen is the engine's context length; 0 = the workload's
	// longest request rounded up to 1,024 (at least 2,048).
	MaxModelLen int
	// Trials are the tuner's trials per candidate (default 12); Seed seeds
	// the samplers and the workload.
	Trials int
	Seed   int64
	// RequestsPerLevel are the requests of each probe of the capacity
	// search (default 200); Precision its relative precision (default 4%).
	RequestsPerLevel int
	Precision        float64
	// ProbeSpan is how long each probe sends at least (default 30 s of
	// engine time; trial.RateSearch.MinSpan).
	ProbeSpan time.Duration
	// Shapes are the deployment shapes compared: ShapeAggregated (one
	// engine per replica, the default) and ShapeDisaggregated (prefill
	// and decode engines behind a router, their split searched within
	// MaxGPUs). KVLink is the link a disaggregated row's KV cache crosses
	// (sim.Links; default sim.DefaultLink).
	Shapes []string
	KVLink string
	// MaxReplicas is the most replicas a usable row may need to serve the
	// target (default DefaultMaxReplicas); MaxMonthlyCost the most $ per
	// month it may cost (0: no limit). A row past either is marked
	// Unusable and not ranked: a thousand replicas of a small GPU is
	// arithmetic, not an answer.
	MaxReplicas    int
	MaxMonthlyCost float64
	// Workers search candidates at once (default GOMAXPROCS).
	Workers  int
	Progress func(Progress) // optional, from several goroutines, serialised
}

// Speculation is speculative decoding as a what-if setting: the method,
// its draft tokens per step and draft (an EAGLE head or draft model; none
// for mtp and ngram), and the acceptance rate the user expects of its
// drafts on their data, which the simulator takes as given.
type Speculation struct {
	Method     string  // eagle, eagle3, mtp, ngram, draft_model (default eagle3)
	Tokens     int     // draft tokens per step (default 3)
	Draft      string  // the draft head or model
	Acceptance float64 // each draft token's chance of acceptance, in [0, 1]
}

// Name is how a row names it: "eagle3 k=3 a=0.7".
func (s Speculation) Name() string {
	return fmt.Sprintf("%s k=%d a=%g", s.Method, s.Tokens, s.Acceptance)
}

// check fills the defaults and refuses what no engine runs.
func (s *Speculation) check() error {
	if s.Method == "" {
		s.Method = "eagle3"
	}
	if s.Tokens == 0 {
		s.Tokens = 3
	}
	switch {
	case !(s.Acceptance >= 0 && s.Acceptance <= 1):
		return inputErr("--spec-acceptance %v: want a rate in [0, 1]", s.Acceptance)
	case s.Tokens < 1:
		return inputErr("--spec-tokens %d: want at least 1 draft token", s.Tokens)
	case !slices.Contains(engine.SpeculativeMethods, s.Method):
		return inputErr("--spec-method %q: want eagle, eagle3, mtp, ngram or draft_model", s.Method)
	case s.Draft == "" && engine.NeedsDraft(s.Method):
		return inputErr("--spec-method %s needs --spec-draft (the draft head or model the serve command names)", s.Method)
	}
	return nil
}

// Calibration is a profile and the name it was read from.
type Calibration struct {
	Name    string
	Profile sim.Profile
}

// Progress is the state of a Run, for a live line.
type Progress struct {
	Done, Total int    // candidates finished, and to search
	Running     string // a candidate in progress, e.g. "H200 x2 vllm: trial 3/12"
	Elapsed     time.Duration
}

// Price is the on-demand $/GPU-hour used for a GPU, with its origin.
type Price struct {
	PerGPUHour float64 `json:"per_gpu_hour"`
	Date       string  `json:"date"`
	Source     string  `json:"source"`
}

// Row is one candidate: a GPU type, GPUs per replica and engine, with the
// best settings the search found, or why it cannot serve.
type Row struct {
	GPU            string        `json:"gpu"`
	GPUsPerReplica int           `json:"gpus_per_replica"`
	Engine         engine.Engine `json:"engine"`
	// Shape is an MoE row's parallel layout ("TP8", "TP8+EP8", "DP8+EP8",
	// "TP2xDP4+EP8"), with its data-parallel attention ranks and whether
	// the experts are placed whole; empty (and 0, false) for dense models.
	// A disaggregated row's is its split, "P1xTP4:D2xTP2" (one prefill
	// engine of 4 GPUs, two decode engines of 2).
	Shape string `json:"shape,omitempty"`
	// Deployment is ShapeAggregated or ShapeDisaggregated when the
	// question compared shapes ("" when it asked for aggregated rows
	// only). A disaggregated row's GPUsPerReplica are its parts' together
	// (a replica is one whole deployment), Prefill and Decode its parts,
	// RouterCommand the router's, ServeCommand all three.
	Deployment    string `json:"deployment,omitempty"`
	Prefill       *Part  `json:"prefill,omitempty"`
	Decode        *Part  `json:"decode,omitempty"`
	RouterCommand string `json:"router_command,omitempty"`
	KVLink        string `json:"kv_link,omitempty"`
	// Speculative names the row's speculative decoding ("eagle3 k=3
	// a=0.7") when its search found it wins; empty otherwise.
	Speculative    string          `json:"speculative,omitempty"`
	DataParallel   int             `json:"data_parallel,omitempty"`
	ExpertParallel bool            `json:"expert_parallel,omitempty"`
	Settings       engine.Settings `json:"settings"`
	// CapacityRPS is the highest Poisson request rate one replica serves
	// within the SLOs with no failed request. For a conversation it is the
	// requests its sessions send at CapacitySessions, the highest session
	// arrival rate (sessions/s) the search found: the rate a capacity
	// search raises is the sessions', each sending its turns.
	CapacityRPS            float64 `json:"capacity_rps"`
	CapacitySessions       float64 `json:"capacity_sessions_per_s,omitempty"`
	OutputTokensPerSPerGPU float64 `json:"output_tokens_per_s_per_gpu"`
	TTFTP99                float64 `json:"ttft_p99_ms"`
	TPOTP99                float64 `json:"tpot_p99_ms"`
	// Replicas serve the target (0 without one); Headroom is the capacity
	// left over the target (0.12 = 12%).
	Replicas int     `json:"replicas"`
	Headroom float64 `json:"headroom"`
	// MonthlyCost is on-demand $ per month for the replicas (one replica
	// without a target); MonthlyCostReserved at the reserved discount.
	MonthlyCost         float64 `json:"monthly_cost"`
	MonthlyCostReserved float64 `json:"monthly_cost_reserved"`
	// CostPerMTok is on-demand $ per million output tokens: at the target
	// load, or at one replica's capacity without a target.
	CostPerMTok  float64 `json:"cost_per_mtok"`
	ServeCommand string  `json:"serve_command"`
	// Hosts is the launch per host of a replica that spans hosts (its
	// ServeCommand is then the one-host form); nil on one host.
	Hosts []HostCommand `json:"hosts,omitempty"`
	// ErrorBand is the simulator's expected relative error in this row's
	// regime (0.1 = ±10%), applied to capacity, replicas and cost.
	ErrorBand   float64 `json:"error_band"`
	Regime      string  `json:"error_regime"`
	BandBasis   string  `json:"error_basis"`
	Calibration string  `json:"calibration,omitempty"` // the profile used, "" = stock constants
	Fits        bool    `json:"fits"`
	Reason      string  `json:"reason,omitempty"` // why a row does not fit or serve
	// Unusable says why a row that serves is past a limit of the
	// question (Options.MaxReplicas, MaxMonthlyCost); such a row is not
	// ranked.
	Unusable string `json:"unusable,omitempty"`
	Trials   int    `json:"trials"`
	// Rank is the row's place (1 = best); 0 for rows that cannot serve
	// or are Unusable.
	Rank    int     `json:"rank"`
	meanOut float64 // mean output tokens per request at capacity
	// TiesWith lists the better-ranked rows this one cannot be told apart
	// from within the error bands ("H200 x4 vllm").
	TiesWith []string `json:"ties_with,omitempty"`
}

// Name is "H200 x4 vllm", or "H200 x8 vllm DP8+EP8" for an MoE row.
func (r Row) Name() string {
	n := fmt.Sprintf("%s x%d %s", r.GPU, r.GPUsPerReplica, r.Engine)
	if r.Shape != "" {
		n += " " + r.Shape
	}
	if r.Speculative != "" {
		n += " +" + strings.Fields(r.Speculative)[0]
	}
	return n
}

// CostRange is the row's ranking figure over its error band: $ per month
// with a target (replicas at capacity x (1 ± band)), else $ per Mtok.
func (r Row) CostRange(target float64) (lo, hi float64) {
	if !(r.CapacityRPS > 0) {
		return math.Inf(1), math.Inf(1)
	}
	if target <= 0 {
		return r.CostPerMTok / (1 + r.ErrorBand), r.CostPerMTok / math.Max(1-r.ErrorBand, 0.01)
	}
	per := r.MonthlyCost / float64(max(r.Replicas, 1))
	lo = per * math.Ceil(target/(r.CapacityRPS*(1+r.ErrorBand)))
	hi = per * math.Ceil(target/(r.CapacityRPS*math.Max(1-r.ErrorBand, 0.01)))
	return lo, hi
}

// Report is the answer: the rows ranked, the prices used and where each
// came from, the calibration, and what the search cost.
type Report struct {
	Model string `json:"model"`
	// Weights is the checkpoint's weight format, which a row whose
	// quantization is "none" serves (mxfp4 for gpt-oss, fp8 for
	// DeepSeek-V3); empty for 16-bit checkpoints.
	Weights  string          `json:"weights,omitempty"`
	Engines  []engine.Engine `json:"engines"`
	Workload string          `json:"workload"`
	// Conversation says the workload is a conversation: the capacity
	// search raised the sessions' arrival rate, and each row gives it
	// (Row.CapacitySessions) beside the requests/s its turns make.
	Conversation     bool             `json:"conversation,omitempty"`
	SLO              string           `json:"slo"`
	TargetRPS        float64          `json:"target_rps"`
	MaxModelLen      int              `json:"max_model_len"`
	ReservedDiscount float64          `json:"reserved_discount"`
	Rows             []Row            `json:"rows"`
	Prices           map[string]Price `json:"prices"`
	Calibration      any              `json:"calibration"`
	Candidates       int              `json:"candidates"`
	TrialsRun        int              `json:"trials_run"`
	Wall             time.Duration    `json:"-"`
	WallSeconds      float64          `json:"wall_seconds"`
}

// candidate is one GPU type x GPUs per replica x engine to search.
type candidate struct {
	gpu    catalog.GPU
	n      int
	engine engine.Engine
	cal    *Calibration
	tps    []int           // tensor-parallel sizes the model allows on n GPUs
	shape  *shape          // an MoE model's fixed layout; nil searches the tensor/pipeline split
	disagg bool            // prefill and decode engines within n GPUs, their split searched
	anchor engine.Settings // the first configuration to measure; nil when nothing fits
	unfit  string          // why nothing fits
}

func (c candidate) name() string {
	n := fmt.Sprintf("%s x%d %s", c.gpu.ID, c.n, c.engine)
	if c.shape != nil {
		n += " " + c.shape.String()
	}
	if c.disagg {
		n += " " + ShapeDisaggregated
	}
	return n
}

// MaxTargetRPS bounds --target-rps: a million requests a second is
// thousands of replicas of any row, past what a purchase question asks.
const MaxTargetRPS = 1_000_000

// MaxConversationTurns bounds the turns of one probe of a conversation
// (sessions x the most turns a session may have): every probe of every
// trial simulates them all, about 15 probes a trial, and a probe of more
// turns than this adds time, not a better capacity.
const MaxConversationTurns = 4096

// checkConversation refuses a conversation whose probes would be past
// MaxConversationTurns; one from a file counts a turn a session.
func checkConversation(d bench.DatasetSpec) error {
	if d.Kind != bench.DatasetConversation {
		return nil
	}
	if most := d.MostTurns(); most > 0 && d.Sessions*most > MaxConversationTurns {
		return inputErr("workload: %d sessions of up to %d turns is %d turns a probe, over %d: give fewer --sessions or --turns", d.Sessions, most, d.Sessions*most, MaxConversationTurns)
	}
	if d.Sessions > MaxConversationTurns {
		return inputErr("workload: %d sessions is over %d turns a probe: give fewer --sessions", d.Sessions, MaxConversationTurns)
	}
	return nil
}

// inputErr is a bad option.
func inputErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, a...))
}

// normalize checks o and fills its defaults; errors wrap ErrInput.
func (o *Options) normalize() (catalog.Model, []catalog.GPU, error) {
	m, _, err := catalog.ResolveModel(o.Model)
	if err != nil {
		return m, nil, inputErr("--model: %v", err)
	}
	if err := m.Simulable(); err != nil {
		// Sized all the same, so that the refusal still says how big:
		// the checkpoint's own format, as the other commands size it.
		q := m.Quantization
		if q == "" {
			q = "16-bit"
		}
		return m, nil, inputErr("--model: %v; its weights alone are %.1f GiB at %s", err, m.WeightBytes("")/(1<<30), q)
	}
	if len(o.GPUs) == 0 {
		return m, nil, inputErr("--gpus: give at least one GPU (known: %s)", gpuIDs())
	}
	var gpus []catalog.GPU
	for _, id := range o.GPUs {
		g, err := catalog.LookupGPU(id)
		if err != nil {
			return m, nil, inputErr("--gpus: %v", err)
		}
		if !slices.ContainsFunc(gpus, func(x catalog.GPU) bool { return x.ID == g.ID }) {
			gpus = append(gpus, g)
		}
	}
	if o.MaxGPUs == 0 {
		o.MaxGPUs = 8
	}
	if o.MaxReplicas == 0 {
		o.MaxReplicas = DefaultMaxReplicas
	}
	if o.MaxReplicas < 1 {
		return m, nil, inputErr("--max-replicas %d: want at least 1", o.MaxReplicas)
	}
	if o.MaxMonthlyCost < 0 || math.IsNaN(o.MaxMonthlyCost) || math.IsInf(o.MaxMonthlyCost, 0) {
		return m, nil, inputErr("--max-monthly-cost %g: want a positive amount of dollars, or 0 for no limit", o.MaxMonthlyCost)
	}
	if o.MaxGPUs < 1 || o.MaxGPUs > maxReplicaGPUs {
		return m, nil, inputErr("--max-gpus %d: want 1 to %d", o.MaxGPUs, maxReplicaGPUs)
	}
	if len(o.Engines) == 0 {
		o.Engines = []engine.Engine{engine.VLLM}
	}
	for _, e := range o.Engines {
		if !e.Valid() {
			return m, nil, inputErr("--engine %q: want vllm or sglang", e)
		}
	}
	if len(o.SLO) == 0 {
		return m, nil, inputErr("--slo: give at least one limit, e.g. ttft_p99_ms=2000,tpot_p99_ms=50")
	}
	if err := o.Dataset.Validate(); err != nil {
		return m, nil, inputErr("workload: %v", err)
	}
	if o.Dataset.Kind == bench.DatasetTrace {
		// A trace fixes every send time: there is no request rate for
		// the capacity search to raise.
		return m, nil, inputErr("workload: a trace is not supported by whatif yet (it searches the request rate a configuration sustains; a trace fixes its own send times); replay it with `servetune sim run --dataset trace`")
	}
	if err := checkConversation(o.Dataset); err != nil {
		return m, nil, err
	}
	if o.TargetRPS < 0 || math.IsNaN(o.TargetRPS) || math.IsInf(o.TargetRPS, 0) {
		return m, nil, inputErr("--target-rps %g: must be positive", o.TargetRPS)
	}
	if o.TargetRPS > MaxTargetRPS {
		return m, nil, inputErr("--target-rps %g: above %g req/s, a fleet past any this sizes", o.TargetRPS, float64(MaxTargetRPS))
	}
	if o.ReservedDiscount < 0 || o.ReservedDiscount >= 1 {
		return m, nil, inputErr("--reserved-discount %g: want [0, 1)", o.ReservedDiscount)
	}
	for id, p := range o.Prices {
		if !(p > 0) || math.IsInf(p, 0) {
			return m, nil, inputErr("--price %s=%g: must be a positive $/GPU-hour", id, p)
		}
	}
	if err := o.searchDefaults(); err != nil {
		return m, nil, err
	}
	if err := o.checkShapes(); err != nil {
		return m, nil, err
	}
	if m.MaxPosition > 0 && o.MaxModelLen > m.MaxPosition {
		return m, nil, inputErr("max-model-len %d is above the model's %d positions", o.MaxModelLen, m.MaxPosition)
	}
	if err := o.checkCalibrations(gpus); err != nil {
		return m, nil, err
	}
	return m, gpus, nil
}

// searchDefaults checks and fills what each candidate's search takes:
// quantizations, KV cache types, trials, requests per level, the rate
// search's precision and probe span, workers, the context length.
func (o *Options) searchDefaults() error {
	if o.Spec != nil {
		if err := o.Spec.check(); err != nil {
			return err
		}
	}
	if len(o.Quantizations) == 0 {
		o.Quantizations = []string{"none"}
	}
	for _, q := range o.Quantizations {
		if !slices.Contains([]string{"none", "fp8", "awq", "gptq"}, q) {
			return inputErr("--quantizations %q: want none, fp8, awq or gptq", q)
		}
	}
	if len(o.KVCacheDTypes) == 0 {
		o.KVCacheDTypes = []string{"auto", "fp8"}
	}
	for _, k := range o.KVCacheDTypes {
		if !slices.Contains([]string{"auto", "fp8"}, k) {
			return inputErr("--kv-cache-dtypes %q: want auto or fp8", k)
		}
	}
	if o.Trials == 0 {
		o.Trials = 12
	}
	if o.Trials < 1 {
		return inputErr("--trials %d: must be >= 1", o.Trials)
	}
	if o.RequestsPerLevel == 0 {
		o.RequestsPerLevel = 200
	}
	if o.RequestsPerLevel < 20 {
		return inputErr("--requests %d: want at least 20 (p99 needs them)", o.RequestsPerLevel)
	}
	if o.Precision == 0 {
		o.Precision = 0.04
	}
	if o.ProbeSpan == 0 {
		o.ProbeSpan = spec.DefaultProbeSpan
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxModelLen == 0 {
		n, err := workloadLen(o.Dataset, o.RequestsPerLevel, uint64(o.Seed))
		if err != nil {
			return inputErr("workload: %v", err)
		}
		o.MaxModelLen = max(2048, (n+1023)/1024*1024)
	}
	if o.MaxModelLen < 1 {
		return inputErr("max-model-len %d: must be positive", o.MaxModelLen)
	}
	return nil
}

// checkCalibrations refuses a profile measured on none of the GPUs and
// engines asked about, unless forced.
func (o *Options) checkCalibrations(gpus []catalog.GPU) error {
	for _, c := range o.Calibrations {
		if o.Force {
			break
		}
		ok := false
		for _, g := range gpus {
			for _, e := range o.Engines {
				if c.Profile.Check(g.ID, e, false) == nil {
					ok = true
				}
			}
		}
		if !ok {
			ids := make([]string, len(gpus))
			for i, g := range gpus {
				ids[i] = g.ID
			}
			return inputErr("--calibration %s was measured on %s, not on any GPU and engine asked about (%s); --force-calibration applies it to every row",
				c.Name, c.Profile.What(), strings.Join(ids, ", "))
		}
	}
	if o.Force && len(o.Calibrations) > 1 {
		return inputErr("--force-calibration applies one profile to every row: give one --calibration")
	}
	return nil
}

func gpuIDs() string {
	var ids []string
	for _, g := range catalog.GPUs() {
		ids = append(ids, g.ID)
	}
	return strings.Join(ids, ", ")
}

// workloadLen is the longest request (prompt + output) of the workload the
// capacity search sends.
func workloadLen(d bench.DatasetSpec, n int, seed uint64) (int, error) {
	reqs, err := d.GenerateLengths(rand.New(rand.NewPCG(seed, 1)), n)
	if err != nil {
		return 0, err
	}
	most := 0
	for _, r := range reqs {
		most = max(most, r.PromptTokens+r.MaxTokens)
	}
	return most, nil
}

// Run answers the question: every GPU type x GPUs per replica x engine is
// checked for fit, then searched with the tuner in virtual time (each trial
// a capacity search over the Poisson rate), and the rows are costed and
// ranked. Errors wrapping ErrInput are bad options.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	if os.Getenv("GOGC") == "" {
		// Each probe allocates its requests' records and gaps, and
		// the search keeps little of them: collecting at 4x the live
		// heap (a few hundred MB) saves a quarter of the CPU.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	m, gpus, err := o.normalize()
	if err != nil {
		return nil, err
	}
	rep := &Report{Model: o.Model, Weights: m.Quantization, Engines: o.Engines, Workload: describe(o.Dataset), SLO: o.SLO.String(),
		Conversation: o.Dataset.Kind == bench.DatasetConversation,
		TargetRPS:    o.TargetRPS, MaxModelLen: o.MaxModelLen, ReservedDiscount: o.ReservedDiscount,
		Prices: map[string]Price{}}
	for _, g := range gpus {
		rep.Prices[g.ID] = priceOf(g, o)
	}
	cands := candidates(o, m, gpus)
	rep.Candidates = len(cands)
	rep.Calibration = o.calibrationReport()
	// The memory model first: a model that fits nowhere is bad input.
	if err := checkFits(o, m, cands); err != nil {
		return nil, err
	}
	pruneBySLO(o, cands)
	rows, err := searchAll(ctx, o, m, cands, began)
	addHostCommands(o, cands, rows)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].cost(o, rep.Prices[rows[i].GPU].PerGPUHour)
		rows[i].limit(o)
		rep.TrialsRun += rows[i].Trials
	}
	rank(rows, o.TargetRPS)
	rep.Rows = rows
	rep.Wall = time.Since(began)
	rep.WallSeconds = math.Round(rep.Wall.Seconds()*100) / 100
	return rep, nil
}

// candidates are every GPU type x GPUs per replica (powers of two up to
// MaxGPUs) x engine, each MoE layout of the model, and a disaggregated
// candidate per GPU type and engine when o asks for that shape.
func candidates(o Options, m catalog.Model, gpus []catalog.GPU) []candidate {
	var cands []candidate
	for _, g := range gpus {
		for _, n := range replicaSizes(o, m) {
			for _, e := range o.Engines {
				c := candidate{gpu: g, n: n, engine: e, cal: o.calibrationFor(g.ID, e)}
				shapes := shapesWithinDomain(g, moeShapes(m, n))
				if len(shapes) == 0 {
					cands = append(cands, c)
				}
				for _, sh := range shapes {
					c.shape = &sh
					cands = append(cands, c)
				}
			}
		}
		for _, e := range o.Engines {
			if o.wants(ShapeDisaggregated) {
				cands = append(cands, candidate{gpu: g, n: o.MaxGPUs, engine: e, cal: o.calibrationFor(g.ID, e), disagg: true})
			}
		}
	}
	return cands
}

// checkFits sets each candidate's tensor-parallel choices and its anchor
// configuration, or why it cannot hold the model; a model no candidate
// holds is bad input.
func checkFits(o Options, m catalog.Model, cands []candidate) error {
	anyFits := false
	var largest string
	for i := range cands {
		c := &cands[i]
		c.tps = withinDomain(c.gpu, tensorChoices(m, c.n))
		if c.shape != nil {
			c.tps = []int{c.shape.tp}
		}
		if c.disagg {
			c.tps = withinDomain(c.gpu, disaggTPs(m, c.n))
			c.anchor, c.unfit = disaggFits(o, *c)
		} else {
			c.anchor, c.unfit = fits(o, *c, c.tps)
		}
		if c.anchor != nil {
			anyFits = true
		} else if c.n == o.MaxGPUs || largest == "" {
			largest = c.name() + ": " + c.unfit
		}
	}
	if !anyFits {
		return inputErr("%s fits on none of the %d candidates (e.g. %s); allow more GPUs (--max-gpus), a bigger GPU, or --quantizations none,fp8",
			o.Model, len(cands), largest)
	}
	return nil
}

// searchAll searches the candidates on o.Workers goroutines, a row each;
// the first error cancels the rest.
func searchAll(ctx context.Context, o Options, m catalog.Model, cands []candidate, began time.Time) ([]Row, error) {
	rows := make([]Row, len(cands))
	pr := &progress{o: o, total: len(cands), began: began, running: map[int]string{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range o.Workers {
		wg.Go(func() {
			for i := range jobs {
				row, err := searchCandidate(ctx, o, m, cands[i], func(s string) { pr.set(i, s) })
				pr.done(i)
				if err != nil {
					mu.Lock()
					if firstErr == nil && !errors.Is(err, context.Canceled) {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
				rows[i] = row
			}
		})
	}
	// The largest replicas first (their studies take longest): the
	// workers then finish together. Rows keep the candidates' order.
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cands[b].n - cands[a].n })
	for _, i := range order {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return rows, ctx.Err()
}

// calibrationFor is the profile for gpu and engine e: the one measured
// there, or with Force the one given.
func (o Options) calibrationFor(gpu string, e engine.Engine) *Calibration {
	for i, c := range o.Calibrations {
		if o.Force || c.Profile.Check(gpu, e, false) == nil {
			return &o.Calibrations[i]
		}
	}
	return nil
}

// calibrationReport is the JSON of the profiles used (nil when none).
func (o Options) calibrationReport() any {
	if len(o.Calibrations) == 0 {
		return nil
	}
	type use struct {
		File          string        `json:"file"`
		GPU           string        `json:"gpu"`
		Engine        engine.Engine `json:"engine"`
		EngineVersion string        `json:"engine_version,omitempty"`
		Forced        bool          `json:"forced"`
		Constants     sim.Constants `json:"constants"`
	}
	var out []use
	for _, c := range o.Calibrations {
		out = append(out, use{c.Name, c.Profile.GPU, c.Profile.Engine, c.Profile.EngineVersion, o.Force, c.Profile.Constants})
	}
	return out
}

func priceOf(g catalog.GPU, o Options) Price {
	for id, p := range o.Prices {
		if gg, err := catalog.LookupGPU(id); err == nil && gg.ID == g.ID {
			date := o.PriceDate
			if date == "" {
				date = time.Now().UTC().Format("2006-01-02")
			}
			return Price{PerGPUHour: p, Date: date, Source: "given (--price)"}
		}
	}
	return Price{PerGPUHour: g.Price.PerGPUHour, Date: g.Price.Date, Source: "catalog: " + g.Price.Source}
}

// describe is a one-line workload description.
func describe(d bench.DatasetSpec) string {
	switch d.Kind {
	case bench.DatasetRandom, "":
		return fmt.Sprintf("random, input %s, output %s tokens", d.Input, d.Output)
	case bench.DatasetPrefix:
		return fmt.Sprintf("prefix: %d groups of %d shared tokens, input %s, output %s tokens", d.PrefixGroups, d.PrefixLen, d.Input, d.Output)
	case bench.DatasetMix:
		return fmt.Sprintf("mix of %d parts", len(d.Mix))
	case bench.DatasetConversation:
		think := "no think time"
		if d.Think != nil {
			think = "think " + d.Think.String()
		}
		if d.Path != "" {
			return fmt.Sprintf("conversation: %d sessions of %s, %s", d.Sessions, d.Path, think)
		}
		return fmt.Sprintf("conversation: %d sessions of %s turns, input %s, output %s tokens a turn, %s", d.Sessions, d.Turns, d.Input, d.Output, think)
	}
	return fmt.Sprintf("%s %s", d.Kind, d.Path)
}

// progress serialises the candidates' progress into Options.Progress.
type progress struct {
	mu      sync.Mutex
	o       Options
	total   int
	n       int
	began   time.Time
	running map[int]string
}

func (p *progress) set(i int, s string) {
	if p.o.Progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[i] = s
	p.emit(s)
}

func (p *progress) done(i int) {
	if p.o.Progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, i)
	p.n++
	p.emit("")
}

func (p *progress) emit(s string) {
	if s == "" {
		keys := make([]int, 0, len(p.running))
		for k := range p.running {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		if len(keys) > 0 {
			s = p.running[keys[0]]
		}
	}
	p.o.Progress(Progress{Done: p.n, Total: p.total, Running: s, Elapsed: time.Since(p.began)})
}

// cost fills the row's replicas and costs at price $/GPU-hour.
func (r *Row) cost(o Options, price float64) {
	if !r.Fits || !(r.CapacityRPS > 0) {
		return
	}
	hourly := price * float64(r.GPUsPerReplica)
	meanOut := r.meanOut
	if o.TargetRPS > 0 {
		r.Replicas = int(math.Ceil(o.TargetRPS / r.CapacityRPS))
		r.Headroom = float64(r.Replicas)*r.CapacityRPS/o.TargetRPS - 1
		r.MonthlyCost = hourly * float64(r.Replicas) * HoursPerMonth
		if meanOut > 0 {
			r.CostPerMTok = hourly * float64(r.Replicas) / (o.TargetRPS * meanOut * 3600) * 1e6
		}
	} else {
		r.MonthlyCost = hourly * HoursPerMonth
		r.CostPerMTok = recommend.CostPerMTok(price, r.GPUsPerReplica, r.OutputTokensPerSPerGPU*float64(r.GPUsPerReplica))
	}
	r.MonthlyCostReserved = r.MonthlyCost * (1 - o.ReservedDiscount)
}

// DefaultMaxReplicas is the most replicas a row may need before it is
// marked unusable: past a hundred, a bigger GPU or a lower target is the
// answer, not the row.
const DefaultMaxReplicas = 100

// limit marks a serving row past the question's replica or cost limit
// as unusable.
func (r *Row) limit(o Options) {
	if !r.Fits || !(r.CapacityRPS > 0) {
		return
	}
	switch {
	case o.TargetRPS > 0 && r.Replicas > o.MaxReplicas:
		r.Unusable = fmt.Sprintf("needs %d replicas for %.3g req/s, past the limit of %d (--max-replicas)", r.Replicas, o.TargetRPS, o.MaxReplicas)
	case o.MaxMonthlyCost > 0 && r.MonthlyCost > o.MaxMonthlyCost:
		r.Unusable = fmt.Sprintf("costs %s, past the limit of %s (--max-monthly-cost)",
			measure.DollarsPer(r.MonthlyCost, "month"), measure.DollarsPer(o.MaxMonthlyCost, "month"))
	}
}

// rank orders the rows: those that serve by $ per month (with a target) or
// $ per Mtok, then the others; and marks the rows whose cost range overlaps
// a better row's.
func rank(rows []Row, target float64) {
	key := func(r Row) float64 {
		if !r.Fits || !(r.CapacityRPS > 0) || r.Unusable != "" {
			return math.Inf(1)
		}
		if target > 0 {
			return r.MonthlyCost
		}
		return r.CostPerMTok
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ki, kj := key(rows[i]), key(rows[j])
		if ki != kj {
			return ki < kj
		}
		if rows[i].CapacityRPS != rows[j].CapacityRPS {
			return rows[i].CapacityRPS > rows[j].CapacityRPS
		}
		return rows[i].Name() < rows[j].Name()
	})
	for i := range rows {
		if math.IsInf(key(rows[i]), 1) {
			continue
		}
		rows[i].Rank = i + 1
		lo, _ := rows[i].CostRange(target)
		for j := 0; j < i; j++ {
			_, hi := rows[j].CostRange(target)
			if lo <= hi {
				rows[i].TiesWith = append(rows[i].TiesWith, rows[j].Name())
			}
		}
	}
}

// Ties are the rows tied with the best one, best first (the best included),
// or nil when the best stands alone.
func (rep *Report) Ties() []Row {
	if len(rep.Rows) == 0 || rep.Rows[0].Rank != 1 {
		return nil
	}
	best := rep.Rows[0].Name()
	out := []Row{rep.Rows[0]}
	for _, r := range rep.Rows[1:] {
		if slices.Contains(r.TiesWith, best) {
			out = append(out, r)
		}
	}
	if len(out) == 1 {
		return nil
	}
	return out
}

// Decision is what a ranking decides: its best row, the rows that fit
// and are within the model's error of it (to measure, or calibrate,
// before choosing), and how many of the other rows that fit stand apart
// from it beyond that error.
type Decision struct {
	Best      Row
	Tied      []Row // best first excluded
	Separable int
	Fitting   int // the ranked rows, the best included
}

// Decide is the ranking's decision; ok is false when no row fits.
func (rep *Report) Decide() (d Decision, ok bool) {
	if len(rep.Rows) == 0 || rep.Rows[0].Rank != 1 {
		return d, false
	}
	d.Best = rep.Rows[0]
	for _, r := range rep.Rows {
		if r.Rank == 0 {
			continue
		}
		d.Fitting++
		if r.Rank > 1 && slices.Contains(r.TiesWith, d.Best.Name()) {
			d.Tied = append(d.Tied, r)
		}
	}
	d.Separable = d.Fitting - 1 - len(d.Tied)
	return d, true
}

// launcherFor is the virtual launcher of a candidate.
func launcherFor(o Options, c candidate) *simulated.Virtual {
	v := &simulated.Virtual{GPU: c.gpu.ID, KVLink: o.KVLink}
	if _, cfg, ok := catalog.ModelPath(o.Model); ok {
		v.ModelConfig = cfg
	}
	if c.cal != nil {
		v.Calibration, v.ForceCalibration = c.cal.Name, o.Force
	}
	return v
}

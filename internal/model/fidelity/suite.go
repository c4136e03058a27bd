// Package fidelity runs the simulated engine on public measurements of real
// vLLM and SGLang runs (internal/model/sim/testdata/fidelity/runs.json) and reports its
// error per regime and metric: the fidelity suite of docs/fidelity.md. The
// medians it measured last are recorded in internal/model/sim/medians.json,
// which the simulator embeds for its error bands; Check fails when a
// regime's median gets worse by more than Slack.
package fidelity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/parallel"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Metrics are the figures a run measured (or the simulator predicted), in
// milliseconds and output tokens per second; 0 means not measured.
type Metrics struct {
	TTFT       float64 `json:"ttft_ms,omitempty"`
	ITL        float64 `json:"itl_ms,omitempty"` // time per output token after the first
	E2E        float64 `json:"e2e_ms,omitempty"`
	Throughput float64 `json:"output_tok_s,omitempty"`
}

// The metrics by name, in the table's order.
var metricNames = []string{"ttft", "itl", "e2e", "throughput"}

func (m Metrics) get(name string) float64 {
	switch name {
	case "ttft":
		return m.TTFT
	case "itl":
		return m.ITL
	case "e2e":
		return m.E2E
	default:
		return m.Throughput
	}
}

// Source is where runs come from, with the split: "fit" sources are the
// ones the simulator's constants were chosen against, "held-out" ones were
// not looked at while choosing them.
type Source struct {
	What   string `json:"what"`
	URL    string `json:"url,omitempty"`
	Repo   string `json:"repo,omitempty"`
	Path   string `json:"path,omitempty"`
	Commit string `json:"commit,omitempty"`
	Split  string `json:"split"`
}

// Workload is what a run sent: mean lengths (every request's, unless
// RangeRatio spreads them), and either Poisson stages ([rate per second,
// requests], one after another), or Requests under a concurrency cap (0:
// all at once, offline).
type Workload struct {
	In  int `json:"in"`
	Out int `json:"out"`
	// RangeRatio is the client's --random-range-ratio where its random
	// dataset draws each request's input and output lengths uniformly
	// from the integers of [ratio x N, N] (benchmark_serving's
	// sample_random_requests, np.random.randint(int(N*ratio), N+1)); N is
	// taken so that the range's mean is In (Out): 2 x In / (1 + ratio).
	// Absent: every request has In and Out exactly; 0, SGLang's
	// bench_serving default, draws over [0, N]. Under a concurrency cap
	// the spread matters: equal lengths finish together and the next
	// wave's prompts all arrive at once, where spread ones drift apart.
	// A range that reaches 0 draws empty prompts and outputs (zeroDraw).
	RangeRatio  *float64     `json:"range_ratio,omitempty"`
	Stages      [][2]float64 `json:"stages,omitempty"`
	Requests    int          `json:"requests,omitempty"`
	Concurrency int          `json:"concurrency,omitempty"`
	// Prompts is how many distinct prompts the client cycled through,
	// request i sending prompt i mod Prompts (inference-perf's
	// shared_prefix data: num_groups x num_prompts_per_group prompts,
	// pre-generated and reused in turn); 0 when every prompt is new. The
	// engine's prefix cache then serves a repeated prompt's KV.
	Prompts int `json:"prompts,omitempty"`
	// PromptGroups and SystemPrompt, where set, say that the Prompts
	// prompts fall in PromptGroups groups whose prompts begin with the
	// same SystemPrompt tokens (inference-perf's shared_prefix data:
	// num_groups system prompts of system_prompt_len tokens, each
	// followed by num_prompts_per_group questions); prompt p is in group
	// p mod PromptGroups. The prefix cache then shares a group's system
	// prompt between its prompts.
	PromptGroups int `json:"prompt_groups,omitempty"`
	SystemPrompt int `json:"system_prompt,omitempty"`
	// Lengths, where set, names a table beside runs.json of per-request
	// lengths, one "in,out" pair a line ('#' starts a comment): the
	// client's own sample of a varying dataset with its filters applied
	// (docs/fidelity.md, "Length tables"). Request i takes row i mod the
	// table's rows, in the file's order, so a run is the same every
	// time. Each length is scaled by In (Out) over the mean of the rows
	// the run draws, so the run's totals stay its source's (the table's
	// tokenizer need not be the run's model's); Load refuses a table
	// whose drawn means are more than MaxLengthsGap from In or Out.
	Lengths string `json:"lengths,omitempty"`
	// drawn are the run's requests' lengths from Lengths, scaled (Load).
	drawn [][2]int
}

// MaxLengthsGap is how far a length table's mean input or output may be
// from the run's own means (In, Out) for the table to stand for the
// run's distribution: 10%, stated before any run was simulated with a
// table (docs/fidelity.md, "Length tables"). Past it the table is
// another workload, whatever its shape, and scaling it would hide that.
const MaxLengthsGap = 0.10

// Run is one public measurement.
type Run struct {
	ID          string   `json:"id"`
	Source      string   `json:"source"`
	Engine      string   `json:"engine"`
	Version     string   `json:"version"`
	GPU         string   `json:"gpu"`
	Model       string   `json:"model"`
	ModelConfig string   `json:"model_config,omitempty"` // a config.json beside runs.json
	TP          int      `json:"tp"`
	Flags       []string `json:"flags"`
	// VersionFlags state the engine version's defaults where they differ
	// from the simulated engine's (async scheduling off before vLLM made
	// it the default, say).
	VersionFlags []string `json:"version_flags,omitempty"`
	// Sampling is what the run's requests set, where its source says they
	// set it; absent, they take the model's generation defaults
	// (sim.Config.DefaultSampling), as a server gives a request that sets
	// none.
	Sampling *catalog.Sampling `json:"sampling,omitempty"`
	Workload Workload          `json:"workload"`
	Stat     string            `json:"stat"` // "mean" or "median"
	Measured Metrics           `json:"measured"`
	// Regimes are the load regimes the run stands for (light, moderate,
	// saturation, offline) and long-context; tp and moe are added from
	// the configuration.
	Regimes []string `json:"regimes"`
	// Split overrides the source's split for this run: "held-out" for a
	// run of a fit source that no constant was chosen against (one added
	// after the fit, on other GPUs or models).
	Split string `json:"split,omitempty"`
	Note  string `json:"note,omitempty"`
	// Disaggregated, when set, is the run's disaggregated deployment:
	// Flags are every engine's, TP is unused. Its regime is
	// RegimeDisagg alone (Regimes stays empty), and it is not among All:
	// the aggregated regimes' figures, which the what-if rows' bands rest
	// on, stay the aggregated engine's.
	Disaggregated *Disaggregation `json:"disaggregated,omitempty"`
	// Unscored, when set, says why the run's error measures how the suite
	// represents its workload rather than the simulated engine: the run is
	// simulated and printed with its reason, and counted in no regime's
	// figures (Tabulate) nor in medians.json. The suite's one criterion
	// (docs/fidelity.md, "Unscored runs"): every request sent at once and
	// free to run together (no Poisson rate, no client concurrency cap, no
	// engine limited to one running sequence), with lengths the source
	// gives only as means of a varying distribution (ShareGPT and the like), which the
	// suite simulates at the mean, so every simulated request ends
	// together where the real run ends in a tail of its longest requests.
	// Load accepts it on such a workload only: all at once, no range ratio,
	// no length table (Workload.Lengths: the requests' own lengths).
	Unscored string `json:"unscored,omitempty"`
}

// Disaggregation is a run's prefill and decode engines and the link
// between them (sim.Deployment).
type Disaggregation struct {
	PrefillReplicas int    `json:"prefill_replicas"`
	PrefillTP       int    `json:"prefill_tp"`
	DecodeReplicas  int    `json:"decode_replicas"`
	DecodeTP        int    `json:"decode_tp"`
	KVLink          string `json:"kv_link"`
	// DecodeNoConnector: the decode engines were started without a KV
	// connector (sim.Deployment.DecodeNoConnector), as the source's own
	// command lines show.
	DecodeNoConnector bool `json:"decode_no_connector,omitempty"`
}

// Suite is runs.json.
type Suite struct {
	About   string            `json:"about"`
	Sources map[string]Source `json:"sources"`
	Runs    []Run             `json:"runs"`
	// Silicon names tables of runs at a fixed concurrency in
	// aiconfigurator's columns (SiliconTable): Load adds their rows to
	// Runs, and those the simulator cannot run to Unrunnable.
	Silicon    []SiliconTable `json:"silicon,omitempty"`
	Unrunnable []Unrunnable   `json:"-"`
	dir        string
}

// The load regimes a run names; RegimeTP, RegimeMoE and RegimeSpec come
// from the configuration.
var loadRegimes = []string{"light", "moderate", "saturation", "offline", RegimeConcurrency, "long-context"}

// Derived regimes and the whole suite. A speculative run's error carries
// its acceptance rate's (given, not simulated), so RegimeSpec is its own
// regime: its runs count there alone, neither in their load regime nor in
// All, and the what-if bands of plain configurations do not take it.
const (
	RegimeTP     = "tp>1"
	RegimeMoE    = "moe"
	RegimeSpec   = "speculative"
	RegimeDisagg = "disaggregated"
	All          = "all"
)

// Load reads and checks a suite file.
func Load(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Suite
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.dir = filepath.Dir(path)
	if err := s.loadSilicon(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

func (s *Suite) check() error {
	for name, src := range s.Sources {
		if src.Split != "fit" && src.Split != "held-out" {
			return fmt.Errorf("source %q: split %q, want fit or held-out", name, src.Split)
		}
		if src.URL == "" && (src.Repo == "" || src.Path == "" || src.Commit == "") {
			return fmt.Errorf("source %q: want a url, or repo, path and commit", name)
		}
	}
	seen := map[string]bool{}
	for i, r := range s.Runs {
		switch {
		case r.ID == "" || seen[r.ID]:
			return fmt.Errorf("run %q: empty or repeated id", r.ID)
		case s.Sources[r.Source].Split == "":
			return fmt.Errorf("run %q: unknown source %q", r.ID, r.Source)
		case r.Engine != string(engine.VLLM) && r.Engine != string(engine.SGLang):
			return fmt.Errorf("run %q: engine %q, want vllm or sglang", r.ID, r.Engine)
		case r.Version == "" || r.GPU == "" || r.Model == "" || r.TP < 1:
			return fmt.Errorf("run %q: version, gpu, model and tp are required", r.ID)
		case r.Stat != "mean" && r.Stat != "median":
			return fmt.Errorf("run %q: stat %q, want mean or median", r.ID, r.Stat)
		case r.Workload.In < 1 || r.Workload.Out < 1:
			return fmt.Errorf("run %q: workload lengths must be positive", r.ID)
		case r.Workload.RangeRatio != nil && !(*r.Workload.RangeRatio >= 0 && *r.Workload.RangeRatio < 1):
			return fmt.Errorf("run %q: workload range_ratio %v: want a ratio in [0, 1), or none for fixed lengths", r.ID, *r.Workload.RangeRatio)
		case r.Engine == string(engine.VLLM) && r.Workload.drawsZero():
			return fmt.Errorf("run %q: workload range_ratio %v draws lengths of 0, which vLLM refuses with a 400 (empty prompt, max_tokens below 1): the suite does not represent failed requests", r.ID, *r.Workload.RangeRatio)
		case r.Workload.Prompts < 0:
			return fmt.Errorf("run %q: workload prompts %d: want 0 (every prompt new) or a positive count", r.ID, r.Workload.Prompts)
		case (len(r.Workload.Stages) > 0) == (r.Workload.Requests > 0):
			return fmt.Errorf("run %q: want either Poisson stages or a request count", r.ID)
		case r.Measured == Metrics{}:
			return fmt.Errorf("run %q: no measured figure", r.ID)
		case r.Split != "" && r.Split != "fit" && r.Split != "held-out":
			return fmt.Errorf("run %q: split %q, want fit or held-out", r.ID, r.Split)
		case r.Unscored != "" && (len(r.Workload.Stages) > 0 || r.Workload.Concurrency > 0 || r.Workload.RangeRatio != nil):
			return fmt.Errorf("run %q: unscored: only a run of every request at once whose lengths are means of a varying distribution is left unscored (no Poisson stages, no concurrency cap, no range ratio)", r.ID)
		case r.Unscored != strings.TrimSpace(r.Unscored):
			return fmt.Errorf("run %q: unscored: a reason without surrounding space, please", r.ID)
		}
		for _, st := range r.Workload.Stages {
			if !(st[0] > 0) || st[1] < 1 || st[1] != math.Trunc(st[1]) {
				return fmt.Errorf("run %q: stage %v: want a positive rate and a whole number of requests", r.ID, st)
			}
		}
		if d := r.Disaggregated; d != nil {
			if len(r.Regimes) > 0 {
				return fmt.Errorf("run %q: a disaggregated run's regime is %s alone: leave regimes empty", r.ID, RegimeDisagg)
			}
			if d.PrefillReplicas < 1 || d.DecodeReplicas < 1 || d.PrefillTP < 1 || d.DecodeTP < 1 {
				return fmt.Errorf("run %q: disaggregated: replicas and tp of each side must be positive", r.ID)
			}
			if _, err := sim.LookupLink(d.KVLink); err != nil {
				return fmt.Errorf("run %q: disaggregated: %w", r.ID, err)
			}
		} else if len(r.Regimes) == 0 {
			return fmt.Errorf("run %q: no regime", r.ID)
		}
		if err := r.Workload.checkPromptGroups(); err != nil {
			return fmt.Errorf("run %q: %w", r.ID, err)
		}
		if err := s.loadLengths(&s.Runs[i]); err != nil {
			return fmt.Errorf("run %q: %w", r.ID, err)
		}
		for _, g := range r.Regimes {
			if !slices.Contains(loadRegimes, g) {
				return fmt.Errorf("run %q: regime %q, want one of %s", r.ID, g, strings.Join(loadRegimes, ", "))
			}
		}
		seen[r.ID] = true
	}
	return nil
}

// checkPromptGroups refuses system-prompt groups a workload cannot have:
// groups of no cycled prompts, a system prompt not shorter than the
// prompt, or one without groups.
func (w Workload) checkPromptGroups() error {
	switch {
	case w.PromptGroups == 0 && w.SystemPrompt == 0:
		return nil
	case w.PromptGroups < 1 || w.SystemPrompt < 1:
		return fmt.Errorf("workload prompt_groups %d, system_prompt %d: want both positive, or neither", w.PromptGroups, w.SystemPrompt)
	case w.Prompts < w.PromptGroups:
		return fmt.Errorf("workload prompt_groups %d: want at most the %d cycled prompts", w.PromptGroups, w.Prompts)
	case w.SystemPrompt >= w.In:
		return fmt.Errorf("workload system_prompt %d: want fewer tokens than the prompt's %d", w.SystemPrompt, w.In)
	}
	return nil
}

// loadLengths reads a run's length table (Workload.Lengths), checks its
// means against the run's and draws the run's requests' lengths from it.
func (s *Suite) loadLengths(r *Run) error {
	w := &r.Workload
	switch {
	case w.Lengths == "":
		return nil
	case w.RangeRatio != nil || w.Prompts > 0:
		return errors.New("lengths: a length table takes no range_ratio or prompts")
	case r.Unscored != "":
		return errors.New("unscored: a run with a length table has its requests' lengths, and is scored")
	}
	rows, err := readLengths(filepath.Join(s.dir, w.Lengths))
	if err != nil {
		return fmt.Errorf("lengths: %w", err)
	}
	n := w.count()
	var sum [2]float64
	for i := range n {
		sum[0] += float64(rows[i%len(rows)][0])
		sum[1] += float64(rows[i%len(rows)][1])
	}
	var scale [2]float64
	for k, want := range [2]int{w.In, w.Out} {
		mean := sum[k] / float64(n)
		if gap := mean/float64(want) - 1; math.Abs(gap) > MaxLengthsGap {
			return fmt.Errorf("lengths %s: mean %s %.1f is %+.1f%% from the workload's %d (at most %.0f%%: docs/fidelity.md, \"Length tables\")",
				w.Lengths, [2]string{"input", "output"}[k], mean, 100*gap, want, 100*MaxLengthsGap)
		}
		scale[k] = float64(want) / mean
	}
	w.drawn = make([][2]int, n)
	for i := range w.drawn {
		for k := range 2 {
			w.drawn[i][k] = max(1, int(math.Round(float64(rows[i%len(rows)][k])*scale[k])))
		}
	}
	return nil
}

// readLengths reads a length table: "in,out" a line, '#' comments and
// blank lines skipped, every length a positive whole number.
func readLengths(path string) ([][2]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows [][2]int
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var in, out int
		f := strings.Split(line, ",")
		if len(f) != 2 || !positive(f[0], &in) || !positive(f[1], &out) {
			return nil, fmt.Errorf("%s:%d: %q: want \"in,out\", two positive whole numbers", filepath.Base(path), i+1, line)
		}
		rows = append(rows, [2]int{in, out})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no lengths", filepath.Base(path))
	}
	return rows, nil
}

// positive parses s as a positive whole number into n.
func positive(s string, n *int) bool {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	*n = v
	return err == nil && v > 0
}

// Result is one run's prediction and its errors.
type Result struct {
	Run       Run
	Split     string
	Regimes   []string
	Predicted Metrics
	// Err maps a metric to (predicted - measured) / measured.
	Err map[string]float64
}

// config builds the simulator's configuration of a run: its engine flags,
// with the GPU, TP size, engine and model config by setting name.
func (s *Suite) config(r Run) (sim.Config, error) {
	c, err := engine.ParseCommand(slices.Concat([]string{r.Model}, r.Flags, r.VersionFlags), nil)
	if err != nil {
		return sim.Config{}, err
	}
	c.Settings["tensor_parallel"] = r.TP
	modelConfig := ""
	if r.ModelConfig != "" {
		modelConfig = filepath.Join(s.dir, r.ModelConfig)
	}
	cfg, err := sim.FromSettings(engine.Engine(r.Engine), c.Model, modelConfig, r.GPU, 0, c.Settings)
	if err == nil && r.Sampling != nil {
		cfg.Sampling = r.Sampling
	}
	return cfg, err
}

// deployment builds a disaggregated run's deployment: each side the run's
// engine flags at its own tensor-parallel size.
func (s *Suite) deployment(r Run) (sim.Deployment, error) {
	d := r.Disaggregated
	dep := sim.Deployment{PrefillReplicas: d.PrefillReplicas, DecodeReplicas: d.DecodeReplicas, Link: d.KVLink, DecodeNoConnector: d.DecodeNoConnector}
	for _, side := range []struct {
		tp  int
		cfg *sim.Config
	}{{d.PrefillTP, &dep.Prefill}, {d.DecodeTP, &dep.Decode}} {
		rr := r
		rr.TP = side.tp
		cfg, err := s.config(rr)
		if err != nil {
			return dep, err
		}
		*side.cfg = cfg
	}
	return dep, nil
}

// Simulate runs one measurement through the simulated engine in virtual
// time with the simulator's stock constants.
func (s *Suite) Simulate(r Run) (Result, error) {
	cfg, err := s.config(r)
	if err != nil {
		return Result{}, fmt.Errorf("run %q: %w", r.ID, err)
	}
	w := r.Workload
	reqs, sched, uncounted := w.requests(r.ID, r.Engine)
	n := len(reqs)
	var recs []measure.Record
	if d := r.Disaggregated; d != nil {
		var dep sim.Deployment
		if dep, err = s.deployment(r); err == nil {
			recs, err = sim.RunDeploymentSchedule(dep, reqs, sched, w.Concurrency)
		}
	} else {
		recs, err = sim.RunVirtualSchedule(cfg, reqs, sched, w.Concurrency)
	}
	if err != nil {
		return Result{}, fmt.Errorf("run %q: %w", r.ID, err)
	}
	sum := measure.Summarize(recs, measure.SummaryOptions{Bootstrap: 1})
	if sum.Failed > 0 {
		return Result{}, fmt.Errorf("run %q: %d of %d simulated requests failed, the first with %q", r.ID, sum.Failed, n, firstFailure(recs))
	}
	var p Metrics
	if r.Stat == "median" {
		p = Metrics{TTFT: sum.TTFT.Median, ITL: sum.TPOT.Median, E2E: sum.E2EL.Median}
	} else {
		// The mean time per output token as the runs define it:
		// (E2E mean - TTFT mean) / (output - 1); with spread lengths,
		// benchmark_serving's mean over the requests of their own.
		p = Metrics{TTFT: sum.TTFT.Mean, E2E: sum.E2EL.Mean}
		switch {
		case w.RangeRatio != nil || len(w.drawn) > 0:
			p.ITL = sum.TPOT.Mean
		case w.Out > 1:
			p.ITL = (sum.E2EL.Mean - sum.TTFT.Mean) / float64(w.Out-1)
		}
	}
	p.Throughput = sum.OutputThroughput
	if uncounted > 0 && sum.Duration > 0 {
		// The client counts a request's output as its drawn length:
		// a zero draw's one token is run, not counted (zeroDraw).
		p.Throughput = float64(sum.TotalOutputTokens-uncounted) / sum.Duration
	}
	res := Result{Run: r, Split: s.Sources[r.Source].Split, Predicted: p, Err: map[string]float64{}}
	if r.Split != "" {
		res.Split = r.Split
	}
	res.Regimes = regimes(r, cfg)
	for _, name := range metricNames {
		if real := r.Measured.get(name); real > 0 {
			res.Err[name] = p.get(name)/real - 1
		}
	}
	return res, nil
}

// firstFailure is the message of the first failed record, by request.
func firstFailure(recs []measure.Record) string {
	for _, rec := range recs {
		if rec.Error != measure.ErrNone {
			return rec.ErrorMsg
		}
	}
	return ""
}

// lengths returns a draw of one request's input and output lengths: In
// and Out each time, or with RangeRatio, uniform draws over the client's
// ranges (drawRange), the stream seeded by the run's id, or with a
// length table the run's rows in turn.
func (w Workload) lengths(id string) func() (in, out int) {
	if len(w.drawn) > 0 {
		i := 0
		return func() (int, int) {
			d := w.drawn[i%len(w.drawn)]
			i++
			return d[0], d[1]
		}
	}
	if w.RangeRatio == nil {
		return func() (int, int) { return w.In, w.Out }
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(2, h.Sum64()))
	draw := func(mean int) int {
		lo, hi := w.drawRange(mean)
		return lo + rng.IntN(hi-lo+1)
	}
	return func() (int, int) {
		in := draw(w.In)
		return in, draw(w.Out)
	}
}

// drawRange is the client's range of a length whose mean is mean:
// [int(N x ratio), N], N = 2 x mean / (1 + ratio).
func (w Workload) drawRange(mean int) (lo, hi int) {
	r := *w.RangeRatio
	hi = int(math.Round(2 * float64(mean) / (1 + r)))
	return int(float64(hi) * r), hi
}

// drawsZero says whether the workload's ranges reach a length of 0.
func (w Workload) drawsZero() bool {
	if w.RangeRatio == nil {
		return false
	}
	loIn, _ := w.drawRange(w.In)
	loOut, _ := w.drawRange(w.Out)
	return loIn == 0 || loOut == 0
}

// zeroDraw is what SGLang runs for a drawn length of 0: one token. A
// request of max_new_tokens 0 is prefilled and finishes on the token its
// prefill samples (SGLang's Req.check_finished: output_ids reach
// max_new_tokens once the first is appended), and an empty prompt is
// tokenized to the tokenizer's BOS token alone. Sent as 0, the request
// would ask for no max_tokens at all, which the simulated engine, as the
// real one, fills to the context's end. sglang.bench_serving counts each
// request's output as its drawn length (RequestFuncOutput.output_len =
// the request's output_len), so the one token is run but not counted:
// sgl-project/sglang PR #1060's burst of --random-output 8 at the default
// ratio 0 prints 3,930 generated tokens (26.75 tok/s over 146.91 s, the
// draws' sum) and 4,038 retokenized, 108 more, about the 1,000 / 9 zero
// draws.
const zeroDraw = 1

// count is the run's number of requests: Requests, or the Poisson
// stages' counts in all.
func (w Workload) count() int {
	n := w.Requests
	for _, st := range w.Stages {
		n += int(st[1])
	}
	return n
}

// requests are the run's requests, their lengths drawn as its workload
// says, their arrival times (Poisson stages back to back, or all at
// once: a concurrency cap or an offline batch), and how many output
// tokens they run that the client does not count (zeroDraw).
func (w Workload) requests(id, eng string) ([]measure.Request, []time.Duration, int) {
	var sched []time.Duration
	n := w.Requests
	if len(w.Stages) > 0 {
		// Poisson stages back to back, the seed fixed by the run's id.
		h := fnv.New64a()
		h.Write([]byte(id))
		rng := rand.New(rand.NewPCG(1, h.Sum64()))
		var t float64
		for _, st := range w.Stages {
			for range int(st[1]) {
				t += rng.ExpFloat64() / st[0]
				sched = append(sched, time.Duration(t*1e9))
			}
		}
		n = len(sched)
	} else {
		sched = make([]time.Duration, n)
	}
	reqs := make([]measure.Request, n)
	lengths := w.lengths(id)
	uncounted := 0
	for i := range reqs {
		in, out := lengths()
		if eng == string(engine.SGLang) {
			if out == 0 {
				uncounted += zeroDraw
			}
			in, out = max(in, zeroDraw), max(out, zeroDraw)
		}
		reqs[i] = measure.Request{Index: i, PromptTokens: in, MaxTokens: out, PrefixID: -1}
		if w.Prompts > 0 {
			// A cycled prompt is the same tokens every time it comes
			// round: the whole of it is the group's prefix.
			reqs[i].PrefixID, reqs[i].PrefixTokens = i%w.Prompts, w.In
			if w.PromptGroups > 0 {
				reqs[i].GroupID = reqs[i].PrefixID % w.PromptGroups
				reqs[i].GroupTokens = w.SystemPrompt
			}
		}
	}
	return reqs, sched, uncounted
}

// regimes are the ones a run counts in: speculative and disaggregated
// runs in theirs alone, the others in their load regimes plus tp>1 and
// moe from the configuration.
func regimes(r Run, cfg sim.Config) []string {
	var out []string
	switch {
	case cfg.SpecMethod != "":
		return []string{RegimeSpec}
	case r.Disaggregated != nil:
		out = append(out, r.Regimes...)
		out = append(out, RegimeDisagg)
	default:
		out = append(out, r.Regimes...)
		if r.TP > 1 {
			out = append(out, RegimeTP)
		}
		if cfg.Model.MoE() {
			out = append(out, RegimeMoE)
		}
	}
	return out
}

// SimulateAll runs every measurement, one per core at a time (each run
// is its own engine on its own virtual clock), and returns the results in
// the suite's order.
func (s *Suite) SimulateAll() ([]Result, error) {
	results := make([]Result, len(s.Runs))
	errs := make([]error, len(s.Runs))
	parallel.Each(context.Background(), len(s.Runs), runtime.GOMAXPROCS(0), func(i int) {
		results[i], errs[i] = s.Simulate(s.Runs[i])
	})
	var out []Result
	for i, res := range results {
		if errs[i] == nil {
			out = append(out, res)
		}
	}
	return out, errors.Join(errs...)
}

// Stat is the error of one metric over one regime's runs.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median_abs"` // median absolute relative error
	Bias   float64 `json:"median"`     // median signed error
	Worst  float64 `json:"worst_abs"`
	P90    float64 `json:"p90_abs"`
	Run    string  `json:"-"` // the worst run
}

// Table maps a regime (or All) and a metric to its Stat.
type Table map[string]map[string]Stat

// Regimes returns the regimes of t in a stable order: the load regimes,
// then tp>1, moe, speculative and all.
func (t Table) Regimes() []string {
	var out []string
	for _, g := range append(append([]string{}, loadRegimes...), RegimeTP, RegimeMoE, RegimeSpec, RegimeDisagg, All) {
		if _, ok := t[g]; ok {
			out = append(out, g)
		}
	}
	return out
}

// Tabulate gathers the results' errors by regime and metric; split ""
// takes every scored run, else only the scored runs of that split.
// Unscored runs count nowhere.
func Tabulate(results []Result, split string) Table {
	c := collector{}
	for _, r := range results {
		if split != "" && r.Split != split || r.Run.Unscored != "" {
			continue
		}
		for _, m := range metricNames {
			e, ok := r.Err[m]
			if !ok {
				continue
			}
			for _, g := range r.Regimes {
				c.add(g, m, e, r.Run.ID)
			}
			if r.Run.Disaggregated == nil && !slices.Contains(r.Regimes, RegimeSpec) {
				c.add(All, m, e, r.Run.ID)
			}
		}
	}
	return c.table()
}

// collector gathers signed errors by group (a regime, a source) and
// metric, and the run of the largest in size.
type collector map[string]map[string]*errSet

type errSet struct {
	es    []float64
	worst string
}

func (c collector) add(g, m string, e float64, id string) {
	if c[g] == nil {
		c[g] = map[string]*errSet{}
	}
	s := c[g][m]
	if s == nil {
		s = &errSet{}
		c[g][m] = s
	}
	if len(s.es) == 0 || math.Abs(e) > maxAbs(s.es) {
		s.worst = id
	}
	s.es = append(s.es, e)
}

func (c collector) table() Table {
	t := Table{}
	for g, byMetric := range c {
		t[g] = map[string]Stat{}
		for m, s := range byMetric {
			t[g][m] = newStat(s.es, s.worst)
		}
	}
	return t
}

// newStat is the figures of signed errors es, whose largest in size is
// run worst's.
func newStat(es []float64, worst string) Stat {
	abs := make([]float64, len(es))
	for i, e := range es {
		abs[i] = math.Abs(e)
	}
	return Stat{N: len(es), Median: measure.Median(abs), Bias: measure.Median(es), Worst: maxAbs(es),
		P90: measure.PercentileOf(abs, 90), Run: worst}
}

// SourceStat is one source's scored runs: how many of each split, and
// each metric's absolute errors over them (Stat.Median, Stat.N; the
// run-level regimes do not matter here).
type SourceStat struct {
	Fit, HeldOut int
	Metrics      map[string]Stat
}

// TabulateBySource gathers the scored runs' errors by source and metric,
// over every run of the source whatever its regimes (speculative and
// disaggregated runs too, which All leaves out): where the suite's error
// sits. Unscored runs count nowhere.
func TabulateBySource(results []Result) map[string]SourceStat {
	out := map[string]SourceStat{}
	c := collector{}
	for _, r := range results {
		if r.Run.Unscored != "" {
			continue
		}
		st := out[r.Run.Source]
		if r.Split == "fit" {
			st.Fit++
		} else {
			st.HeldOut++
		}
		out[r.Run.Source] = st
		for _, m := range metricNames {
			if e, ok := r.Err[m]; ok {
				c.add(r.Run.Source, m, e, r.Run.ID)
			}
		}
	}
	for src, byMetric := range c.table() {
		st := out[src]
		st.Metrics = byMetric
		out[src] = st
	}
	return out
}

// The load regimes a what-if row sits in (sim.Regime), and the regimes
// that a run's configuration or lengths add beside its load.
var (
	loadsOnly  = []string{"light", "moderate", "saturation", "offline", RegimeConcurrency}
	structural = []string{"long-context", RegimeTP, RegimeMoE, RegimeSpec, RegimeDisagg}
)

// Poisson is ByLoad's and TabulateBands' pseudo load regime of every run
// under Poisson arrivals (light, moderate, saturation): a what-if row found
// under load falls back to it, never to the bursts' (offline) nor the
// closed loops' figures (concurrency), where its own load regime has too
// few runs.
const Poisson = "poisson"

// ByLoad maps a structural regime (tp>1, moe, long-context...), or All
// for every run, to its figures within each load regime and within
// Poisson: ByLoad["tp>1"]["moderate"]["itl"] is the itl error of the tp>1
// runs at moderate load. A what-if row's band (sim.ErrorBand) takes
// these, so that a moderate-load row's tp>1 figure does not come from
// bursts.
type ByLoad map[string]Table

// TabulateByLoad gathers the scored runs' errors by structural regime
// (or All), load regime (or Poisson) and metric; a pair without runs is
// absent.
func TabulateByLoad(results []Result) ByLoad {
	out := ByLoad{}
	for _, g := range append(slices.Clone(structural), All) {
		for _, l := range append(slices.Clone(loadsOnly), Poisson) {
			var in []Result
			for _, r := range results {
				inGroup := g == All || slices.Contains(r.Regimes, g)
				atLoad := slices.Contains(r.Regimes, l) || l == Poisson && slices.ContainsFunc(r.Regimes, poissonArrivals)
				if inGroup && atLoad {
					in = append(in, r)
				}
			}
			if st, ok := Tabulate(in, "")[g]; ok {
				if out[g] == nil {
					out[g] = Table{}
				}
				out[g][l] = st
			}
		}
	}
	return out
}

// poissonArrivals reports whether load is one of Poisson arrivals (light,
// moderate, saturation): not a burst (offline) nor a closed loop at a
// fixed concurrency, whose errors measure other regimes.
func poissonArrivals(load string) bool { return sim.Regime(load).Poisson() }

func maxAbs(xs []float64) float64 {
	var m float64
	for _, x := range xs {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// TabulateBands gathers the scored runs' errors by what changes them: the
// load regime, the engine and the context ("moderate/vllm/long-context",
// "moderate/vllm/short", "moderate/vllm", "moderate"), and the same over
// every Poisson load (light, moderate, saturation) under Poisson. A what-if
// row's band (sim.ErrorBand) takes the narrowest group of its own with
// sim.MinBandRuns runs. Speculative and disaggregated runs count in their
// own regimes only, as in All.
func TabulateBands(results []Result) Table {
	c := collector{}
	for _, r := range results {
		if r.Run.Unscored != "" || slices.Contains(r.Regimes, RegimeSpec) || slices.Contains(r.Regimes, RegimeDisagg) {
			continue
		}
		ctx := "short"
		if slices.Contains(r.Regimes, "long-context") {
			ctx = "long-context"
		}
		for _, load := range r.Regimes {
			if !slices.Contains(loadsOnly, load) {
				continue
			}
			loads := []string{load}
			if poissonArrivals(load) {
				loads = append(loads, Poisson)
			}
			for _, l := range loads {
				for _, g := range []string{l + "/" + r.Run.Engine + "/" + ctx, l + "/" + r.Run.Engine, l} {
					for _, m := range metricNames {
						if e, ok := r.Err[m]; ok {
							c.add(g, m, e, r.Run.ID)
						}
					}
				}
			}
		}
	}
	return c.table()
}

package whatif

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// The settings a candidate's search ranges over, beside the layout and
// what the user allows (quantization, KV cache type).
var (
	runningChoices = []int{16, 32, 64, 128, 256, 512, 1024}
	batchedChoices = []int{2048, 4096, 8192, 16384}
	memChoices     = []float64{0.85, 0.9, 0.95}
)

// searchCandidate checks that the candidate can hold the model and, when
// it can, searches its settings with the tuner in virtual time.
func searchCandidate(ctx context.Context, o Options, m catalog.Model, c candidate, note func(string)) (Row, error) {
	row := candidateRow(o, c)
	if c.anchor == nil {
		row.Fits, row.Reason = false, c.unfit
		return row, nil
	}
	study, trials, err := searchStudy(ctx, o, m, c, note)
	if err != nil {
		return row, err
	}
	row.Trials = len(trials)
	best, level, ok := bestTrial(study, trials)
	if !ok {
		row.Reason = noCapacity(study, trials)
		return row, nil
	}
	row.fillMeasured(o, m, c, best, level)
	return row, nil
}

// candidateRow is c's row before its search: GPU, engine, shape and
// calibration.
func candidateRow(o Options, c candidate) Row {
	row := Row{GPU: c.gpu.ID, GPUsPerReplica: c.n, Engine: c.engine, Fits: true}
	if o.wants(ShapeDisaggregated) {
		row.Deployment = ShapeAggregated
	}
	if c.disagg {
		row.Deployment, row.Shape = ShapeDisaggregated, ShapeDisaggregated
	}
	if sh := c.shape; sh != nil {
		row.Shape, row.ExpertParallel = sh.String(), sh.ep
		if sh.dp > 1 {
			row.DataParallel = sh.dp
		}
	}
	if c.cal != nil {
		row.Calibration = c.cal.Name
	}
	return row
}

// searchStudy runs c's study in virtual time from its anchor (both sides
// of the speculative choice when o asks for speculation) and returns its
// spec and trials.
func searchStudy(ctx context.Context, o Options, m catalog.Model, c candidate, note func(string)) (*spec.Spec, []store.Trial, error) {
	plan, err := studySpec(o, m, c, c.tps)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.name(), err)
	}
	plan.Tuner.Enqueue = []space.Settings{c.anchor}
	if o.Spec != nil {
		// Both sides of the speculative choice are measured at the anchor.
		plain, drafted := c.anchor.Clone(), c.anchor.Clone()
		plain["spec_method"] = "none"
		drafted["spec_method"] = o.Spec.Method
		plan.Tuner.Enqueue = []space.Settings{drafted, plain}
	}
	db, err := store.Open(ctx, store.Memory)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	l := launcherFor(o, c)
	eval := &layoutEval{r: &tuner.TrialRunner{Spec: plan, Launcher: l, Memory: memory.Model{}, Bootstrap: 1, SummariesOnly: true, CapacityOnly: true}, n: c.n, shape: c.shape, disagg: c.disagg}
	study := &tuner.Study{Spec: plan, Launcher: l, Store: db, Eval: eval, OnFinish: func(r tuner.TrialReport) {
		note(fmt.Sprintf("%s: trial %d/%d", c.name(), r.Done, r.Total))
	}}
	note(c.name() + ": trial 0/" + fmt.Sprint(o.Trials))
	out, err := study.Run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("%s: %w", c.name(), err)
	}
	trials, err := db.Trials(ctx, out.StudyID)
	return plan, trials, err
}

// fillMeasured fills the row from its best trial at level: the settings
// and serve commands, the capacity and latencies, the regime and its
// error band.
func (row *Row) fillMeasured(o Options, m catalog.Model, c candidate, best store.Trial, level measure.Level) {
	model := o.Model
	if dir, _, ok := catalog.ModelPath(o.Model); ok {
		model = dir
	}
	set := withLayout(best.Settings, c.n, c.shape)
	if pp, _ := set.Int("pipeline_parallel"); pp == 1 {
		delete(set, "pipeline_parallel") // the engines' default: no flag to print
	}
	if m, _ := set.String("spec_method"); m == "" || m == "none" {
		for _, k := range []string{"spec_method", "spec_tokens", "spec_draft_model"} {
			delete(set, k) // speculation lost or was not asked: no flag to print
		}
	} else {
		row.Speculative = o.Spec.Name()
	}
	if c.disagg {
		row.fillDisagg(o, model, withDisagg(best.Settings))
		set = row.Settings
	} else {
		row.Settings = set
		row.ServeCommand = engine.ShellJoin(engine.ServeCommand(c.engine, model, set, nil))
	}
	row.CapacityRPS = level.Load.Rate
	s := level.Summary
	if c := s.Conversation; c != nil && c.Sessions > 0 {
		// The rate searched is the sessions': each sends its turns.
		sent := 0
		for _, t := range c.Turns {
			sent += t.Sent
		}
		row.CapacitySessions = level.Load.Rate
		row.CapacityRPS = level.Load.Rate * float64(sent) / float64(c.Sessions)
	}
	// At capacity every request completes, so the replica's output rate in
	// steady state is the rate times the mean output: the probe's own
	// throughput also counts its ramp-down after the last arrival.
	row.meanOut = float64(s.TotalOutputTokens) / float64(max(s.Completed, 1))
	row.OutputTokensPerSPerGPU = row.CapacityRPS * row.meanOut / float64(row.GPUsPerReplica)
	row.TTFTP99, row.TPOTP99 = s.TTFT.P99, s.TPOT.P99
	sit := situationOf(o.SLO, level, m)
	sit.TP, _ = set.Int("tensor_parallel")
	sit.Speculative = row.Speculative != ""
	sit.Engine = string(c.engine)
	if c.disagg {
		_, ptp, _, dtp := disaggLayout(set)
		sit.TP, sit.Disaggregated = max(ptp, dtp), true
	}
	row.Regime = describeSituation(sit)
	if c.cal != nil {
		row.ErrorBand, row.BandBasis = sim.CalibratedBand(c.cal.Profile, sit)
	} else {
		row.ErrorBand, row.BandBasis = sim.ErrorBand(sit)
	}
}

// tensorChoices are the tensor-parallel sizes of n GPUs the model allows:
// powers of two up to n that divide its attention heads and fit its KV
// heads.
func tensorChoices(m catalog.Model, n int) []int {
	var out []int
	for tp := 1; tp <= n; tp *= 2 {
		if m.Heads%tp != 0 {
			continue
		}
		if m.KVHeads < tp && tp%m.KVHeads != 0 || m.KVHeads >= tp && m.KVHeads%tp != 0 {
			continue
		}
		out = append(out, tp)
	}
	return out
}

// compactFirst orders quantizations by the memory their weights take.
var compactFirst = []string{"awq", "gptq", "fp8", "none"}

// anchors are the settings a candidate's study measures first, most
// capable first: the first that the memory model says fits is enqueued,
// so the sampler starts from a configuration that runs (in a space where
// most corners do not fit, a few random trials may find none).
var anchors = []engine.Settings{
	{"max_running_requests": 256, "max_batched_tokens": 8192, "gpu_memory_fraction": 0.9},
	{"max_running_requests": 64, "max_batched_tokens": 4096, "gpu_memory_fraction": 0.95},
	{"max_running_requests": 16, "max_batched_tokens": 2048, "gpu_memory_fraction": 0.95},
}

// fits says why a candidate cannot hold the model in its most frugal
// configuration (the widest tensor split, the most compact weights and KV
// cache allowed, the largest memory fraction, small batches), or returns
// the first anchor configuration that fits, at the widest tensor split.
func fits(o Options, c candidate, tps []int) (engine.Settings, string) {
	if len(tps) == 0 {
		return nil, "no tensor-parallel size divides the model's heads"
	}
	tp := tps[len(tps)-1]
	pp := c.n / tp
	fill := func(set engine.Settings) {
		set["tensor_parallel"] = tp
		if c.n > 1 && tps[0] < c.n && c.shape == nil {
			set["pipeline_parallel"] = pp
		}
	}
	return firstThatFits(o, c, fill, func(set engine.Settings) string {
		v := launcherFor(o, c)
		cfg, err := v.Config(launcher.Spec{Engine: c.engine, Model: o.Model, Settings: withLayout(set, c.n, c.shape), GPUs: make([]int, c.n)})
		if err != nil {
			return oneLine(err)
		}
		if est, err := sim.Estimate(cfg); err != nil {
			return whyNot(est, cfg, err)
		}
		return ""
	})
}

// firstThatFits returns the first anchor, with the least compact weights
// allowed first and the most compact KV cache, completed by fill, that
// check passes (check says why a configuration does not fit, "" when it
// does), or the last reason.
func firstThatFits(o Options, c candidate, fill func(engine.Settings), check func(engine.Settings) string) (engine.Settings, string) {
	kv := "auto"
	if contains(o.KVCacheDTypes, "fp8") {
		kv = "fp8"
	}
	var last string
	for _, a := range anchors {
		for i := len(compactFirst) - 1; i >= 0; i-- {
			q := compactFirst[i]
			if !contains(o.Quantizations, q) {
				continue
			}
			set := a.Clone()
			set["kv_cache_dtype"], set["quantization"], set["max_model_len"] = kv, q, o.MaxModelLen
			fill(set)
			if c.engine == engine.SGLang {
				f, _ := set.Float("gpu_memory_fraction")
				set["gpu_memory_fraction"] = math.Round((f-0.05)*100) / 100
			}
			if last = check(set); last == "" {
				return set, ""
			}
		}
	}
	if last == "" {
		last = "no quantization allowed fits the model"
	}
	return nil, last
}

// whyNot turns the memory model's start-up failure into a row's reason.
func whyNot(est sim.MemoryEstimate, cfg sim.Config, err error) string {
	var se *sim.StartupError
	if !errors.As(err, &se) {
		return oneLine(err)
	}
	where := fmt.Sprintf("per GPU at TP%d", cfg.TP)
	if cfg.PP > 1 {
		where = fmt.Sprintf("per GPU at TP%d PP%d", cfg.TP, cfg.PP)
	}
	q := cfg.Quantization
	if q == "" {
		q = "bf16"
	}
	switch {
	case est.WeightsGiB > est.TotalGiB:
		return fmt.Sprintf("weights > memory: %.1f GiB of %s weights %s, %.1f GiB on a %s", est.WeightsGiB, q, where, est.TotalGiB, cfg.GPU.ID)
	case strings.Contains(se.Message, engine.MsgKVTooSmall):
		return fmt.Sprintf("KV cache too small for max-model-len: %d tokens fit %s, max-model-len %d", est.KVCacheTokens, where, cfg.MaxModelLen)
	case est.KVCacheGiB <= 0:
		return fmt.Sprintf("no memory left for the KV cache: %.1f GiB of %s weights and %.1f GiB of activations %s, of %.1f GiB usable", est.WeightsGiB, q, est.ActivationGiB, where, est.RequestedGiB)
	}
	return oneLine(err)
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// studySpec is the tuner study of one candidate: the virtual launcher on
// its GPU, a space over the layout of n GPUs and the engine's batching and
// memory settings, each trial a capacity search over the Poisson rate,
// maximising that rate.
func studySpec(o Options, m catalog.Model, c candidate, tps []int) (*spec.Spec, error) {
	params := []space.Param{space.Choices("tensor_parallel", tps...)}
	constraints := []string{"max_batched_tokens >= max_running_requests"}
	if c.disagg {
		dp, dc := disaggParams(c)
		params, constraints = dp, append(constraints, dc...)
	}
	if c.n > 1 && tps[0] < c.n && c.shape == nil && !c.disagg {
		pps := []int{1}
		for pp := 2; pp <= min(c.n, 4); pp *= 2 {
			pps = append(pps, pp)
		}
		params = append(params, space.Choices("pipeline_parallel", pps...))
		constraints = append(constraints, fmt.Sprintf("tensor_parallel * pipeline_parallel <= %d", c.n))
	}
	mem := make([]float64, len(memChoices))
	for i, f := range memChoices {
		if c.engine == engine.SGLang {
			f -= 0.05 // SGLang's fraction covers weights and KV only
		}
		mem[i] = math.Round(f*100) / 100
	}
	params = append(params,
		space.Choices("max_running_requests", runningChoices...),
		space.Choices("max_batched_tokens", batchedChoices...),
		space.Choices("gpu_memory_fraction", mem...),
		space.Choices("kv_cache_dtype", o.KVCacheDTypes...),
		space.Choices("quantization", o.Quantizations...),
		space.Choices("max_model_len", o.MaxModelLen))
	if o.Spec != nil {
		params = append(params, space.Choices("spec_method", "none", o.Spec.Method), space.Choices("spec_tokens", o.Spec.Tokens))
		if o.Spec.Draft != "" {
			params = append(params, space.Choices("spec_draft_model", o.Spec.Draft))
		}
	}
	spc, err := space.New(params, constraints...)
	if err != nil {
		return nil, err
	}
	if o.Spec != nil {
		// The acceptance rate is the simulator's own flag: every trial
		// carries it, and it is no serve command's.
		spc.Extra = []string{engine.Flag(c.engine, "sim_spec_acceptance"), strconv.FormatFloat(o.Spec.Acceptance, 'g', -1, 64)}
	}
	v := launcherFor(o, c)
	// The search starts at one rate whatever the target, so that the
	// capacity found is the candidate's alone (starting at the target put
	// the search's floor, start/1024, above the capacity of a small
	// candidate at a large target, and its ceiling beyond MaxRate at an
	// absurd one); doubling from it to any capacity up to MaxRequestRate
	// costs at most 12 probes.
	const start = 4
	study := &spec.Spec{
		File: "whatif", Text: fmt.Sprintf("whatif %s on %s", o.Model, c.name()),
		Name: "whatif-" + strings.ReplaceAll(c.name(), " ", "-"), Model: o.Model, ModelConfig: v.ModelConfig,
		Engine:   c.engine,
		Launcher: spec.LauncherSpec{Kind: "virtual", ModelConfig: v.ModelConfig},
		Hardware: spec.Hardware{GPU: c.gpu.ID},
		Space:    spc,
		Workload: spec.Workload{Dataset: o.Dataset, Capacity: true, CapacityRate: true, StartRate: start,
			MaxRate: spec.MaxRequestRate, RatePrecision: o.Precision, RequestsPerLevel: o.RequestsPerLevel, Timeout: 10 * time.Minute,
			ProbeSpan: o.ProbeSpan},
		SLO:        o.SLO,
		Objectives: []recommend.Objective{{Metric: "request_rate", Maximize: true}},
		Tuner: spec.TunerSpec{Sampler: spec.SamplerTPE, Trials: o.Trials, Seed: o.Seed,
			Objective: recommend.Objective{Metric: "request_rate", Maximize: true}, Precheck: true},
	}
	if m.Vocab == 0 {
		return nil, errors.New("model without a vocabulary")
	}
	return study, nil
}

// layoutEval runs a trial with data_parallel filling the candidate's n
// GPUs: the space ranges over tensor and pipeline parallel sizes, and what
// is left of n is data-parallel ranks inside the replica; an MoE
// candidate's shape fixes the layout instead.
type layoutEval struct {
	r      *tuner.TrialRunner
	n      int
	shape  *shape
	disagg bool // a disaggregated configuration on the GPUs its parts take
}

func (e *layoutEval) Evaluate(ctx context.Context, number int, set space.Settings, _ []int) trial.Result {
	if e.disagg {
		s := withDisagg(set)
		return e.r.Evaluate(ctx, number, s, make([]int, s.GPUs()))
	}
	return e.r.Evaluate(ctx, number, withLayout(set, e.n, e.shape), make([]int, e.n))
}

// withLayout adds data_parallel = n / (tensor_parallel x pipeline_parallel),
// or the MoE shape's layout (shape.apply) when there is one.
func withLayout(set space.Settings, n int, sh *shape) space.Settings {
	s := set.Clone()
	if sh != nil {
		sh.apply(s)
		return s
	}
	tp, pp := 1, 1
	if v, ok := s.Int("tensor_parallel"); ok {
		tp = v
	}
	if v, ok := s.Int("pipeline_parallel"); ok {
		pp = v
	}
	if dp := n / max(tp*pp, 1); dp > 1 {
		s["data_parallel"] = dp
	}
	return s
}

// bestTrial is the trial with the highest capacity and its capacity level.
func bestTrial(study *spec.Spec, trials []store.Trial) (store.Trial, measure.Level, bool) {
	var best store.Trial
	var level measure.Level
	bestV, found := 0.0, false
	for _, t := range trials {
		if t.Status != measure.StatusOK {
			continue
		}
		for i, p := range recommend.PointsOf(t.Number, t.Settings, 0, t.LoadPoints) {
			if !study.SLO.Met(p) {
				continue
			}
			if v := p.Load.Rate; v > bestV {
				best, level, bestV, found = t, t.LoadPoints[i], v, true
			}
		}
	}
	return best, level, found
}

// noCapacity says why no trial met the SLOs: the failures when none ran,
// else what the lowest rate probed measured against the limits.
func noCapacity(study *spec.Spec, trials []store.Trial) string {
	fails := map[string]int{}
	var low *measure.Level
	for _, t := range trials {
		if t.Status != measure.StatusOK {
			fails[string(t.Failure)]++
			continue
		}
		for i, lp := range t.LoadPoints {
			if low == nil || lp.Load.Rate < low.Load.Rate || lp.Load.Rate == low.Load.Rate && closer(study.SLO, lp, *low) {
				low = &t.LoadPoints[i]
			}
		}
	}
	if low == nil {
		var parts []string
		for f, n := range fails {
			parts = append(parts, fmt.Sprintf("%d %s", n, f))
		}
		sort.Strings(parts)
		return "every configuration tried failed: " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("misses the SLOs even at %.3g req/s: %s", low.Load.Rate, missed(study.SLO, *low))
}

// missed lists the limits a level misses: "tpot_p99 50.9 ms > 50".
func missed(slo recommend.SLO, lv measure.Level) string {
	p := recommend.Point{GPUs: 1, Level: lv}
	var out []string
	if lv.Summary.Failed > 0 {
		out = append(out, fmt.Sprintf("%d requests failed", lv.Summary.Failed))
	}
	for _, l := range slo {
		if v, ok := p.Metric(l.Metric); ok && v > l.Max {
			out = append(out, fmt.Sprintf("%s %.4g ms > %g", l.Metric, v, l.Max))
		}
	}
	return strings.Join(out, ", ")
}

// closer reports whether a is nearer to meeting the SLOs than b: its
// worst limit is less far past its bound.
func closer(slo recommend.SLO, a, b measure.Level) bool {
	return worstRatio(slo, a) < worstRatio(slo, b)
}

func worstRatio(slo recommend.SLO, lv measure.Level) float64 {
	p := recommend.Point{GPUs: 1, Level: lv}
	w := 0.0
	for _, l := range slo {
		if v, ok := p.Metric(l.Metric); ok {
			w = math.Max(w, v/l.Max)
		}
	}
	return w
}

// situationOf is where the capacity level's prediction sits for its error
// band: the load regime by the requests in flight (Little's law: rate x
// mean end-to-end latency), long context by the requests' mean length,
// and the metrics its verdict rests on: every SLO limit's, and the
// throughput that capacity is.
func situationOf(slo recommend.SLO, lv measure.Level, m catalog.Model) sim.Situation {
	s := lv.Summary
	sit := sim.Situation{Regime: sim.RegimeAt(lv.Load.Rate, s), MoE: m.MoE(), LongContext: sim.LongContextOf(s)}
	for _, l := range slo {
		if mt := sim.MetricOfLimit(l.Metric); mt != "" && !slices.Contains(sit.Metrics, mt) {
			sit.Metrics = append(sit.Metrics, mt)
		}
	}
	sit.Metrics = append(sit.Metrics, "throughput")
	return sit
}

// describeSituation names a row's regime: the load regime and the
// structural ones it adds (tp>1, moe, long-context), as the fidelity
// suite names them.
func describeSituation(s sim.Situation) string {
	return strings.Join(s.Regimes(), ", ")
}

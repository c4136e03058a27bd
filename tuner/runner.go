package tuner

import (
	"context"
	"sync"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// MemoryModel is the start-up memory check of a study's precheck
// (tuner.precheck): tuner/memory's Model, the simulator's memory model,
// which tuner does not link. Fits says why launch spec ls would not start
// on gpu (the study's hardware.gpu) with the model's config.json
// (modelConfig, "" for a catalog model); OOM reads the engine's own
// message out of such an error.
type MemoryModel interface {
	Fits(gpu, modelConfig string, ls launcher.Spec) error
	OOM(err error) (msg string, ok bool)
}

// TrialRunner is the production Evaluator: it checks the settings against
// the space's constraints and the memory model, and runs the trial with
// the spec's launcher.
type TrialRunner struct {
	Spec *spec.Spec
	// Launcher is the launcher its kind built from the spec's launcher
	// section; nil = built from the spec at first use (NewLauncher).
	Launcher launcher.Launcher
	// Memory is the precheck's memory model; nil = the precheck checks the
	// space's rules only.
	Memory   MemoryModel
	Bench    trial.BenchFunc                                 // default bench.Run
	GPUs     gpu.Reader                                      // NVML telemetry of real GPUs; nil = none
	Progress func(number int, level string, done, total int) // optional
	// Bootstrap is the bootstrap resamples of each level's CIs; 0 =
	// measure's default (the sampler benchmark, which only ranks, uses 1).
	Bootstrap int
	// Owner labels the engines with the study's run (launcher.Spec.Owner).
	Owner string
	// Forecast keeps only each level's summary and sends at most
	// ForecastProbeRequests per rate probe: what the guided sampler's
	// forecasts need, in bounded memory and time.
	Forecast bool
	// SummariesOnly keeps only each level's summary
	// (trial.Plan.SummariesOnly), for a study whose answer reads no
	// request of its levels.
	SummariesOnly bool
	// CapacityOnly says the study reads of a capacity search only its
	// capacity and, at it, its requests' latencies and counts: a probe
	// that misses may end as soon as it misses a latency bound
	// (trial.Capacity.Bounds), which gives the same capacity in a
	// fraction of the time, and where the SLO bounds no ITL each level
	// measures its requests' TTFT, TPOT and E2EL alone
	// (trial.Plan.LatenciesOnly).
	CapacityOnly bool

	gate *QualityBaseline // the quality gate's baseline, when it applies (UseQualityGate)

	build sync.Once // builds Launcher when it is nil
}

// launcher is the launcher the runner's trials start with (launcherFor),
// Launcher built from the spec when it is nil.
func (r *TrialRunner) launcher() launcher.Launcher {
	r.build.Do(func() {
		if r.Launcher == nil {
			r.Launcher, _ = NewLauncher(r.Spec)
		}
	})
	return launcherFor(r.Spec, r.Launcher)
}

var _ Evaluator = (*TrialRunner)(nil)

// LaunchSpec is what trial number launches with set on gpus. SGLang serves
// its Prometheus metrics only when asked (vLLM always does): the trial asks,
// so the engine's own figures are read during each level. The stored and
// recommended settings stay the sampler's.
func (r *TrialRunner) LaunchSpec(number int, set space.Settings, gpus []int) launcher.Spec {
	study := r.Spec
	if study.Engine == engine.SGLang {
		if _, ok := set["enable_metrics"]; !ok {
			set = set.Clone()
			set["enable_metrics"] = true
		}
	}
	return launcher.Spec{Engine: study.Engine, Model: study.Model, Settings: set, Extra: study.Space.Extra,
		GPUs: gpus, Study: study.Name, Trial: number, Owner: r.Owner}
}

// Evaluate runs trial number with settings on gpus.
func (r *TrialRunner) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	return r.EvaluateReplica(ctx, number, 0, set, gpus)
}

// EvaluateReplica runs trial number as confirmation run replica (0 = a
// search trial). Every search trial measures the same workload (one seed:
// common random numbers, so trials differ by their settings only); each
// confirmation run draws another.
func (r *TrialRunner) EvaluateReplica(ctx context.Context, number, replica int, set space.Settings, gpus []int) trial.Result {
	study := r.Spec
	ls := r.LaunchSpec(number, set, gpus)
	if err := study.Space.Check(set, r.checkContext(ls)); err != nil {
		// Rejected before launch, memory precheck included: infeasible, as
		// docs/spec.md says (oom is kept for engines that ran out of memory
		// when started). The memory model's message is the engine's own.
		if msg, ok := r.oom(err); ok {
			return trial.Failed(engine.FailInfeasible, "memory precheck: "+msg)
		}
		return trial.Failed(engine.FailInfeasible, err.Error())
	}
	plan := r.Plan(ls, replica)
	if r.Progress != nil {
		plan.Progress = func(level string, done, total int) { r.Progress(number, level, done, total) }
	}
	return trial.Run(ctx, plan)
}

// Plan is the trial plan of launch spec ls as confirmation run replica (0
// = a search trial).
func (r *TrialRunner) Plan(ls launcher.Spec, replica int) trial.Plan {
	study := r.Spec
	plan := trial.Plan{
		Launcher:         r.launcher(),
		Spec:             ls,
		ReadyTimeout:     study.Launcher.ReadyTimeout,
		Dataset:          study.Workload.Dataset,
		Levels:           study.Workload.Levels,
		RequestsPerLevel: study.Workload.RequestsPerLevel,
		Warmup:           study.Workload.Warmup,
		Timeout:          study.Workload.Timeout,
		Goodput:          study.SLO.Goodput(),
		Seed:             WorkloadSeed(study.Tuner.Seed, replica),
		Bootstrap:        r.Bootstrap,
		Bench:            r.Bench,
		GPUs:             r.GPUs,
		ScrapeMetrics:    true,
	}
	if study.Workload.Capacity {
		slo := study.SLO
		plan.Capacity = &trial.Capacity{MaxConcurrency: study.Workload.MaxConcurrency,
			Met: func(s measure.Summary) bool {
				return slo.Met(recommend.Point{GPUs: 1, Level: measure.Level{Summary: s}})
			}}
		if w := study.Workload; w.CapacityRate {
			plan.Capacity.Rate = &trial.RateSearch{Start: w.StartRate, Min: w.StartRate / 1024, Max: w.MaxRate,
				Precision: w.RatePrecision, Burstiness: w.Burstiness, MinSpan: w.ProbeSpan}
			if r.Forecast {
				plan.Capacity.Rate.MaxRequests = ForecastProbeRequests
			}
		}
		if r.CapacityOnly {
			plan.Capacity.Bounds = bounds(slo)
			plan.LatenciesOnly = perRequest(slo)
		}
	}
	plan.SummariesOnly = r.Forecast || r.SummariesOnly
	r.qualityPlan(&plan, replica)
	return plan
}

// bounds are slo's limits on latency percentiles as the measurement
// watches them (measure.Bound), nil when slo allows failed requests: a
// level cut short fails the requests it did not answer.
func bounds(slo recommend.SLO) []measure.Bound {
	if slo.MaxErrorRate() > 0 {
		return nil
	}
	var out []measure.Bound
	for _, l := range slo.Latency() {
		if m, ok := measure.LookupMetric(l.Metric); ok {
			if b, ok := m.Bound(l.Max); ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// perRequest reports whether every limit of slo is on a latency each
// request has one of (TTFT, TPOT, E2EL), which records without chunk
// times still give.
func perRequest(slo recommend.SLO) bool {
	for _, l := range slo.Latency() {
		if m, ok := measure.LookupMetric(l.Metric); !ok || !m.PerRequest() {
			return false
		}
	}
	return true
}

// ForecastProbeRequests bounds the requests of one rate probe of a
// forecast: the probe span (30 s by default) at 68 req/s. A probe
// above that rate sends for less long, which still shows the queue
// of a rate well past the capacity; one forecast of a capacity search
// simulates at most its probes (about 15) times this.
const ForecastProbeRequests = 2048

// WorkloadSeed is the seed of the workload of confirmation run replica (0
// for the search trials) of a study seeded seed. Level i of a trial is
// seeded WorkloadSeed+i.
func WorkloadSeed(seed int64, replica int) uint64 {
	return uint64(seed) + 1_000_003*uint64(replica)
}

// checkContext gives space.Check the engine, the model's heads and, with
// precheck on and a memory model, its fit. Models the catalog does not
// know skip both.
func (r *TrialRunner) checkContext(ls launcher.Spec) space.Context {
	study := r.Spec
	c := space.Context{Engine: study.Engine, GPUs: len(ls.GPUs)}
	m, err := r.model()
	if err != nil {
		return c
	}
	c.AttentionHeads, c.KVHeads = m.Heads, m.KVHeads
	if study.Tuner.Precheck && r.Memory != nil {
		c.Fits = func(set space.Settings) error {
			ls.Settings = set
			return r.fits(ls)
		}
	}
	return c
}

// model is the study's model shape, from the catalog or its config.json.
func (r *TrialRunner) model() (catalog.Model, error) {
	if p := r.Spec.Launcher.ModelConfig; p != "" {
		return catalog.LoadHFConfig(p, r.Spec.Model)
	}
	return catalog.LookupModel(r.Spec.Model)
}

// fits runs the memory model's start-up accounting for the trial.
func (r *TrialRunner) fits(ls launcher.Spec) error {
	return r.Memory.Fits(r.Spec.Hardware.GPU, r.Spec.Launcher.ModelConfig, ls)
}

// oom returns the engine's message when err is the memory model's
// start-up failure.
func (r *TrialRunner) oom(err error) (string, bool) {
	if r.Memory == nil {
		return "", false
	}
	return r.Memory.OOM(err)
}

// Refuses reports whether the trial of set would end before launching:
// the space's constraints or, with tuner.precheck, the memory model.
func (r *TrialRunner) Refuses(set space.Settings) bool {
	ls := r.LaunchSpec(0, set, nil)
	return r.Spec.Space.Check(set, r.checkContext(ls)) != nil
}

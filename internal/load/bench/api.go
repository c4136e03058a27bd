package bench

import (
	"time"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
)

// Config is one benchmark run at one load level.
type Config struct {
	Target      openai.Target
	Dataset     DatasetSpec
	Requests    []measure.Request // pre-generated requests; overrides Dataset when set
	Load        measure.Load
	NumRequests int           // count-bound run (ignored when Duration > 0)
	Duration    time.Duration // duration-bound run
	Warmup      int           // warm-up requests at the run's concurrency, excluded
	Timeout     time.Duration // per request
	Seed        uint64
	Summary     measure.SummaryOptions
	Progress    func(done, total int) // optional; called from one goroutine; total 0 = duration-bound
	// Waiting, optional, is told every second of the requests in flight
	// and the oldest one's age (measure.Phase.Waiting).
	Waiting func(inflight int, oldest time.Duration)
	NoAlign bool // do not re-size synthetic prompts with the server's /tokenize
	// ResetPrefixCache empties the server's prefix cache before the level
	// is sent (ResetPrefixCache; HTTP targets only); meta's
	// prefix_cache_reset says how, or why not.
	ResetPrefixCache bool
	KeepEOS          bool // send ignore_eos=false (default: ignore_eos on)
	// Sampling is what each request asks the engine to sample with
	// (default greedy, as vLLM's benchmark sends).
	Sampling Sampling
	// Transport runs the requests; nil = HTTP to Target. The simulated
	// engine's virtual clock (sim.Virtual) is the other one.
	Transport measure.Transport

	// ScrapeMetrics reads the engine's Prometheus /metrics (Target's base
	// URL) every MetricsInterval (scrape.DefaultInterval when 0) during
	// the measured phase into Summary.Engine. A transport that reports
	// its engine itself (the simulator's) fills Summary.Engine anyway.
	ScrapeMetrics   bool
	MetricsInterval time.Duration
	// GPU, when set, samples GPUs through NVML during the measured phase
	// into Summary.GPU and Result.GPU.
	GPU *GPUWatch

	// TimeScale is how many times faster than real time the engine runs
	// (a time-scaled simulated engine; 0 = 1). Everything above is in the
	// engine's time, and so are the records and the summary Run returns:
	// Run sends at Load.Rate x TimeScale with Timeout and Duration
	// divided by it, then converts what it measured (measure.EngineTime).
	TimeScale float64

	// KeepChunks keeps each measured record's chunk times in
	// Result.Records (--requests-out writes them). Without it, or
	// Summary.KeepSamples, an HTTP level folds them into its summary as
	// each request ends (measure.Folded), so it holds a few numbers per
	// request: 200,000 conversation turns with their chunk times took
	// over a gigabyte.
	KeepChunks bool

	// Bounds are latency bounds the level must meet, under an SLO that
	// allows no failed request: the measured phase of a count-bound run
	// may end once they are missed (measure.Phase.Bounds), where the
	// transport can; its summary then holds the requests answered by
	// then and the others as cancelled. For a search that needs only
	// whether a level met its SLO.
	Bounds []measure.Bound
	// LatenciesOnly: the level is read for its requests' TTFT, TPOT,
	// E2EL and counts alone (measure.Phase.LatenciesOnly); a transport
	// may then leave out chunk times, and the summary its ITL and peak
	// output, and what the engine reports of itself.
	LatenciesOnly bool
}

// GPUWatch says which GPUs a run samples, and how often.
type GPUWatch struct {
	Reader   gpu.Reader
	GPUs     []int         // NVML indices
	Interval time.Duration // default gpu.DefaultInterval
}

// lengthsOnly is implemented by transports that never read prompt text
// (the simulated engine in virtual time): Run then generates lengths only.
type lengthsOnly interface {
	LengthsOnly() bool
}

// Result is the outcome of Run.
type Result struct {
	Summary measure.Summary
	Records []measure.Record
	// Start is the instant (with its monotonic reading) that the measured
	// records' offsets count from.
	Start time.Time
	// GPU holds the samples of Config.GPU's GPUs during the measured phase.
	GPU []gpu.Sample
}

// engineReporter is implemented by transports that report their engine's
// metrics themselves (the simulated engine): those of the last measured
// phase.
type engineReporter interface {
	EngineMetrics() *measure.EngineMetrics
}

// Sampling is a request's sampling parameters: temperature (0 is greedy),
// and top_p and top_k when set (nil: the engine's, or the model's
// generation config's, defaults).
type Sampling struct {
	Temperature float64
	TopP        *float64
	TopK        *int
}

package store

import (
	"fmt"
	"time"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Study statuses.
const (
	StudyRunning     = "running"
	StudyFinished    = "finished"
	StudyFailed      = "failed"
	StudyInterrupted = "interrupted"
)

// Study is one tuning study.
type Study struct {
	ID       int64
	Name     string // unique
	Spec     string // the study spec text as given (YAML); must hold no secret
	Seed     uint64
	Started  time.Time
	Finished time.Time // zero while running
	Status   string    // StudyRunning, ...
	// ModelConfig is the Hugging Face config.json of a model the catalog
	// lacks, as the study read it ("" for catalog models).
	ModelConfig string
	// Tool is the servetune version that created the study ("" for
	// studies stored before it was kept).
	Tool string
	// QualityBaseline is the quality gate's measurement of the baseline
	// configuration, as the tuner wrote it (JSON); "" before one.
	QualityBaseline string
	// Stop is set when the study stopped before its trial count on the
	// sampler's judgement (the guided sampler's forecast).
	Stop Stop
}

// Stop is an early stop: after At search trials of Of planned, and Why.
type Stop struct {
	At, Of int
	Why    string
}

// Stopped reports whether the study stopped early.
func (s Stop) Stopped() bool { return s.Why != "" }

// String is "stopped at 4 of 30 trials: why", "" when it did not stop.
func (s Stop) String() string {
	if !s.Stopped() {
		return ""
	}
	return fmt.Sprintf("stopped at %d of %d trials: %s", s.At, s.Of, s.Why)
}

// Forecast is the sampler's forecast of one configuration before (and
// while) the study measured it: the guided sampler's simulator in virtual
// time, corrected by the measurements so far. The report shows it for
// the values of a parameter no trial measured.
type Forecast struct {
	Settings engine.Settings
	// Value is the objective's metric (in its own unit) at the best level
	// forecast to meet the SLOs; 0 when Met is false.
	Value float64
	// Met: some level is forecast more likely than not to meet the SLOs.
	Met bool
	// PStart is the chance that the engine starts (its memory).
	PStart float64
	// Failure is why the forecast run failed (an engine.Failure class:
	// infeasible is a configuration the space's rules reject), "" when it
	// ran.
	Failure string
}

// MaxForecasts bounds the forecasts stored with a study: the guided
// sampler forecasts up to about a thousand configurations of a space
// (every one of a grid of at most 1,024, else a sample and its
// neighbours), each row a hundred bytes or so.
const MaxForecasts = 2048

// Trial is one stored trial with its load points.
type Trial struct {
	ID         int64
	StudyID    int64
	Number     int
	Settings   engine.Settings
	GPUs       []int
	Status     measure.Status
	Failure    engine.Failure // FailNone unless Status is StatusFailed
	FailureMsg string
	LogTail    string
	Objective  *float64 // nil when none was computed
	// Confirms is the number of the trial this one measures again (a
	// confirmation run of a final candidate, with another workload seed);
	// nil for a trial the sampler proposed.
	Confirms *int
	// Pending is how long the engine's job waited in a batch scheduler's
	// queue before it started (nil when the launcher queues nothing);
	// Launch is how long it took from starting to healthy (nil when it
	// never was, or for trials stored before these were kept).
	Pending, Launch *time.Duration
	// Reruns counts the times the trial was started again after an
	// interruption (a resumed study re-runs it in place).
	Reruns     int
	Started    time.Time
	Finished   time.Time       // zero while running
	LoadPoints []measure.Level // without records (see Requests)
	// Quality is the quality gate's verdict; nil when it was not run.
	Quality *measure.Quality
	// Unreadable says why a value stored with the trial (its settings, a
	// load point, ...) could not be read back; "" when all could. Such a
	// trial keeps its number and status and is measured by nothing: the
	// study's other trials read on.
	Unreadable string
}

// TrialResult is everything a finished trial stores, written in one transaction.
type TrialResult struct {
	StudyID    int64
	Number     int
	Status     measure.Status
	Failure    engine.Failure
	FailureMsg string
	LogTail    string
	Objective  *float64
	// Pending and Launch: see Trial.
	Pending, Launch *time.Duration
	Finished        time.Time // zero means now
	// LoadPoints are the measured levels, each with its per-request
	// records.
	LoadPoints []measure.Level
	// GPU is the trial's GPU telemetry as NVML read it; stored as offsets
	// from the trial's start and energy since each GPU's first counter
	// reading (GPUSamples).
	GPU     []gpu.Sample
	Quality *measure.Quality // the quality gate's verdict, when it ran
}

package store

import (
	"time"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/space"
)

// Study statuses.
const (
	StudyRunning     = "running"
	StudyFinished    = "finished"
	StudyFailed      = "failed"
	StudyInterrupted = "interrupted"
)

// Trial statuses.
const (
	TrialRunning     = "running"
	TrialOK          = "ok"
	TrialFailed      = "failed"
	TrialPruned      = "pruned"
	TrialInterrupted = "interrupted"
)

// Trial failure classes; "" when the trial did not fail.
const (
	FailNone        = ""
	FailOOM         = "oom"
	FailCrash       = "crash"
	FailNotReady    = "not_ready"
	FailLaunchError = "launch_error"
	FailBenchError  = "bench_error"
	FailInfeasible  = "infeasible" // rejected before launch by a constraint or the memory check
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
}

// Trial is one stored trial with its load points.
type Trial struct {
	ID         int64
	StudyID    int64
	Number     int
	Settings   space.Settings
	GPUs       []int
	Status     string // TrialRunning, TrialOK, ...
	Failure    string // FailOOM, ... or ""
	FailureMsg string
	LogTail    string
	Objective  *float64 // nil when none was computed
	Started    time.Time
	Finished   time.Time // zero while running
	LoadPoints []LoadPoint
}

// LoadPoint is one trial measured at one load level.
type LoadPoint struct {
	Level   string  // "concurrency=8" or "rate=4"
	Kind    string  // "concurrency" or "rate"
	Value   float64 // the level's value
	Summary bench.Summary
}

// GPUSample is one telemetry sample of one GPU during a trial.
type GPUSample struct {
	T            time.Duration // offset from the trial's start
	GPU          int           // NVML index
	PowerW       float64       // NaN when the GPU does not report it (stored as NULL)
	MemUsedBytes int64
	UtilPct      float64 // share of time a kernel ran, percent; NaN when unknown
	SMClockMHz   int
	EnergyJ      float64 // energy since the trial's start, joules; NaN when unknown
}

// TrialResult is everything a finished trial stores, written in one transaction.
type TrialResult struct {
	StudyID    int64
	Number     int
	Status     string
	Failure    string
	FailureMsg string
	LogTail    string
	Objective  *float64
	Finished   time.Time // zero means now
	LoadPoints []LoadPoint
	// Requests holds each load level's per-request records, keyed by LoadPoint.Level.
	Requests map[string][]bench.Record
	GPU      []GPUSample
}

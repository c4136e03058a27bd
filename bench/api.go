package bench

import (
	"net/http"
	"time"
)

// This file fixes the package's entry points that other packages build on
// (sim, trial). Bodies are filled in by the benchmark client's implementation.

// SLO holds goodput limits in milliseconds; zero means "no limit".
type SLO struct {
	TTFTms float64 `json:"ttft_ms,omitempty"`
	TPOTms float64 `json:"tpot_ms,omitempty"`
	E2ELms float64 `json:"e2el_ms,omitempty"`
}

// SummaryOptions control Summarize.
type SummaryOptions struct {
	Goodput   SLO
	Bootstrap int    // bootstrap resamples for CIs; 0 = default
	Seed      uint64 // seed of the bootstrap resampling
	// KeepSamples stores the per-request TTFT, TPOT, ITL and E2EL values in
	// Summary.Samples (for `bench compare`).
	KeepSamples bool
}

// Target is an OpenAI-compatible endpoint.
type Target struct {
	BaseURL  string      // e.g. http://127.0.0.1:8000
	Model    string      // model name sent in requests
	Endpoint string      // "completions" (default) or "chat"
	Headers  http.Header // extra headers
	APIKey   string      // Bearer token; never written anywhere
}

// Config is one benchmark run at one load level.
type Config struct {
	Target      Target
	Dataset     DatasetSpec
	Requests    []Request // pre-generated requests; overrides Dataset when set
	Load        Load
	NumRequests int           // count-bound run (ignored when Duration > 0)
	Duration    time.Duration // duration-bound run
	Warmup      int           // warm-up requests at the run's concurrency, excluded
	Timeout     time.Duration // per request
	Seed        uint64
	Summary     SummaryOptions
	Progress    func(done, total int) // optional; called from one goroutine; total 0 = duration-bound
	NoAlign     bool                  // do not re-size synthetic prompts with the server's /tokenize
	KeepEOS     bool                  // send ignore_eos=false (default: ignore_eos on)
}

// Result is the outcome of Run.
type Result struct {
	Summary Summary
	Records []Record
	// Start is the instant (with its monotonic reading) that the measured
	// records' offsets count from.
	Start time.Time
}

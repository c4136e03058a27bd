package bench

import (
	"time"
)

// ErrorClass names why a request failed. The empty class means success.
type ErrorClass string

// Failure classes, as DESIGN.md defines them. Failed requests are counted and
// excluded from latency metrics.
const (
	ErrNone      ErrorClass = ""
	ErrConnect   ErrorClass = "connect"      // dial or transport failure before a response
	ErrTimeout   ErrorClass = "timeout"      // per-request deadline passed
	ErrHTTP4xx   ErrorClass = "http_4xx"     // non-200 4xx status
	ErrHTTP5xx   ErrorClass = "http_5xx"     // non-200 5xx status
	ErrStream    ErrorClass = "stream_error" // error event inside a 200 stream
	ErrTruncated ErrorClass = "truncated"    // stream ended without finish_reason/usage
	ErrEmpty     ErrorClass = "empty"        // stream carried no text at all
)

// ErrorClasses lists every failure class in report order.
var ErrorClasses = []ErrorClass{ErrConnect, ErrTimeout, ErrHTTP4xx, ErrHTTP5xx, ErrStream, ErrTruncated, ErrEmpty}

// Request is one request of a workload: what is sent and the lengths intended.
// The simulated engine consumes Requests directly in virtual time, so every
// field that changes serving cost lives here, not only in Prompt.
type Request struct {
	Index        int    `json:"index"`
	Prompt       string `json:"-"`
	PromptTokens int    `json:"prompt_tokens"` // intended (exact when aligned with /tokenize)
	MaxTokens    int    `json:"max_tokens"`    // output tokens asked for (ignore_eos on)
	PrefixID     int    `json:"prefix_id"`     // shared-prefix group, -1 when none
	PrefixTokens int    `json:"prefix_tokens"` // length of the shared prefix in tokens
	// Synthetic marks prompts built from the word list; only those are
	// re-sized to match the server's /tokenize.
	Synthetic bool `json:"synthetic,omitempty"`
}

// Chunk is one text-carrying stream message as received.
type Chunk struct {
	At     time.Duration `json:"at_ns"`  // offset from the run's start
	Tokens int           `json:"tokens"` // tokens it carried (from usage or text deltas)
}

// Record is what happened to one request. All instants are offsets from the
// run's start on the monotonic clock.
type Record struct {
	Index        int           `json:"index"`
	Warmup       bool          `json:"warmup,omitempty"`
	Sched        time.Duration `json:"t_sched_ns"` // intended send time from the arrival schedule
	Send         time.Duration `json:"t_send_ns"`
	First        time.Duration `json:"t_first_ns"` // first text-carrying message
	Last         time.Duration `json:"t_last_ns"`  // last text-carrying message
	End          time.Duration `json:"t_end_ns"`   // stream closed
	PromptTokens int           `json:"prompt_tokens"`
	OutputTokens int           `json:"output_tokens"`
	Chunks       []Chunk       `json:"chunks,omitempty"`
	Error        ErrorClass    `json:"error,omitempty"`
	ErrorMsg     string        `json:"error_msg,omitempty"`
	Status       int           `json:"status,omitempty"` // HTTP status when one arrived
	// TokensEstimated is set when the server sent no usage, so OutputTokens
	// counts text chunks instead.
	TokensEstimated bool `json:"tokens_estimated,omitempty"`
}

// Dist is a length distribution in tokens.
type Dist struct {
	Kind   string  `json:"kind"` // fixed | uniform | lognormal | normal
	Value  int     `json:"value,omitempty"`
	Min    int     `json:"min,omitempty"`
	Max    int     `json:"max,omitempty"`
	Median float64 `json:"median,omitempty"`
	Mean   float64 `json:"mean,omitempty"`
	Sigma  float64 `json:"sigma,omitempty"` // lognormal sigma or normal std
}

// DatasetSpec describes where prompts come from.
type DatasetSpec struct {
	Kind         string    `json:"kind"` // random | sharegpt | jsonl | prefix | mix
	Path         string    `json:"path,omitempty"`
	Input        Dist      `json:"input"`
	Output       Dist      `json:"output"`
	PrefixGroups int       `json:"prefix_groups,omitempty"` // prefix: number of shared prefixes
	PrefixLen    int       `json:"prefix_len,omitempty"`    // prefix: tokens per shared prefix
	Mix          []MixPart `json:"mix,omitempty"`
}

// MixPart is one weighted component of a mix dataset.
type MixPart struct {
	Weight float64     `json:"weight"`
	Spec   DatasetSpec `json:"spec"`
}

// Load is one load level: open-loop rate, closed-loop concurrency cap, or both.
type Load struct {
	Rate           float64 `json:"request_rate"`         // requests/s; 0 means all at once (inf)
	Burstiness     float64 `json:"burstiness,omitempty"` // gamma shape; 1 (or 0) = Poisson
	MaxConcurrency int     `json:"max_concurrency"`      // 0 = unbounded
}

// Summary is the result of one run (one load level), with vLLM's key names so
// numbers compare directly. Latency fields are milliseconds.
type Summary struct {
	Duration             float64        `json:"duration"` // seconds, first send to last completion
	Completed            int            `json:"completed"`
	Failed               int            `json:"failed"`
	Errors               map[string]int `json:"errors"` // by ErrorClass, every class present
	TotalInputTokens     int            `json:"total_input_tokens"`
	TotalOutputTokens    int            `json:"total_output_tokens"`
	RequestThroughput    float64        `json:"request_throughput"`
	OutputThroughput     float64        `json:"output_throughput"`
	TotalTokenThroughput float64        `json:"total_token_throughput"`
	PeakOutputThroughput float64        `json:"max_output_tokens_per_s"` // peak 1-second window
	RequestGoodput       float64        `json:"request_goodput"`
	MaxConcurrency       int            `json:"max_concurrency"`
	RequestRate          float64        `json:"request_rate"` // 0 = inf

	// Latency statistics. Keys are {mean,median,std,p50,p90,p95,p99,p999}_{metric}_ms.
	TTFT        Stats `json:"-"`
	TTFTSched   Stats `json:"-"` // TTFT measured from the intended send time
	Queue       Stats `json:"-"` // t_send - t_sched
	TPOT        Stats `json:"-"`
	ITL         Stats `json:"-"` // per chunk
	ITLPerToken Stats `json:"-"`
	E2EL        Stats `json:"-"`

	Meta map[string]any `json:"meta,omitempty"`

	// Samples holds the raw values when SummaryOptions.KeepSamples is set.
	Samples *Samples `json:"samples,omitempty"`
}

// Stats summarises one latency metric in milliseconds. MedianCI and P99CI are
// bootstrap 95% confidence intervals.
type Stats struct {
	N        int        `json:"n"`
	Mean     float64    `json:"mean"`
	Median   float64    `json:"median"`
	Std      float64    `json:"std"`
	P50      float64    `json:"p50"`
	P90      float64    `json:"p90"`
	P95      float64    `json:"p95"`
	P99      float64    `json:"p99"`
	P999     float64    `json:"p999"`
	MedianCI [2]float64 `json:"median_ci"`
	P99CI    [2]float64 `json:"p99_ci"`
}

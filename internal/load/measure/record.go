package measure

import "time"

// ErrorClass names why a request failed. The empty class means success.
type ErrorClass string

// Failure classes, as docs/architecture.md defines them. Failed requests are counted and
// excluded from latency metrics.
const (
	ErrNone      ErrorClass = ""
	ErrConnect   ErrorClass = "connect"      // dial or transport failure before a response
	ErrTimeout   ErrorClass = "timeout"      // per-request deadline passed
	ErrRedirect  ErrorClass = "redirect"     // a 3xx answer: redirects are not followed
	ErrHTTP4xx   ErrorClass = "http_4xx"     // non-200 4xx status
	ErrHTTP5xx   ErrorClass = "http_5xx"     // non-200 5xx status
	ErrStream    ErrorClass = "stream_error" // error event inside a 200 stream, or a 200 that is no event stream
	ErrTruncated ErrorClass = "truncated"    // stream ended without finish_reason/usage
	ErrEmpty     ErrorClass = "empty"        // stream carried no text at all
	ErrCancelled ErrorClass = "cancelled"    // stopped by the user (Ctrl-C) or an early stop of the run
)

// ErrorClasses lists every failure class in report order.
var ErrorClasses = []ErrorClass{ErrConnect, ErrTimeout, ErrRedirect, ErrHTTP4xx, ErrHTTP5xx, ErrStream, ErrTruncated, ErrEmpty, ErrCancelled}

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
	// GroupTokens, where > 0, says that the prefix's first GroupTokens
	// tokens are shared by every prefix of group GroupID (a system
	// prompt several prompts begin with: inference-perf's shared_prefix
	// data, each of its num_groups groups one system prompt before its
	// prompts' own questions); the rest of the prefix is PrefixID's own.
	GroupID     int `json:"group_id,omitempty"`
	GroupTokens int `json:"group_tokens,omitempty"`
	// Synthetic marks prompts built from the word list; only those are
	// re-sized to match the server's /tokenize.
	Synthetic bool `json:"synthetic,omitempty"`
}

// Chunk is one text-carrying stream message as received.
type Chunk struct {
	At     time.Duration `json:"at_ns"`  // offset from the run's start
	Tokens int           `json:"tokens"` // tokens it carried (from usage or text deltas)
	// Engine is the instant the server says it produced the chunk, on its
	// own clock from the moment it received the request, when it says so
	// (the time-scaled simulated engine does: measure.EngineTime).
	Engine time.Duration `json:"engine_ns,omitempty"`
	// Lag is how late (real time) the simulated engine wrote the chunk
	// after the instant its timeline gave it: its own slowness on this
	// machine, not the network's (measure.EngineTime removes it).
	Lag time.Duration `json:"lag_ns,omitempty"`
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
	// EngineClock is set when every text chunk carried the server's own
	// clock (Chunk.Engine).
	EngineClock bool `json:"engine_clock,omitempty"`
	// folded is set once Folded.Add took the record's chunks: it is in the
	// engine's time and has no chunks.
	folded bool
}

// Fail marks r as failed with class and a one-line message (at most 300
// bytes).
func (r *Record) Fail(class ErrorClass, msg string) {
	r.Error = class
	if len(msg) > 300 {
		msg = msg[:300]
	}
	r.ErrorMsg = msg
}

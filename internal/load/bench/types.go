package bench

import "time"

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
	Kind         string    `json:"kind"` // random | sharegpt | jsonl | prefix | mix | trace | conversation
	Path         string    `json:"path,omitempty"`
	Input        Dist      `json:"input"`
	Output       Dist      `json:"output"`
	PrefixGroups int       `json:"prefix_groups,omitempty"` // prefix: number of shared prefixes
	PrefixLen    int       `json:"prefix_len,omitempty"`    // prefix: tokens per shared prefix
	Mix          []MixPart `json:"mix,omitempty"`
	Trace        *Trace    `json:"trace,omitempty"` // trace: how Path is read
	// conversation: Sessions sessions of Turns turns each (Input the new
	// user message of a turn, Output its answer), the user thinking
	// Think between an answer and the next turn (none when nil).
	Sessions int        `json:"sessions,omitempty"`
	Turns    *Dist      `json:"turns,omitempty"`
	Think    *ThinkTime `json:"think_time,omitempty"`
}

// Trace is how a trace dataset reads its file (internal/load/trace): each
// request is sent at its time in the trace, with its lengths and prompt
// blocks.
type Trace struct {
	Format string  `json:"format"`          // mooncake | azure | burstgpt | jsonl
	Speed  float64 `json:"speed,omitempty"` // time compression (0: 1)
	// Start and Duration pick a window in the trace's own time, from its
	// first request (Duration 0: to the end).
	Start    time.Duration `json:"start_ns,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// MixPart is one weighted component of a mix dataset.
type MixPart struct {
	Weight float64     `json:"weight"`
	Spec   DatasetSpec `json:"spec"`
}

package measure

import "time"

// Phase is one phase of a benchmark run as a transport executes it: which
// requests to send, when, how many at once, and when to stop. A warm-up
// and a measured load level are each one phase.
type Phase struct {
	// Warmup marks the phase's records as warm-up: excluded from metrics.
	Warmup bool
	// Count is how many requests to send; 0 = until Duration. With a
	// Duration too, sending stops at whichever comes first.
	Count int
	// Duration stops sending at this offset from the phase's start; a
	// request whose intended send time, or the free slot it waits for,
	// falls at or after it is not sent. 0 = no limit.
	Duration time.Duration
	// Request returns the i-th request to send (i counts from 0), with its
	// Index set; it is called in order, once per request.
	Request func(i int) Request
	// Next returns the intended send offset of the next request, called
	// once per request in order; nil sends every request at offset 0.
	Next func() time.Duration
	// MaxConcurrency caps the requests in flight; 0 = none.
	MaxConcurrency int
	// Timeout bounds each request.
	Timeout time.Duration
	// Progress, when set, is told of each finished request (total 0 =
	// duration-bound), from one goroutine.
	Progress func(done, total int)
	// Waiting, when set, is told every second while requests are in
	// flight how many there are and how long the oldest has waited, so a
	// hung server shows as waiting requests, not a bar stuck at 0%.
	Waiting func(inflight int, oldest time.Duration)
	// Done, when set, is given each finished record before the phase
	// keeps it, from one goroutine: a level that keeps no chunk times
	// folds them here (Folded.Add).
	Done func(*Record)
}

// Total is the request count of a count-bound phase; 0 when it is
// duration-bound.
func (p Phase) Total() int {
	if p.Duration > 0 {
		return 0
	}
	return p.Count
}

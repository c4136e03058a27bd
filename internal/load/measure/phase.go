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
	// Sessions, when set, make the phase closed loop: a conversation's
	// sessions, each sending its turns in order, a turn its think time
	// after the answer to the one before ends. Next then gives each
	// session's intended start, once per session in order; Request(i)
	// is turn request i, its PromptTokens the turn's new message alone
	// (the transport prepends the history: every earlier prompt and
	// answer of the session); MaxConcurrency caps the sessions in
	// flight, not the requests; Count is the turns of every session. A
	// failed turn ends its session. Only a transport that Converses
	// runs them.
	Sessions []Session
	// Bounds, when set, are bounds a count-bound phase's level must meet,
	// under an SLO that allows no failed request: a transport that can
	// may end the phase as soon as its records miss one whatever the rest
	// do (MissWatch) and one request was answered (the level has one),
	// failing the requests not yet answered as cancelled,
	// provided it leaves the engine as the whole phase would have (every
	// request gone, nothing cached that a later request could find). The
	// level then misses, as it would have, in a fraction of the time. A
	// transport that cannot ignores them.
	Bounds []Bound
	// LatenciesOnly says the level is read for its requests' TTFT, TPOT,
	// E2EL and counts alone: a transport may record no chunk times (the
	// summary then has no ITL and no peak output) and report nothing of
	// its engine.
	LatenciesOnly bool
}

// Session is one session of a closed-loop phase (Phase.Sessions).
type Session struct {
	// Turns are the session's requests, as indices for Phase.Request.
	Turns []int
	// Think is the wait before each turn after the answer before it
	// ends (Think[0], before the first turn, is unused).
	Think []time.Duration
	// Key names the session's content: sessions of equal keys send the
	// same messages (the same seed and session), which a prefix cache
	// may serve from one another's turns.
	Key int
}

// Total is the request count of a count-bound phase; 0 when it is
// duration-bound.
func (p Phase) Total() int {
	if p.Duration > 0 {
		return 0
	}
	return p.Count
}

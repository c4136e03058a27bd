package sim

import (
	"errors"
	"fmt"
	"math"
)

// Replica is one engine that a caller steps on its own clock: the same
// core (scheduler, paged KV cache, prefix cache, step-time model) that
// Virtual runs, with the events exposed so that a caller can run many
// replicas side by side in one virtual time and route each request when
// it arrives, on what the replicas hold then (a fleet behind a router:
// internal/fleet). Times are seconds on the caller's clock, which never
// goes back. Not safe for concurrent use; distinct replicas are
// independent.
type Replica struct {
	cfg      Config
	est      MemoryEstimate
	c        *core
	overhead float64 // the API server's front end, seconds
	busy     bool
	ends     float64 // when the step in flight ends
	now      float64
	// entering are requests still in the front end, in arrival order
	// (the overhead is one constant, so the first is the next to enter).
	entering []*ReplicaRequest
	enterAt  []float64
	inflight int
	filters  bool // the server's default sampling filters (Virtual.filters)
}

// ReplicaRequest is a request for a Replica: its lengths and what its
// prompt shares with others. ID is the caller's handle, given back by the
// emit function. Content beyond the prompt continues the prefix group:
// PrefixTokens may exceed Prompt, and then the tokens the request
// generates are the group's too, so a conversation's next turn, whose
// prompt is this one's prompt and answer, finds both cached.
type ReplicaRequest struct {
	ID           int
	Prompt       int
	MaxTokens    int
	PrefixID     int // -1: the prompt is the request's own
	PrefixTokens int
	// GroupID's first GroupTokens tokens begin the prefix (a system
	// prompt several prefix groups share); 0 for none.
	GroupID, GroupTokens int

	s     *seq
	probe *seq // the prefix pages' hashes, shared by every replica's Cached
}

// ErrReplicaDP is returned by NewReplica for a configuration of several
// data-parallel ranks: a replica here is one engine core.
var ErrReplicaDP = errors.New("a replica is one data-parallel rank")

// NewReplica starts an engine of cfg. The error is a *StartupError with
// the engine's own message when cfg does not fit in memory.
func NewReplica(cfg Config) (*Replica, error) {
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if cfg.DP > 1 {
		return nil, fmt.Errorf("data parallel size %d: %w; run %d replicas of data parallel size 1", cfg.DP, ErrReplicaDP, cfg.DP)
	}
	est, err := Estimate(cfg)
	if err != nil {
		return nil, err
	}
	return &Replica{cfg: cfg, est: est, c: newCore(cfg, est), overhead: cfg.Constants.FrontendOverheadMs / 1e3,
		filters: cfg.DefaultSampling().Filters()}, nil
}

// Estimate is the replica's start-up memory accounting.
func (r *Replica) Estimate() MemoryEstimate { return r.est }

// Config is the replica's normalized configuration.
func (r *Replica) Config() Config { return r.cfg }

// Admit checks q's lengths as the engine's API server does (vLLM's 400
// over max_model_len, SGLang's cap of the output): the output it will
// generate, or the engine's message when it refuses the request.
func (r *Replica) Admit(q *ReplicaRequest) (maxOut int, msg string) {
	return admitLength(r.cfg.Engine, r.cfg.MaxModelLen, q.Prompt, q.MaxTokens)
}

// Add sends q, which Admit accepted with output maxOut, at now: it
// enters the engine after the API server's front end.
func (r *Replica) Add(now float64, q *ReplicaRequest, maxOut int) {
	s := &seq{id: q.ID, prompt: q.Prompt, maxOut: maxOut, prefixID: -1, arrival: now, filters: r.filters}
	if q.PrefixTokens > 0 && q.PrefixID >= 0 {
		s.prefixID, s.prefixTokens = q.PrefixID, q.PrefixTokens
		if q.GroupTokens > 0 {
			s.groupID, s.groupTokens = q.GroupID, min(q.GroupTokens, q.PrefixTokens)
		}
		if q.probe != nil {
			// Only whole prefix pages were hashed (Cached): the same
			// for every sequence of the group, whatever its own uid.
			s.hashes, q.probe = q.probe.hashes, nil
		}
	}
	// A request sharing nothing caches nothing: a fleet's day holds
	// millions of such pages, and only the request itself, preempted and
	// re-admitted, could hit them (it recomputes its prompt instead).
	s.private = s.prefixID < 0 && r.cfg.Deviation.SharedPrefix == 0
	q.s = s
	r.inflight++
	r.now = now
	r.entering = append(r.entering, q)
	r.enterAt = append(r.enterAt, now+r.overhead)
}

// Next is when the replica's next event happens (a request entering the
// engine, or its step ending); +Inf when it has nothing to do.
func (r *Replica) Next() float64 {
	t := math.Inf(1)
	if r.busy {
		t = r.ends
	}
	if len(r.entering) > 0 && r.enterAt[0] < t {
		t = r.enterAt[0]
	}
	return t
}

// Step runs the replica's next event (Next must be finite): a request
// enters the engine, or the step in flight ends, its sampled tokens go to
// emit (the request's ID, tokens generated so far, whether that was its
// last) and the next step is planned.
func (r *Replica) Step(emit func(id, generated int, last bool)) {
	if len(r.entering) > 0 && (!r.busy || r.enterAt[0] <= r.ends) {
		r.now = r.enterAt[0]
		q := r.entering[0]
		r.entering[0] = nil
		r.entering, r.enterAt = r.entering[1:], r.enterAt[1:]
		q.s.arrival = r.now
		r.c.add(q.s)
		q.s = nil
		if !r.busy {
			r.start()
		}
		return
	}
	r.now = r.ends
	r.c.commit(r.now, func(s *seq, last bool) {
		if last {
			r.inflight--
		}
		emit(s.id, s.generated, last)
	})
	r.start()
}

// start plans the next step.
func (r *Replica) start() {
	b, secs := r.c.schedule(r.now)
	r.busy = b.tokens > 0
	r.ends = r.now + secs
}

// Outstanding is the requests the replica holds and has not finished:
// those in its front end, running and waiting (a router's "least
// outstanding requests").
func (r *Replica) Outstanding() int { return r.inflight }

// Running is the requests in the running batch (vllm:num_requests_running).
func (r *Replica) Running() int { return r.c.active() }

// Waiting is the requests queued for a seat (vllm:num_requests_waiting),
// those still in the front end included.
func (r *Replica) Waiting() int { return r.c.waitingCount() + len(r.entering) }

// KVUsage is the share of KV blocks that requests hold
// (vllm:kv_cache_usage_perc; free cached pages count as free).
func (r *Replica) KVUsage() float64 { return r.c.kvUsage() }

// PrefixCounts are the prompt tokens looked up in the prefix cache and
// those found (vllm:prefix_cache_queries, vllm:prefix_cache_hits).
func (r *Replica) PrefixCounts() (queries, hits int64) {
	return r.c.prefixQueries, r.c.prefixHits
}

// Cached is how many leading tokens of q's prompt the replica's prefix
// cache holds now: what a KV-aware router learns from the engine's KV
// events. Only the prefix group's pages can match (the rest of a prompt
// is its own), so the walk stops there.
func (r *Replica) Cached(q *ReplicaRequest) int {
	c := r.c
	if !c.prefixCache || q.PrefixID < 0 || q.PrefixTokens <= 0 {
		return 0
	}
	if q.probe == nil {
		q.probe = &seq{prompt: q.Prompt, maxOut: q.MaxTokens, prefixID: q.PrefixID, prefixTokens: q.PrefixTokens}
		if q.GroupTokens > 0 {
			q.probe.groupID, q.probe.groupTokens = q.GroupID, min(q.GroupTokens, q.PrefixTokens)
		}
	}
	limit := min(q.PrefixTokens, q.Prompt-1) / c.pageTokens
	n := 0
	for k := 0; k < limit; k++ {
		if c.table[c.pageHash(q.probe, k)] == nil {
			break
		}
		n++
	}
	return n * c.pageTokens
}

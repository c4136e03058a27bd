package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// ErrNoRequests is returned by RunVirtual for an empty workload.
var ErrNoRequests = errors.New("no requests to run")

// Virtual is the simulated engine on a virtual clock: a benchmark transport
// (bench.Config.Transport) that runs each phase through the engine's core
// in simulated time, thousands of requests in milliseconds, and records
// what a client would have measured against the real engine. The engine
// persists across phases, as a server does across load levels: its prefix
// cache stays warm and its clock runs on. Not safe for concurrent use.
type Virtual struct {
	cfg   Config
	est   MemoryEstimate
	cores []*core
	now   float64 // the virtual clock, seconds since the engine started
	// filters: the requests, which set no sampling of their own, take
	// the server's defaults and sample with a top-p or top-k.
	filters bool

	watch  *engineWatch           // the measured phase in progress
	engine *measure.EngineMetrics // what the engine reported of the last measured phase
}

// NewVirtual starts a simulated engine. The error is a *StartupError with
// the engine's own message when cfg does not fit in memory.
func NewVirtual(cfg Config) (*Virtual, error) {
	est, err := cfg.startup()
	if err != nil {
		return nil, err
	}
	v := &Virtual{cfg: cfg, est: est, cores: make([]*core, cfg.DP), filters: cfg.DefaultSampling().Filters()}
	for i := range v.cores {
		v.cores[i] = newCore(cfg, est)
		v.cores[i].sm.tw = v.cores[0].sm.tw // one config: one step model
	}
	return v, nil
}

// Estimate is the engine's start-up memory accounting.
func (v *Virtual) Estimate() MemoryEstimate { return v.est }

// Align leaves prompts as they are: the simulator counts the tokens a
// request says it has, exactly.
func (v *Virtual) Align(context.Context, []measure.Request, *rand.Rand) string {
	return "exact (virtual)"
}

// EngineMetrics is what the engine reported during the last measured
// (not warm-up) phase, the figures a scrape of its /metrics gives a real
// engine's (bench.Run puts them in the level's summary); nil before one.
func (v *Virtual) EngineMetrics() *measure.EngineMetrics { return v.engine }

// LengthsOnly tells the benchmark that prompt text is never read.
func (v *Virtual) LengthsOnly() bool { return true }

// Converses: Send runs a conversation's sessions closed loop
// (measure.Phase.Sessions, convFeed).
func (v *Virtual) Converses() bool { return true }

// Send runs one phase in virtual time and returns its records, offsets
// counted from the phase's start on the virtual clock, and the real instant
// it ran at. Requests are sent at their intended offsets (Phase.Next), or
// when a slot frees under the concurrency cap; one Chunk per emitted stream
// message (one token per engine step; none, and no engine metrics, under
// Phase.LatenciesOnly), First/Last at the steps that
// produced the first and last tokens. Requests that do not fit
// max_model_len fail with http_4xx as the engine's 400 would. The phase
// runs until every request it sent has finished; when ctx ends, those
// unfinished are failed as cancelled at once, as a client's abort would.
func (v *Virtual) Send(ctx context.Context, p measure.Phase) ([]measure.Record, time.Time) {
	wall := time.Now()
	r := virtualRun{
		v: v, phaseFeed: newPhaseFeed(p, v.now), lockstep: v.cfg.DPLockstep(),
		busy: make([]bool, len(v.cores)), ends: make([]float64, len(v.cores)),
	}
	if len(p.Bounds) > 0 && v.mayGiveUp(p) {
		r.miss = measure.NewMissWatch(p.Bounds, p.Count)
	}
	switch {
	case p.Warmup:
	case p.LatenciesOnly:
		v.engine = nil // nothing reported of this phase
	default:
		v.watch = newEngineWatch(v)
	}
	runPhase(ctx, &r.phaseFeed, &r)
	if v.watch != nil {
		v.engine, v.watch = v.watch.metrics(v.cores, v.now), nil
	}
	return r.done(), wall
}

// virtualRun is one phase on the virtual clock: its engine's side
// (phaseEngine).
type virtualRun struct {
	phaseFeed
	v    *Virtual
	seqs []*seq
	rank []int // the data-parallel rank each request went to
	busy []bool
	ends []float64
	// step is the rank whose step ends first (due), -1 for none.
	step int
	// lockstep: the data-parallel ranks step together (Config.DPLockstep);
	// shapes holds each rank's batch of the step planned last.
	lockstep bool
	shapes   []batchShape
	// entering are sent requests still in the server's front end, in
	// send order (the overhead is one constant, so the first is next to
	// reach the engine); enterAt[i] is when entering[i] does.
	entering []*seq
	enterAt  []float64
	// miss watches the phase's bounds (measure.Phase.Bounds); missed
	// says they are missed, and the phase ends (giveUp) once a request
	// was answered (answered counts them).
	miss     *measure.MissWatch
	missed   bool
	answered int
}

// mayGiveUp reports whether a phase of p may end once its bounds are
// missed (measure.Phase.Bounds) and leave the engine as the whole phase
// would: a count-bound, open-loop, measured phase on an engine whose
// later steps depend on no count of the sequences it served (speculative
// acceptance draws on a sequence's number, admission every few steps on
// the steps') and that shares no content between requests of its own
// accord. A request with a prefix makes the phase go to its end
// (virtualRun.arrive): its pages stay cached for later phases.
func (v *Virtual) mayGiveUp(p measure.Phase) bool {
	d := v.cfg.Deviation
	return !p.Warmup && p.Sessions == nil && p.Duration == 0 && p.Count > 0 &&
		!v.cfg.specOn() && d.AdmitEvery <= 1 && d.SharedPrefix == 0
}

func (r *virtualRun) clock() float64 { return r.v.now }

func (r *virtualRun) due() (enter, step float64) {
	enter, step, r.step = math.Inf(1), math.Inf(1), -1
	if len(r.entering) > 0 {
		enter = r.enterAt[0]
	}
	for i := range r.v.cores {
		if r.busy[i] && r.ends[i] < step {
			step, r.step = r.ends[i], i
		}
	}
	return enter, step
}

// enterNext hands the first request in the server's front end to its
// engine.
func (r *virtualRun) enterNext() {
	s := r.entering[0]
	r.entering, r.enterAt = r.entering[1:], r.enterAt[1:]
	r.enter(s)
}

// stepEnd ends the step of the rank due (due), or, with the ranks in
// lockstep, every rank's step together (startLockstep).
func (r *virtualRun) stepEnd() {
	v := r.v
	if r.lockstep {
		for i, c := range v.cores {
			if r.busy[i] {
				c.commit(v.now, r.emit)
			}
		}
		r.startLockstep()
		return
	}
	v.cores[r.step].commit(v.now, r.emit)
	r.start(r.step)
}

// observe samples the engine's gauges of a measured phase.
func (r *virtualRun) observe() {
	if w := r.v.watch; w != nil {
		w.sample(r.v.cores)
	}
}

// gaveUp gives the phase up (giveUp) once it missed its bounds and a
// request was answered.
func (r *virtualRun) gaveUp() bool {
	if r.missed && r.answered > 0 {
		r.giveUp()
		return true
	}
	return false
}

// errMissed is the message of a request a phase that missed its bounds
// did not answer (giveUp).
const errMissed = "not answered: the level had missed its latency bounds"

// giveUp ends a phase that missed its bounds (measure.Phase.Bounds): the
// requests not yet answered fail as cancelled, and every request leaves
// the engine as each would have at its end, its blocks freed and its own
// pages left cached (no later request can find them), so that the next
// phase runs as it would after the whole phase. The clock stays at the
// instant the phase ended: the next one starts there.
func (r *virtualRun) giveUp() {
	for i, s := range r.seqs {
		if s != nil && !s.done {
			r.fail(i, r.v.now, measure.ErrCancelled, errMissed)
		}
	}
	for _, c := range r.v.cores {
		c.abortAll()
		c.retime(r.v.now, 0)
	}
	r.entering, r.enterAt = nil, nil
	r.halt()
}

// advance moves the virtual clock to t, integrating the engine's gauges.
func (r *virtualRun) advance(t float64) {
	if w := r.v.watch; w != nil {
		w.advance(t)
	}
	r.v.now = t
}

// arrive sends the drawn request at the current instant.
func (r *virtualRun) arrive() {
	v, q := r.v, r.next
	id, prompt, maxOut, ok := r.send(v.now, v.cfg.Engine, v.cfg.MaxModelLen)
	r.rank = append(r.rank, -1)
	if !ok {
		r.seqs = append(r.seqs, nil)
		return
	}
	if q.PrefixTokens > 0 && q.PrefixID >= 0 {
		r.miss = nil // its prefix stays cached: the phase goes to its end (mayGiveUp)
	}
	s := &seq{id: id, prompt: prompt, maxOut: maxOut, prefixID: -1, arrival: v.now, filters: v.filters}
	s.setPrefix(q)
	r.seqs = append(r.seqs, s)
	if d := v.cfg.Constants.FrontendOverheadMs / 1e3; d > 0 {
		r.entering = append(r.entering, s)
		r.enterAt = append(r.enterAt, v.now+d)
		return
	}
	r.enter(s)
}

// setPrefix gives s the request's prefix group and, within it, its
// prefix's shared group (a system prompt several prompts begin with).
func (s *seq) setPrefix(q measure.Request) {
	if q.PrefixTokens <= 0 || q.PrefixID < 0 {
		return
	}
	s.prefixID, s.prefixTokens = q.PrefixID, q.PrefixTokens
	if q.GroupTokens > 0 && q.GroupID >= 0 {
		s.groupID, s.groupTokens = q.GroupID, min(q.GroupTokens, q.PrefixTokens)
	}
}

// enter hands s, through the server's front end, to the least loaded
// engine core.
func (r *virtualRun) enter(s *seq) {
	v := r.v
	s.arrival = v.now
	best := 0
	for j := range v.cores {
		if v.cores[j].load() < v.cores[best].load() {
			best = j
		}
	}
	r.rank[s.id] = best
	v.cores[best].add(s)
	switch {
	case r.lockstep:
		// An idle rank joins the ranks' next step; when none is
		// stepping, the ranks start one now (startLockstep).
		if !slices.Contains(r.busy, true) {
			r.startLockstep()
		}
	case !r.busy[best]:
		r.start(best)
	}
}

// emit records a step's sampled tokens of s, as one chunk when the
// stream sends them now (Config.sends), else held for the next.
func (r *virtualRun) emit(s *seq, last bool) {
	if w := r.v.watch; w != nil {
		w.token(s, r.v.now, last)
	}
	rec, first := r.phaseFeed.emit(&r.v.cfg, s, r.v.now, last)
	if rec == nil {
		return
	}
	if last {
		r.answered++
	}
	if m := r.miss; m != nil && (first && m.First(rec) || last && m.End(rec)) {
		r.missed = true
	}
}

// abortUnfinished fails every unfinished request with class and msg and
// takes it off the engine.
func (r *virtualRun) abortUnfinished(class measure.ErrorClass, msg string) {
	for i, s := range r.seqs {
		if s == nil || s.done {
			continue
		}
		if k := r.rank[i]; k >= 0 {
			r.v.cores[k].abort(s)
		}
		r.fail(i, r.v.now, class, msg)
	}
}

// startLockstep starts the data-parallel ranks' next step together
// (Config.DPLockstep): each rank plans its own batch, and a rank with
// none runs a dummy batch of one token while any other has work
// (DPEngineCoreProc.run_busy_loop, execute_dummy_batch). Every rank's
// tokens meet in each MoE layer, so each rank's step is timed with the
// whole group's tokens in the experts, and the step lasts as long as the
// slowest rank's: the MoE layers' collectives wait for it.
func (r *virtualRun) startLockstep() {
	v := r.v
	if r.shapes == nil {
		r.shapes = make([]batchShape, len(v.cores))
	}
	shapes := r.shapes
	group, work := 0.0, false
	for i, c := range v.cores {
		c.plan(&shapes[i], v.now)
		if shapes[i].tokens > 0 {
			work = true
			group += float64(shapes[i].tokens)
		} else {
			group++ // the dummy batch's token
		}
	}
	secs := 0.0
	for i, c := range v.cores {
		r.busy[i] = false
		if !work || shapes[i].tokens == 0 {
			continue
		}
		shapes[i].groupTokens = group
		secs = math.Max(secs, c.sm.stepSeconds(shapes[i]))
	}
	for i, c := range v.cores {
		if work && shapes[i].tokens > 0 {
			c.retime(v.now, secs)
			r.busy[i], r.ends[i] = true, v.now+secs
		} else {
			c.retime(v.now, 0) // an empty step ends as it starts
		}
	}
}

// start plans core k's next step.
func (r *virtualRun) start(k int) {
	b, secs := r.v.cores[k].schedule(r.v.now)
	if b.tokens == 0 {
		r.busy[k] = false
		return
	}
	r.busy[k], r.ends[k] = true, r.v.now+secs
}

// RunVirtual runs reqs once each against a fresh simulated engine in
// virtual time on load's arrival process (seeded with seed: the stream
// bench.Run uses for arrivals) and returns one record per request, in the
// order of reqs. The error is a *StartupError when cfg does not fit in
// memory. It is the simulator's own entry point for tests and tools;
// benchmarks go through bench.Run with a Virtual transport.
func RunVirtual(cfg Config, reqs []measure.Request, load measure.Load, seed uint64) ([]measure.Record, error) {
	sched := load.Schedule(rand.New(rand.NewPCG(seed, 2)), len(reqs))
	return RunVirtualSchedule(cfg, reqs, sched, load.MaxConcurrency)
}

// RunVirtualSchedule is RunVirtual with explicit intended send offsets
// (sched[i] for reqs[i]) and a client concurrency cap (0 = none).
func RunVirtualSchedule(cfg Config, reqs []measure.Request, sched []time.Duration, maxConcurrency int) ([]measure.Record, error) {
	start := func() (measure.Transport, error) { return NewVirtual(cfg) }
	return runSchedule(start, reqs, sched, maxConcurrency)
}

// RunDeploymentSchedule is RunVirtualSchedule on a disaggregated
// deployment (DisaggVirtual).
func RunDeploymentSchedule(d Deployment, reqs []measure.Request, sched []time.Duration, maxConcurrency int) ([]measure.Record, error) {
	start := func() (measure.Transport, error) { return NewDisaggVirtual(d) }
	return runSchedule(start, reqs, sched, maxConcurrency)
}

// runSchedule sends reqs at their offsets through the virtual transport
// start makes, once the schedule is one it can send.
func runSchedule(start func() (measure.Transport, error), reqs []measure.Request, sched []time.Duration, maxConcurrency int) ([]measure.Record, error) {
	if len(reqs) == 0 {
		return nil, ErrNoRequests
	}
	if len(sched) != len(reqs) {
		return nil, fmt.Errorf("%d send times for %d requests", len(sched), len(reqs))
	}
	if maxConcurrency < 0 {
		return nil, fmt.Errorf("negative concurrency cap %d", maxConcurrency)
	}
	v, err := start()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sched[a], sched[b]) })
	k := 0
	recs, _ := v.Send(context.Background(), measure.Phase{
		Count: len(reqs), MaxConcurrency: maxConcurrency,
		Next:    func() time.Duration { k++; return sched[order[k-1]] },
		Request: func(i int) measure.Request { return reqs[order[i]] },
	})
	out := make([]measure.Record, len(reqs))
	for i := range recs {
		out[order[i]] = recs[i]
	}
	for i := range out {
		if out[i].ErrorMsg == errStalled {
			return out, fmt.Errorf("simulation stalled with request %d unfinished", i)
		}
	}
	return out, nil
}

// contextLengthMessage is vLLM's 400 message for a request that does not fit.
func contextLengthMessage(maxLen, prompt, maxOut int) string {
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		maxLen, prompt+maxOut, prompt, maxOut)
}

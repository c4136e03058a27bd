package sim

import (
	"container/heap"
	"context"
	"math"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// phaseEngine is an engine's side of a phase on the virtual clock
// (virtualRun, disaggRun): what runPhase asks of it between arrivals.
type phaseEngine interface {
	// clock is the virtual clock's instant.
	clock() float64
	// due is when the next request in a server's front end reaches its
	// engine and when the next step ends; Inf for none.
	due() (enter, step float64)
	// advance moves the virtual clock to t.
	advance(t float64)
	// enterNext hands the request due now to its engine.
	enterNext()
	// arrive sends the phase's drawn request now.
	arrive()
	// stepEnd commits the step that ends now and plans the next.
	stepEnd()
	// abortUnfinished fails every unfinished request with class and msg
	// and takes it off its engine.
	abortUnfinished(class measure.ErrorClass, msg string)
	// observe follows every event: the engine's gauges read its state.
	observe()
	// gaveUp ends a phase that missed its bounds (measure.Phase.Bounds),
	// reporting whether it did.
	gaveUp() bool
}

// runPhase runs f's phase on e until every request it sent has ended:
// each turn takes the earliest event, a request entering its engine, the
// next request's arrival or a step's end, in that order at one instant.
// A cancelled ctx fails the unfinished requests at once (draining a deep
// queue in virtual time took seconds after a signal) and sends nothing
// more; an engine with nothing left to run while requests are unfinished
// has stalled, and fails them.
func runPhase(ctx context.Context, f *phaseFeed, e phaseEngine) {
	f.draw()
	for n := 0; ; n++ {
		if n%64 == 0 && ctx.Err() != nil {
			e.abortUnfinished(measure.ErrCancelled, "the run was cancelled")
			return
		}
		tArr := f.arrivalAt(e.clock())
		tEnter, tStep := e.due()
		switch {
		case tEnter <= tArr && tEnter <= tStep && !math.IsInf(tEnter, 1):
			e.advance(tEnter)
			e.enterNext()
		case tArr <= tStep && !math.IsInf(tArr, 1):
			if ctx.Err() != nil {
				f.halt()
				continue
			}
			e.advance(tArr)
			f.pick(tArr)
			e.arrive()
			f.sent++
			f.draw()
		case !math.IsInf(tStep, 1):
			e.advance(tStep)
			e.stepEnd()
		default:
			e.abortUnfinished(measure.ErrTimeout, errStalled)
			e.observe()
			return
		}
		e.observe()
		if e.gaveUp() {
			return
		}
	}
}

// errStalled is the message of a request the engine never finished: the
// model can hold it, yet no step would ever schedule it.
const errStalled = "the simulated engine stalled with this request unfinished"

// phaseFeed is a measured phase on the virtual clock, for an engine's run
// (virtualRun) and a disaggregated deployment's (disaggRun): its start, the
// next request to send, drawn from the phase ahead of time, and the
// records of those sent.
type phaseFeed struct {
	p         measure.Phase
	base      float64 // the clock at the phase's start
	next      measure.Request
	nextSched time.Duration
	hasNext   bool
	sent      int
	conv      *convFeed        // a closed-loop phase's sessions (Phase.Sessions)
	recs      []measure.Record // one per request sent, by record id
	inflight  int              // requests sent and not yet ended
	chunks    bool             // records keep their chunk times
}

// newPhaseFeed is p's feed from the clock at base; its records keep
// their chunk times unless p is read for its latencies alone
// (Phase.LatenciesOnly).
func newPhaseFeed(p measure.Phase, base float64) phaseFeed {
	f := phaseFeed{p: p, base: base, chunks: !p.LatenciesOnly}
	if p.Sessions != nil {
		f.conv = newConvFeed(p)
	}
	return f
}

// arrivalAt is when the phase sends its next request, at the earliest
// now; Inf when it sends none now: the drawn request at its intended
// offset while fewer than MaxConcurrency are in flight (a free slot past
// Duration ends the phase's sending), or a closed-loop phase's next turn
// (convFeed.arrivalAt).
func (f *phaseFeed) arrivalAt(now float64) float64 {
	if f.conv != nil {
		return f.conv.arrivalAt(f, now)
	}
	if !f.hasNext || (f.p.MaxConcurrency > 0 && f.inflight >= f.p.MaxConcurrency) {
		return math.Inf(1)
	}
	t := math.Max(f.base+f.nextSched.Seconds(), now)
	if f.p.Duration > 0 && t-f.base >= f.p.Duration.Seconds() {
		f.hasNext = false // the free slot came too late
		return math.Inf(1)
	}
	return t
}

// pick makes the request due at now the one to send: in a closed-loop
// phase the turn due; otherwise the one drawn.
func (f *phaseFeed) pick(now float64) {
	if f.conv != nil {
		f.conv.pick(f, now)
	}
}

// halt sends nothing more.
func (f *phaseFeed) halt() {
	f.hasNext = false
	if f.conv != nil {
		f.conv.halted = true
	}
}

// tie ties record id to the request just picked (a closed-loop phase's
// turn).
func (f *phaseFeed) tie(id int) {
	if f.conv != nil {
		f.conv.sent(id)
	}
}

// ended tells a closed-loop phase that record id ended at now, answered
// (ok) with generated tokens after its prompt, or failed.
func (f *phaseFeed) ended(id int, now float64, prompt, generated int, ok bool) {
	if f.conv != nil {
		f.conv.ended(id, now, prompt, generated, ok)
	}
}

// offset is a virtual instant as an offset from the phase's start.
func (f *phaseFeed) offset(sec float64) time.Duration {
	return time.Duration(math.Round((sec - f.base) * 1e9))
}

// draw takes the next request of the phase, if any.
func (f *phaseFeed) draw() {
	f.hasNext = false
	if f.conv != nil {
		return // pick takes each turn as it is due
	}
	if (f.p.Duration == 0 || f.p.Count > 0) && f.sent >= f.p.Count {
		return
	}
	var sched time.Duration
	if f.p.Next != nil {
		sched = f.p.Next()
	}
	if f.p.Duration > 0 && sched >= f.p.Duration {
		return
	}
	f.next, f.nextSched, f.hasNext = f.p.Request(f.sent), sched, true
}

// send makes the record of the drawn request, sent at now to an engine
// of kind eng that holds maxLen tokens a sequence: its record id, its
// prompt's tokens and the most it may generate (admitLength). ok is
// false when the engine refuses it with a 400, as its server would
// (server.go): the record ends as it is sent.
func (f *phaseFeed) send(now float64, eng engine.Engine, maxLen int) (id, prompt, maxOut int, ok bool) {
	q := f.next
	rec := measure.Record{Index: q.Index, Warmup: f.p.Warmup, Sched: f.nextSched, Send: f.offset(now)}
	prompt = q.PromptTokens
	if prompt <= 0 {
		prompt = CountTokens(q.Prompt)
	}
	rec.PromptTokens = prompt
	// max_tokens 0 is unset; a negative one is a 400.
	maxOut, msg := admitLength(eng, maxLen, prompt, q.MaxTokens)
	id = len(f.recs)
	f.tie(id)
	if msg != "" {
		rec.Status, rec.Error, rec.ErrorMsg = 400, measure.ErrHTTP4xx, msg
		rec.End = rec.Send
		f.recs = append(f.recs, rec)
		f.ended(id, now, prompt, 0, false)
		return id, prompt, 0, false
	}
	rec.Status = 200
	if f.chunks {
		rec.Chunks = make([]measure.Chunk, 0, maxOut)
	}
	f.recs = append(f.recs, rec)
	f.inflight++
	return id, prompt, maxOut, true
}

// emit records at now the tokens s has generated, its last when last, as
// one chunk when cfg's stream sends them now (Config.sends), else held
// for the next. It returns s's record when it wrote it (nil when the
// tokens are held) and whether they are its first. A last token ends the
// request: its session's next turn follows the answer's end.
func (f *phaseFeed) emit(cfg *Config, s *seq, now float64, last bool) (rec *measure.Record, first bool) {
	if last {
		f.inflight--
		defer f.ended(s.id, now, s.prompt, s.generated, true)
	}
	rec = &f.recs[s.id]
	n := s.generated - rec.OutputTokens
	if !cfg.sends(n, rec.OutputTokens, last) {
		return nil, false
	}
	at := f.offset(now)
	first = rec.OutputTokens == 0
	if first {
		rec.First = at
	}
	rec.Last, rec.End = at, at
	rec.OutputTokens = s.generated
	if f.chunks {
		rec.Chunks = append(rec.Chunks, measure.Chunk{At: at, Tokens: n})
	}
	return rec, first
}

// fail ends the unfinished record id at now with class and msg.
func (f *phaseFeed) fail(id int, now float64, class measure.ErrorClass, msg string) {
	rec := &f.recs[id]
	rec.End = f.offset(now)
	rec.Fail(class, msg)
}

// done is the phase's records, told to its Progress.
func (f *phaseFeed) done() []measure.Record {
	if f.p.Progress != nil && len(f.recs) > 0 {
		f.p.Progress(len(f.recs), f.p.Total())
	}
	return f.recs
}

// timeline is what falls due on the virtual clock, earliest first, ties
// in the order pushed: requests reaching an engine (disaggRun), sessions'
// next turns (convFeed).
type timeline[T any] struct {
	h    timedHeap[T]
	made uint64
}

// timed is v due at t; n breaks ties in the order they were pushed.
type timed[T any] struct {
	t float64
	n uint64
	v T
}

// push makes v due at t.
func (q *timeline[T]) push(t float64, v T) {
	q.made++
	heap.Push(&q.h, timed[T]{t: t, n: q.made, v: v})
}

// pop takes the earliest, with when it is due.
func (q *timeline[T]) pop() (float64, T) {
	x := heap.Pop(&q.h).(timed[T])
	return x.t, x.v
}

// next is when the earliest is due; Inf when none is.
func (q *timeline[T]) next() float64 {
	if len(q.h) == 0 {
		return math.Inf(1)
	}
	return q.h[0].t
}

// clear drops everything due.
func (q *timeline[T]) clear() { q.h = q.h[:0] }

type timedHeap[T any] []timed[T]

func (h timedHeap[T]) Len() int { return len(h) }
func (h timedHeap[T]) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].n < h[j].n
}
func (h timedHeap[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timedHeap[T]) Push(x any)   { *h = append(*h, x.(timed[T])) }
func (h *timedHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

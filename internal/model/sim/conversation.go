package sim

import (
	"math"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// convFeed is a closed-loop phase (measure.Phase.Sessions) on the virtual
// clock: sessions start on the phase's schedule, at most MaxConcurrency
// in flight, and each sends its next turn at the virtual instant its
// previous answer ended plus the think time, as bench's conversation
// does against a live server (internal/load/bench/conversation.go,
// converse). A turn's prompt is the session's history (every earlier
// prompt and the answer the engine generated) and its new message; its
// content is the session's own token stream (the prefix group of the
// session's key over the whole sequence), so the pages of a turn's
// prompt and answer are the leading pages of the next turn's prompt, as
// the token ids of the same history are on sim serve (core.pageHash).
type convFeed struct {
	sessions  []measure.Session
	started   int               // sessions started
	open      int               // sessions started and not ended
	nextStart time.Duration     // the intended start of session started
	history   []int             // each session's tokens so far: prompts and answers
	due       timeline[turnRef] // turns waiting for their think time to pass
	picked    turnRef           // the turn the last pick chose
	ofRec     []turnRef         // each record's turn, by record id
	halted    bool
}

// turnRef is turn k of session s.
type turnRef struct{ s, k int }

// wholeSequence is a turn's PrefixTokens: every token of it, prompt and
// answer, is its session's.
const wholeSequence = 1 << 40

// newConvFeed starts p's sessions' feed, drawing the first session's
// start.
func newConvFeed(p measure.Phase) *convFeed {
	c := &convFeed{sessions: p.Sessions, history: make([]int, len(p.Sessions))}
	if len(c.sessions) > 0 && p.Next != nil {
		c.nextStart = p.Next()
	}
	return c
}

// arrivalAt is when f's next turn is sent, at the earliest now: the next
// session's start while fewer than MaxConcurrency are in flight, or a
// session's next turn when its think time has passed, whichever is
// first (Inf when neither).
func (c *convFeed) arrivalAt(f *phaseFeed, now float64) float64 {
	if c.halted {
		return math.Inf(1)
	}
	t := math.Inf(1)
	if c.started < len(c.sessions) && (f.p.MaxConcurrency == 0 || c.open < f.p.MaxConcurrency) {
		t = math.Max(f.base+c.nextStart.Seconds(), now)
	}
	t = math.Min(t, math.Max(c.due.next(), now))
	return t
}

// pick makes the turn due at now f's next request: a session's next turn
// before a new session's first when both are due.
func (c *convFeed) pick(f *phaseFeed, now float64) {
	var ref turnRef
	var sched time.Duration
	if c.due.next() <= now {
		var t float64
		t, ref = c.due.pop()
		sched = f.offset(t)
	} else {
		ref, sched = turnRef{s: c.started}, c.nextStart
		c.started++
		c.open++
		if c.started < len(c.sessions) && f.p.Next != nil {
			c.nextStart = f.p.Next()
		}
	}
	sess := c.sessions[ref.s]
	q := f.p.Request(sess.Turns[ref.k])
	q.PromptTokens += c.history[ref.s]
	q.PrefixID, q.PrefixTokens, q.GroupID, q.GroupTokens = sess.Key, wholeSequence, -1, 0
	c.picked = ref
	f.next, f.nextSched, f.hasNext = q, sched, true
}

// sent ties record id to the turn pick chose.
func (c *convFeed) sent(id int) {
	for len(c.ofRec) <= id {
		c.ofRec = append(c.ofRec, turnRef{s: -1})
	}
	c.ofRec[id] = c.picked
}

// ended is record id's turn ending at now, answered with its prompt and
// generated tokens when ok: its session's next turn is due after its
// think time, or the session ends (its last turn, or a failed one).
func (c *convFeed) ended(id int, now float64, prompt, generated int, ok bool) {
	if id >= len(c.ofRec) || c.ofRec[id].s < 0 {
		return
	}
	ref := c.ofRec[id]
	c.ofRec[id].s = -1
	sess := c.sessions[ref.s]
	if !ok || ref.k+1 >= len(sess.Turns) || c.halted {
		c.open--
		return
	}
	c.history[ref.s] = prompt + generated
	next := ref.k + 1
	think := 0.0
	if next < len(sess.Think) {
		think = sess.Think[next].Seconds()
	}
	c.due.push(now+think, turnRef{s: ref.s, k: next})
}

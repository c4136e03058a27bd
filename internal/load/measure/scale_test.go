package measure

import (
	"testing"
	"time"
)

// TestEngineTime: a record measured against an engine k times faster than
// real time, whose chunks carry the engine's own clock, converts to the
// engine's time with the client's overhead counted once and the
// simulator's own write lag removed; a record without the engine's clock
// is scaled whole.
func TestEngineTime(t *testing.T) {
	const k = 50
	ms := time.Millisecond
	overhead, lag := 2*ms, 3*ms
	// Sent at 10 ms real (500 ms engine); tokens at 20 and 27 ms of engine
	// time after arrival: real 0.4 and 0.54 ms, plus lag and overhead.
	at := func(engine time.Duration) time.Duration { return 10*ms + engine/k + lag + overhead }
	rec := Record{Sched: 8 * ms, Send: 10 * ms, EngineClock: true,
		Chunks: []Chunk{{At: at(20 * ms), Engine: 20 * ms, Lag: lag, Tokens: 1}, {At: at(27 * ms), Engine: 27 * ms, Lag: lag, Tokens: 1}}}
	rec.First, rec.Last, rec.End = rec.Chunks[0].At, rec.Chunks[1].At, rec.Chunks[1].At+ms
	plain := Record{Sched: 8 * ms, Send: 10 * ms, First: 12 * ms, Last: 14 * ms, End: 15 * ms,
		Chunks: []Chunk{{At: 12 * ms, Tokens: 1}, {At: 14 * ms, Tokens: 1}}}
	recs := []Record{rec, plain}
	EngineTime(recs, k)
	got := recs[0]
	if got.Send != 500*ms || got.Sched != 400*ms {
		t.Errorf("send %v sched %v, want 500ms 400ms", got.Send, got.Sched)
	}
	if ttft := got.First - got.Send; ttft != 20*ms+overhead {
		t.Errorf("TTFT %v, want the engine's 20ms plus 2ms of overhead once (not %v)", ttft, k*(rec.First-rec.Send))
	}
	if itl := got.Chunks[1].At - got.Chunks[0].At; itl != 7*ms {
		t.Errorf("ITL %v, want 7ms", itl)
	}
	if got.End != got.Last+ms {
		t.Errorf("end %v, last %v: the tail after the last chunk is kept", got.End, got.Last)
	}
	if p := recs[1]; p.Send != 500*ms || p.First != 600*ms || p.End != 750*ms {
		t.Errorf("a record without the engine's clock: %+v, want it scaled by %d", p, k)
	}
}

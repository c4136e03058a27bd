package measure

import "time"

// ScaleRecords converts per-request instants into the engine's time.
func ScaleRecords(recs []Record, k float64) {
	sc := func(d *time.Duration) { *d = time.Duration(float64(*d) * k) }
	for i := range recs {
		r := &recs[i]
		if r.folded {
			continue // in the engine's time already
		}
		sc(&r.Sched)
		sc(&r.Send)
		sc(&r.First)
		sc(&r.Last)
		sc(&r.End)
		for j := range r.Chunks {
			sc(&r.Chunks[j].At)
		}
	}
}

// EngineTime converts records measured against an engine running k times
// faster than real time into the engine's time, using the engine's own
// clock where the server reported it (Record.EngineClock). The client's
// instants (schedule, send) scale by k; each chunk's instant is the scaled
// send instant plus the engine's own offset plus the client's overhead as
// measured, unscaled, less the simulator's own lag in writing the chunk
// (a real engine does not run k times faster than this machine can):
//
//	At' = k·Send + Engine + (At − Send − Engine/k − Lag)
//
// so the network and client overhead count once, as a client of a real
// engine would see them, not k times (scaling the whole latency would
// multiply a 2 ms scheduling hiccup of this machine into 100 ms at k = 50).
// Records without the engine's clock are scaled whole (ScaleRecords);
// folded ones (Folded.Add) are left alone, being in the engine's time.
func EngineTime(recs []Record, k float64) {
	for i := range recs {
		r := &recs[i]
		if r.folded {
			continue // in the engine's time already
		}
		if !r.EngineClock || len(r.Chunks) == 0 {
			ScaleRecords(recs[i:i+1], k)
			continue
		}
		send := r.Send
		scaled := time.Duration(float64(send) * k)
		tail := r.End - r.Last
		for j := range r.Chunks {
			c := &r.Chunks[j]
			overhead := c.At - send - time.Duration(float64(c.Engine)/k) - c.Lag
			c.At = scaled + c.Engine + max(overhead, 0)
		}
		r.Sched = time.Duration(float64(r.Sched) * k)
		r.Send = scaled
		r.First = r.Chunks[0].At
		r.Last = r.Chunks[len(r.Chunks)-1].At
		r.End = r.Last + tail
	}
}

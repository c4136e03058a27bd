package trace

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Schedule is each request's intended send time from the replay's start.
type Schedule []time.Duration

// NewSchedule is reqs' offsets.
func NewSchedule(reqs []Request) Schedule {
	s := make(Schedule, len(reqs))
	for i, q := range reqs {
		s[i] = q.Offset
	}
	return s
}

// Times is the schedule as wall-clock instants from start (which carries
// the monotonic clock when it came from time.Now).
func (s Schedule) Times(start time.Time) []time.Time {
	t := make([]time.Time, len(s))
	for i, d := range s {
		t[i] = start.Add(d)
	}
	return t
}

// spin is how long before an intended time Run stops sleeping and polls
// the clock: the runtime's timers wake up to a millisecond late on Linux,
// which alone would cost the median lateness its 1 ms target.
const spin = 1500 * time.Microsecond

// Run calls send(i, intended) for each request, each in its own goroutine,
// as close after its intended time as the clock allows, never waiting for
// an earlier send to return (an open loop); it returns when every send has
// returned, or, once ctx is done, without starting more (ctx.Err()). The
// caller stamps the actual send time inside send: its lateness is that
// minus intended.
func (s Schedule) Run(ctx context.Context, start time.Time, send func(i int, intended time.Time)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, d := range s {
		at := start.Add(d)
		if err := waitUntil(ctx, at); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(i, at)
		}()
	}
	return nil
}

// waitUntil sleeps until spin before at, then yields until at.
func waitUntil(ctx context.Context, at time.Time) error {
	if d := time.Until(at) - spin; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	for time.Now().Before(at) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		runtime.Gosched()
	}
	return ctx.Err()
}

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

// spin is how long before an intended time Run stops sleeping and yields in
// a loop: the runtime's timers wake up to a millisecond late on Linux (the
// netpoller waits in whole milliseconds), as internal/load/bench/http.go's
// sleepUntil, whose window this is, explains. The price is CPU: at 1,000
// requests a second the loop yields most of the time.
const spin = 1500 * time.Microsecond

// Run calls send(i, intended) for each request, each in its own goroutine,
// as close after its intended time as the clock allows, never waiting for
// an earlier send to return (an open loop). Once ctx is done it starts no
// more and returns ctx.Err(); either way it returns after every send it
// started has returned. The
// caller stamps the actual send time inside send: its lateness is that
// minus intended.
func (s Schedule) Run(ctx context.Context, start time.Time, send func(i int, intended time.Time)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i, d := range s {
		at := start.Add(d)
		if err := waitUntil(ctx, timer, at); err != nil {
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
func waitUntil(ctx context.Context, timer *time.Timer, at time.Time) error {
	if d := time.Until(at) - spin; d > 0 {
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
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

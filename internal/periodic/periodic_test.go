package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestStartStop: Start calls f at once and once each interval; after Stop
// it calls f no more, and the context f got is cancelled. The intervals
// are counted on a synctest bubble's fake clock.
func TestStartStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		var last context.Context
		l := Start(context.Background(), time.Second, func(ctx context.Context) { calls.Add(1); last = ctx })
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d calls at Start, want 1", n)
		}
		time.Sleep(3500 * time.Millisecond)
		l.Stop()
		if n := calls.Load(); n != 4 {
			t.Errorf("%d calls over 3.5 intervals, want 4 (Start and 3 ticks)", n)
		}
		if last.Err() == nil {
			t.Error("f's context is live after Stop")
		}
		time.Sleep(5 * time.Second)
		if n := calls.Load(); n != 4 {
			t.Errorf("%d calls after Stop, want 4", n)
		}
	})
}

// TestRunEndsWithContext: Run's first call is one interval in, and Run
// returns when its context ends.
func TestRunEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		start, calls := time.Now(), 0
		var first time.Duration
		Run(ctx, time.Second, func(context.Context) {
			if calls++; calls == 1 {
				first = time.Since(start)
			}
		})
		if calls != 2 || first != time.Second || time.Since(start) != 2500*time.Millisecond {
			t.Errorf("%d calls, the first at %v, returned at %v; want 2, 1s, 2.5s", calls, first, time.Since(start))
		}
	})
}

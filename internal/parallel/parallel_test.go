package parallel

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestEachCallsEveryIndex: every index is called once, on no more
// goroutines at a time than the workers asked for.
func TestEachCallsEveryIndex(t *testing.T) {
	const n, workers = 100, 4
	var (
		mu           sync.Mutex
		seen         = map[int]int{}
		running, top atomic.Int32
	)
	Each(context.Background(), n, workers, func(i int) {
		r := running.Add(1)
		for {
			m := top.Load()
			if r <= m || top.CompareAndSwap(m, r) {
				break
			}
		}
		mu.Lock()
		seen[i]++
		mu.Unlock()
		running.Add(-1)
	})
	if len(seen) != n {
		t.Fatalf("%d indices called, want %d", len(seen), n)
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("index %d called %d times", i, c)
		}
	}
	if m := top.Load(); m > workers {
		t.Errorf("%d calls at once, want at most %d", m, workers)
	}
}

// TestEachStopsWithContext: once ctx ends no index is handed out, and
// Each returns after the calls in progress.
func TestEachStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	Each(ctx, 1000, 1, func(i int) {
		if calls.Add(1) == 3 {
			cancel()
		}
	})
	if c := calls.Load(); c != 3 {
		t.Errorf("%d calls, want 3 (the third cancels)", c)
	}
	cancel()
	Each(ctx, 10, 2, func(int) { t.Error("called after its context ended") })
}

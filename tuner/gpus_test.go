package tuner

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
)

// TestGPUPool: trials get disjoint GPUs, in order; a request the free
// GPUs cannot meet waits for a release, and a cancelled one does not. The
// wait is seen in a synctest bubble: once every goroutine blocks, the
// waiting one has not been given GPUs.
func TestGPUPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := newGPUPool([]int{3, 1, 0, 2}, nil)
		a, err := p.Acquire(ctx, 2)
		if err != nil || !slices.Equal(a, []int{0, 1}) {
			t.Fatalf("first = %v, %v", a, err)
		}
		b, err := p.Acquire(ctx, 1)
		if err != nil || !slices.Equal(b, []int{2}) {
			t.Fatalf("second = %v, %v", b, err)
		}
		if _, err := p.Acquire(ctx, 5); err == nil {
			t.Fatal("acquired more GPUs than the pool has")
		}
		// Two are busy, one free: asking for two waits until a release.
		done := make(chan []int, 1)
		go func() {
			got, _ := p.Acquire(ctx, 2)
			done <- got
		}()
		synctest.Wait()
		select {
		case got := <-done:
			t.Fatalf("acquired %v while only one GPU was free", got)
		default:
		}
		p.Release(a)
		if got := <-done; !slices.Equal(got, []int{0, 1}) {
			t.Fatalf("after release = %v", got)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := p.Acquire(cctx, 2); err == nil {
			t.Fatal("Acquire ignored a cancelled context")
		}
	})
}

// TestGPUPoolHosts: a set never spans two hosts, and a trial larger than the
// largest host is refused even when the study has enough GPUs in all.
func TestGPUPoolHosts(t *testing.T) {
	ctx := context.Background()
	host := func(g int) int { return g / 100 }
	p := newGPUPool([]int{0, 1, 2, 100, 101}, host)
	tests := []struct {
		name string
		n    int
		want []int
	}{
		{"one on host 0", 1, []int{0}},
		{"two: host 0 still has two", 2, []int{1, 2}},
		{"two: only host 1 has two", 2, []int{100, 101}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Acquire(ctx, tc.n)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Acquire(%d) = %v, %v; want %v", tc.n, got, err, tc.want)
			}
		})
	}
	if _, err := p.Acquire(ctx, 4); err == nil {
		t.Fatal("acquired 4 GPUs; no host has more than 3")
	}
	// Host 0 has one free and host 1 none: two must wait, not span hosts.
	p.Release([]int{1})
	if got := p.tryAcquire(2); got != nil {
		t.Fatalf("acquired %v across hosts", got)
	}
}

package tuner

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestGPUPool(t *testing.T) {
	ctx := context.Background()
	p := newGPUPool([]int{3, 1, 0, 2})
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
	done := make(chan []int)
	go func() {
		got, _ := p.Acquire(ctx, 2)
		done <- got
	}()
	select {
	case got := <-done:
		t.Fatalf("acquired %v while only one GPU was free", got)
	case <-time.After(20 * time.Millisecond):
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
}

package tuner

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// gpuPool hands out disjoint sets of GPU indices to trials running at the
// same time. Acquire waits until enough GPUs are free; smallest indices first
// so placement is deterministic. One goroutine (the study's dispatcher)
// calls Acquire; Release may come from any goroutine.
type gpuPool struct {
	mu    sync.Mutex
	free  map[int]bool
	total int
	ch    chan struct{} // signalled on every Release
}

func newGPUPool(gpus []int) *gpuPool {
	p := &gpuPool{free: make(map[int]bool, len(gpus)), total: len(gpus), ch: make(chan struct{}, 1)}
	for _, g := range gpus {
		p.free[g] = true
	}
	return p
}

// Acquire returns n free GPUs, waiting for releases. It fails at once when
// the pool could never satisfy n.
func (p *gpuPool) Acquire(ctx context.Context, n int) ([]int, error) {
	if n > p.total {
		return nil, fmt.Errorf("a trial needs %d GPUs, the study has %d", n, p.total)
	}
	for {
		if got := p.tryAcquire(n); got != nil {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.ch:
		}
	}
}

func (p *gpuPool) tryAcquire(n int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []int
	for g, ok := range p.free {
		if ok {
			ids = append(ids, g)
		}
	}
	if len(ids) < n {
		return nil
	}
	sort.Ints(ids)
	ids = ids[:n]
	for _, g := range ids {
		p.free[g] = false
	}
	if n == 0 {
		return []int{}
	}
	return ids
}

// Release returns gpus to the pool.
func (p *gpuPool) Release(gpus []int) {
	p.mu.Lock()
	for _, g := range gpus {
		p.free[g] = true
	}
	p.mu.Unlock()
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

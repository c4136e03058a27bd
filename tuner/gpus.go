package tuner

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// gpuPool hands out disjoint sets of GPU indices to trials running at the
// same time. Acquire waits until enough GPUs are free; smallest indices first
// so placement is deterministic. GPUs may be grouped by host: a set never
// spans two groups. One goroutine (the study's dispatcher) calls Acquire;
// Release may come from any goroutine.
type gpuPool struct {
	mu    sync.Mutex
	free  map[int]bool
	group func(gpu int) int // host of a GPU; nil = one host
	total int               // GPUs of the largest group: the most one trial can get
	ch    chan struct{}     // signalled on every Release
}

// newGPUPool pools gpus; group, when not nil, names each GPU's host.
func newGPUPool(gpus []int, group func(int) int) *gpuPool {
	p := &gpuPool{free: make(map[int]bool, len(gpus)), group: group, ch: make(chan struct{}, 1)}
	sizes := map[int]int{}
	for _, g := range gpus {
		p.free[g] = true
		sizes[p.groupOf(g)]++
	}
	for _, n := range sizes {
		p.total = max(p.total, n)
	}
	return p
}

func (p *gpuPool) groupOf(g int) int {
	if p.group == nil {
		return 0
	}
	return p.group(g)
}

// Acquire returns n free GPUs of one group, waiting for releases. It fails
// at once when the pool could never satisfy n.
func (p *gpuPool) Acquire(ctx context.Context, n int) ([]int, error) {
	if n > p.total {
		return nil, fmt.Errorf("a trial needs %d GPUs, the largest host of the study has %d", n, p.total)
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
	var all []int
	for g, ok := range p.free {
		if ok {
			all = append(all, g)
		}
	}
	sort.Ints(all)
	// The first group, in GPU order, with n free GPUs.
	byGroup := map[int][]int{}
	var ids []int
	for _, g := range all {
		k := p.groupOf(g)
		byGroup[k] = append(byGroup[k], g)
		if len(byGroup[k]) == n {
			ids = byGroup[k]
			break
		}
	}
	if ids == nil && n > 0 {
		return nil
	}
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

// Package parallel is the one fixed pool of workers over a list: the
// benchmark's prompt alignment, the quality gate's questions, the
// calibration's simulations, the fidelity suite's runs and the guided
// sampler's forecasts.
//
//	parallel.Each(ctx, len(items), 16, func(i int) { do(items[i]) })
package parallel

import (
	"context"
	"sync"
)

// Each calls f(i) for every i from 0 to n-1 on at most workers goroutines
// (at least one), handing the indices out in order. Once ctx ends it
// hands out no more; it returns when every call it started has returned.
func Each(ctx context.Context, n, workers int, f func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(min(workers, n), 1) {
		wg.Go(func() {
			for i := range jobs {
				f(i)
			}
		})
	}
feed:
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
}

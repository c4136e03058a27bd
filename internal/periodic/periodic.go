// Package periodic is the loop that does something at a fixed interval
// until its context ends, shared by the benchmark's GPU sampler and
// /metrics scraper, the replay's autoscaler and progress lines, the
// resource lines of selfstats, and a study's lease heartbeat (store).
//
//	l := periodic.Start(ctx, time.Second, func(ctx context.Context) { read(ctx) })
//	defer l.Stop()
package periodic

import (
	"context"
	"time"
)

// Run calls f every interval until ctx ends, and returns then, after the
// call in progress. The first call is one interval after Run starts.
func Run(ctx context.Context, every time.Duration, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// Loop is Run in a goroutine of its own, owned by the Loop: Stop ends it
// and waits for it.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start calls f at once, then every interval in a goroutine until Stop or
// ctx ends. f gets a context that Stop cancels, so a call in progress
// (a request) ends with it.
func Start(ctx context.Context, every time.Duration, f func(context.Context)) *Loop {
	ctx, cancel := context.WithCancel(ctx)
	l := &Loop{cancel: cancel, done: make(chan struct{})}
	f(ctx)
	go func() {
		defer close(l.done)
		Run(ctx, every, f)
	}()
	return l
}

// Stop ends the loop and returns once its call in progress, if any, has.
func (l *Loop) Stop() {
	l.cancel()
	<-l.done
}

package bench

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/servetune/servetune/measure"
)

// httpTransport sends requests to an OpenAI-compatible server over HTTP/1.1,
// streaming each response.
type httpTransport struct {
	hc     *http.Client
	c      *client
	target Target
}

var _ Transport = (*httpTransport)(nil)

// newHTTPTransport keeps up to maxConcurrency connections (4096 when 0)
// open so that warm-up connections are reused.
func newHTTPTransport(t Target, maxConcurrency int, ignoreEOS bool) *httpTransport {
	idle := maxConcurrency
	if idle == 0 {
		idle = 4096
	}
	hc := newHTTPClient(idle)
	return &httpTransport{hc: hc, c: newClient(hc, t, ignoreEOS), target: t}
}

func (h *httpTransport) close() { h.hc.CloseIdleConnections() }

// Align resizes synthetic prompts with the server's /tokenize.
func (h *httpTransport) Align(ctx context.Context, reqs []measure.Request, rng *rand.Rand) string {
	return alignPrompts(ctx, h.hc, h.target, reqs, rng)
}

// sent is one finished request with its place in the send order.
type sent struct {
	seq int
	rec measure.Record
}

// Send runs a phase: the dispatcher sleeps until each intended send time
// and starts the request in its own goroutine, so a slow server never
// delays the schedule; with a concurrency cap it also waits for a free
// slot. Each body is encoded while the dispatcher waits, not at send time.
func (h *httpTransport) Send(ctx context.Context, p measure.Phase) ([]measure.Record, time.Time) {
	total := p.Total()
	var sem chan struct{}
	if p.MaxConcurrency > 0 {
		sem = make(chan struct{}, p.MaxConcurrency)
	}
	results := make(chan sent, 1024)
	var (
		done    []sent
		collect sync.WaitGroup
	)
	collect.Go(func() {
		for r := range results {
			done = append(done, r)
			if p.Progress != nil {
				p.Progress(len(done), total)
			}
		}
	})

	start := time.Now()
	// dctx ends the sending phase; requests in flight keep ctx.
	dctx := ctx
	if p.Duration > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, start.Add(p.Duration))
		defer cancel()
	}
	next := p.Next
	if next == nil {
		next = func() time.Duration { return 0 }
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var inflight sync.WaitGroup
	for i := 0; p.Duration > 0 || i < p.Count; i++ {
		sched := next()
		if p.Duration > 0 && sched >= p.Duration {
			break
		}
		req := p.Request(i)
		body, bodyErr := h.c.body(req)
		if !sleepUntil(dctx, timer, start.Add(sched)) {
			break
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-dctx.Done():
			}
			if dctx.Err() != nil {
				break
			}
		}
		inflight.Go(func() {
			rec := measure.Record{Sched: sched}
			h.c.send(ctx, req, body, bodyErr, start, p.Timeout, &rec)
			rec.Warmup = p.Warmup
			if sem != nil {
				<-sem
			}
			results <- sent{seq: i, rec: rec}
		})
	}
	inflight.Wait()
	close(results)
	collect.Wait()
	// Records arrive in completion order; restore send order.
	slices.SortFunc(done, func(a, b sent) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]measure.Record, len(done))
	for i := range done {
		out[i] = done[i].rec
	}
	return out, start
}

// spinWindow is how long before a send time the dispatcher stops sleeping
// on a timer and yields in a loop instead: Go's timers on Linux wake up to
// about a millisecond late (the netpoller's epoll wait has millisecond
// resolution), which alone would put p99 send lateness near 1 ms.
const spinWindow = 1500 * time.Microsecond

// sleepUntil waits for t or ctx's end; false when ctx ended first.
func sleepUntil(ctx context.Context, timer *time.Timer, t time.Time) bool {
	if d := time.Until(t) - spinWindow; d > 0 {
		timer.Reset(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return false
		}
	}
	for time.Now().Before(t) {
		if ctx.Err() != nil {
			return false
		}
		runtime.Gosched()
	}
	return ctx.Err() == nil
}

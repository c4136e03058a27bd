package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
)

// httpTransport sends requests to an OpenAI-compatible server over HTTP/1.1,
// streaming each response.
type httpTransport struct {
	hc     *http.Client
	c      *client
	target openai.Target
	// stopped says why the last phase stopped sending early ("" when it
	// did not): the server refused every connection, or this machine ran
	// out of file descriptors.
	stopped string
	// late is the send lateness of each request of the last phase.
	late []time.Duration
}

// Lateness returns the send lateness of each request of the last phase.
func (h *httpTransport) Lateness() []time.Duration { return h.late }

// deadStreak is how many requests in a row may fail to connect, with no
// answer from the server in between, before a phase stops sending: a dead
// server would otherwise be hammered for the rest of the run, hundreds of
// thousands of instant failures filling memory and the records file.
const deadStreak = 32

// Stopped says why the last phase stopped early, "" when it did not.
func (h *httpTransport) Stopped() string { return h.stopped }

var _ measure.Transport = (*httpTransport)(nil)

// newHTTPTransport keeps up to maxConcurrency connections (4096 when 0)
// open so that warm-up connections are reused.
func newHTTPTransport(t openai.Target, maxConcurrency int, ignoreEOS bool, s Sampling) *httpTransport {
	idle := maxConcurrency
	if idle == 0 {
		idle = 4096
	}
	hc := newHTTPClient(idle)
	return &httpTransport{hc: hc, c: newClient(hc, t, ignoreEOS, s), target: t}
}

func (h *httpTransport) close() { h.hc.CloseIdleConnections() }

// Align resizes synthetic prompts with the server's /tokenize.
func (h *httpTransport) Align(ctx context.Context, reqs []measure.Request, rng *rand.Rand) string {
	return alignPrompts(ctx, h.hc, h.target, reqs, rng)
}

// sent is one finished request with its place in the send order.
type sent struct {
	seq  int
	rec  measure.Record
	late time.Duration // send lateness (measure.Client)
}

// testHookBeforeSend, when set by a test, runs in each request's goroutine
// before it sends: a starved client on demand.
var testHookBeforeSend func()

// Send runs a phase: the dispatcher sleeps until each intended send time
// and starts the request in its own goroutine, so a slow server never
// delays the schedule; with a concurrency cap it also waits for a free
// slot. Each body is encoded while the dispatcher waits, not at send time.
func (h *httpTransport) Send(ctx context.Context, p measure.Phase) ([]measure.Record, time.Time) {
	start := time.Now()
	pace := newPacer(p, start)
	defer pace.stop()
	// dctx ends the sending phase; requests in flight keep ctx.
	dctx := ctx
	if p.Duration > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, start.Add(p.Duration))
		defer cancel()
	}
	dctx, stopSending := context.WithCancel(dctx)
	defer stopSending()
	// An early stop also ends the requests in flight (cancelled): their
	// answers would no longer be measured against anything.
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	h.stopped = ""
	live := newInflight()
	defer live.watch(p.Waiting)()

	results := make(chan sent, 1024)
	var (
		done    []sent
		collect sync.WaitGroup
	)
	collect.Go(func() {
		done = h.collect(results, p, func() { stopSending(); stopAll() })
	})

	var inflight sync.WaitGroup
	for i := 0; (p.Duration > 0 && p.Count == 0) || i < p.Count; i++ {
		sched := pace.next()
		if p.Duration > 0 && sched >= p.Duration {
			break
		}
		req := p.Request(i)
		body, bodyErr := h.c.body(req)
		ready, ok := pace.admit(dctx, sched)
		if !ok {
			break
		}
		inflight.Go(func() {
			rec := measure.Record{Sched: sched}
			live.add(i)
			if testHookBeforeSend != nil {
				testHookBeforeSend()
			}
			h.c.send(ctx, req, body, bodyErr, start, p.Timeout, &rec)
			live.remove(i)
			rec.Warmup = p.Warmup
			pace.free()
			results <- sent{seq: i, rec: rec, late: max(rec.Send-ready, 0)}
		})
	}
	inflight.Wait()
	close(results)
	collect.Wait()
	// Records arrive in completion order; restore send order.
	slices.SortFunc(done, func(a, b sent) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]measure.Record, len(done))
	h.late = make([]time.Duration, len(done))
	for i := range done {
		out[i], h.late[i] = done[i].rec, done[i].late
	}
	return out, start
}

// collect gathers a phase's finished requests, reports progress, and
// calls stop once the phase must stop early (h.stopped says why): a streak
// of refused connections with no answer between them, or this machine out
// of file descriptors.
func (h *httpTransport) collect(results <-chan sent, p measure.Phase, stop func()) []sent {
	var done []sent
	total := p.Total()
	streak := 0
	for r := range results {
		if p.Done != nil {
			p.Done(&r.rec)
		}
		done = append(done, r)
		if p.Progress != nil {
			p.Progress(len(done), total)
		}
		if h.stopped != "" {
			continue
		}
		switch {
		case r.rec.Error == measure.ErrConnect && strings.HasPrefix(r.rec.ErrorMsg, outOfFiles):
			h.stopped = r.rec.ErrorMsg
		case r.rec.Error == measure.ErrConnect:
			if streak++; streak >= deadStreak {
				h.stopped = fmt.Sprintf("the server refused %d connections in a row and answered none (%s)", streak, r.rec.ErrorMsg)
			}
		case r.rec.Error != measure.ErrCancelled:
			streak = 0
		}
		if h.stopped != "" {
			stop()
		}
	}
	return done
}

// inflight tracks when each request in flight was sent, for Waiting.
type inflight struct {
	mu   sync.Mutex
	sent map[int]time.Time
}

func newInflight() *inflight { return &inflight{sent: map[int]time.Time{}} }

func (f *inflight) add(seq int) {
	f.mu.Lock()
	f.sent[seq] = time.Now()
	f.mu.Unlock()
}

func (f *inflight) remove(seq int) {
	f.mu.Lock()
	delete(f.sent, seq)
	f.mu.Unlock()
}

// watch calls waiting every second with the requests in flight and the
// oldest one's age, until the returned stop is called.
func (f *inflight) watch(waiting func(int, time.Duration)) (stop func()) {
	if waiting == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				f.mu.Lock()
				n, oldest := len(f.sent), time.Duration(0)
				for _, at := range f.sent {
					oldest = max(oldest, now.Sub(at))
				}
				f.mu.Unlock()
				waiting(n, oldest)
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}

// spinWindow is how long before a send time the dispatcher stops sleeping
// on a timer and yields in a loop instead: Go's timers on Linux wake up to
// about a millisecond late (the netpoller's epoll wait has millisecond
// resolution). It is short because at 1,000 requests/s a longer window
// (1.5 ms) never sleeps at all: the spinning dispatcher holds a CPU, and
// on a loaded machine the OS then delays the request goroutines it starts
// (`make trace-bench` at load 12 on 2 CPUs, six runs each: p99 lateness
// median 37 ms at 1.5 ms, 14 ms at 300 µs; median lateness 0.46 and 0.34 ms).
const spinWindow = 300 * time.Microsecond

// pacer holds a phase's requests (or a conversation's sessions) to its
// schedule: each goes at its intended offset from start (Phase.Next; all
// at once without it) and, under a concurrency cap (Phase.MaxConcurrency),
// once a slot is free. A slot carries the instant it freed, so that each
// request's send lateness counts from when it could go (closed loop: the
// end of the response before it), not from its place in the schedule.
type pacer struct {
	start time.Time
	next  func() time.Duration // the next intended offset
	slots chan time.Time       // nil without a cap
	timer *time.Timer
}

func newPacer(p measure.Phase, start time.Time) *pacer {
	pc := &pacer{start: start, next: p.Next, timer: time.NewTimer(time.Hour)}
	if pc.next == nil {
		pc.next = func() time.Duration { return 0 }
	}
	if p.MaxConcurrency > 0 {
		pc.slots = make(chan time.Time, p.MaxConcurrency)
		for range p.MaxConcurrency {
			pc.slots <- start
		}
	}
	return pc
}

// stop releases the pacer's timer.
func (pc *pacer) stop() { pc.timer.Stop() }

// admit waits until sched after start and then, under a concurrency cap,
// for a slot; ready is when the request could go (the later of the two,
// from start), which send lateness is measured against. false when ctx
// ends first.
func (pc *pacer) admit(ctx context.Context, sched time.Duration) (ready time.Duration, ok bool) {
	if !sleepUntil(ctx, pc.timer, pc.start.Add(sched)) {
		return 0, false
	}
	ready = sched
	if pc.slots != nil {
		select {
		case freed := <-pc.slots:
			ready = max(ready, freed.Sub(pc.start))
		case <-ctx.Done():
		}
	}
	return ready, ctx.Err() == nil
}

// free frees the slot of a request that ended, now.
func (pc *pacer) free() {
	if pc.slots != nil {
		pc.slots <- time.Now()
	}
}

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

// MaxModelLen asks the server's /v1/models for the model's max_model_len
// (vLLM and SGLang report it); 0 when it does not say by ctx's end.
func (h *httpTransport) MaxModelLen(ctx context.Context) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.target.URL("/v1/models"), nil)
	if err != nil {
		return 0
	}
	h.target.Header(req.Header)
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list) != nil {
		return 0
	}
	for _, m := range list.Data {
		if m.ID == h.target.Model || len(list.Data) == 1 {
			return m.MaxModelLen
		}
	}
	return 0
}

package sim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/serving/engine"
)

// spinWindow is how long before a step's end the engine loop stops sleeping
// and yields the processor in a loop instead, for sub-millisecond emission.
const spinWindow = 1500 * time.Microsecond

// ErrShutdown is the stream error requests in flight get when the server stops.
var ErrShutdown = errors.New("engine shut down")

// event is one engine step's output for one request.
type event struct {
	generated int       // tokens generated so far
	n         int       // tokens of this step (more than one under speculative decoding)
	last      bool      // the request is finished
	at        time.Time // when the step was scheduled to end
}

// stream is one request between its HTTP handler and the engine loop.
type stream struct {
	s       seq
	events  chan event // buffered for every token: the engine never blocks (nil on a wire)
	w       *wire      // the hijacked connection; nil when streaming through net/http
	arrived time.Time
	// ready is when it may enter the engine: its arrival or, on a decode
	// engine, the end of its KV's transfer (arrived + delay).
	ready   time.Time
	delay   time.Duration
	first   time.Time
	prev    time.Time
	emitted int // tokens handed to the stream (engine loop only)
}

// Server is the simulated engine behind the engine's OpenAI-compatible HTTP
// API. The engine loop (Run) advances the same core RunVirtual uses against
// the real clock, cfg.TimeScale times faster than simulated time, and emits
// one SSE message per request per engine step.
type Server struct {
	cfg      Config
	est      MemoryEstimate
	in       chan *stream
	aborts   chan *stream
	resets   chan chan struct{} // prefix-cache resets, answered when done; buffered, so that loop.intake sees those waiting
	done     chan struct{}      // closed when Run returns
	frontend time.Duration      // the front end's share of a request (real time)
	ready    atomic.Bool
	loaded   chan struct{} // closed when ready turns true
	nextID   atomic.Int64
	created  int64
	metrics  *metrics
	lateness latencyRecorder // socket write minus scheduled step end
	handoff  latencyRecorder // engine hand-off to the stream minus scheduled step end
	mux      *http.ServeMux
	runOnce  sync.Once
	writers  []*emitter // the writer pool of hijacked streams, by stream id
	liveMu   sync.Mutex
	live     map[*stream]struct{} // hijacked streams, for the shutdown sweep
	bodies   bodyBudget           // request body bytes held (admitBody)
	closing  bool                 // the sweep ran: new streams end at once
}

// NewServer checks that cfg fits in memory (the error is a *StartupError
// with the engine's message when it does not) and returns a server that is
// not ready until Run has spent the simulated load time.
func NewServer(cfg Config) (*Server, error) {
	est, err := cfg.startup()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, est: est,
		in:      make(chan *stream, 4096),
		aborts:  make(chan *stream, 4096),
		resets:  make(chan chan struct{}, 64),
		done:    make(chan struct{}),
		loaded:  make(chan struct{}),
		created: time.Now().Unix(),
		metrics: newMetrics(),
		mux:     http.NewServeMux(),
		live:    map[*stream]struct{}{},
	}
	// A request reaches the engine loop after the API server's own work
	// (frontend_overhead_ms): its arrival, in the engine's view, is that
	// much after the handler received it.
	s.frontend = s.scale(time.Duration(cfg.Constants.FrontendOverheadMs * float64(time.Millisecond)))
	for range writerCount() {
		s.writers = append(s.writers, &emitter{wake: make(chan struct{}, 1)})
	}
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /health_generate", s.handleHealth)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "servetune-sim"})
	})
	s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.metrics.write(w, s.cfg.Engine, s.cfg.ModelID)
	})
	s.mux.HandleFunc("POST /tokenize", s.handleTokenize)
	s.mux.HandleFunc("POST /reset_prefix_cache", s.handleResetPrefixCache)
	s.mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, false) })
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, true) })
	return s, nil
}

// handleResetPrefixCache serves vLLM's POST /reset_prefix_cache: 200 once
// the engine loop has forgotten its cached prefixes.
func (s *Server) handleResetPrefixCache(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	done := make(chan struct{})
	select {
	case s.resets <- done:
	case <-s.done:
		http.Error(w, "the engine has stopped", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	select {
	case <-done:
		w.WriteHeader(http.StatusOK)
	case <-s.done:
		http.Error(w, "the engine has stopped", http.StatusServiceUnavailable)
	case <-r.Context().Done():
	}
}

// Estimate returns the memory accounting the server started with.
func (s *Server) Estimate() MemoryEstimate { return s.est }

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler { return engine.WithNonce(s.mux) }

// Ready reports whether the simulated load time is over.
func (s *Server) Ready() bool { return s.ready.Load() }

// Loaded is closed once the simulated load time is over (Ready): what a
// caller waits on before it sends.
func (s *Server) Loaded() <-chan struct{} { return s.loaded }

// EmitLateness returns the q-quantile of emission lateness: the time a
// stream message was written to its connection minus the end of the engine
// step that produced it (10 us resolution).
func (s *Server) EmitLateness(q float64) time.Duration { return s.lateness.quantile(q) }

// HandoffLateness returns the q-quantile of the engine's own lateness: the
// time each token was handed to its stream (the engine loop's emission)
// minus the end of the engine step that produced it.
func (s *Server) HandoffLateness(q float64) time.Duration { return s.handoff.quantile(q) }

// ResetLateness clears the lateness statistics (after a warm-up).
func (s *Server) ResetLateness() {
	s.lateness.reset()
	s.handoff.reset()
}

// Run is the engine loop: it waits the load time (scaled), turns ready, and
// steps the engine until ctx ends. It may be called once; requests still in
// flight when it returns end with a stream error.
func (s *Server) Run(ctx context.Context) error {
	first := false
	s.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("sim: Server.Run called twice")
	}
	defer close(s.done)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for _, e := range s.writers {
		writers.Go(func() { s.runWriter(e, stop) })
	}
	defer func() {
		s.sweepWires()
		close(stop)
		writers.Wait()
	}()
	timer := time.NewTimer(s.scale(s.cfg.LoadTime))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-timer.C:
	}
	s.ready.Store(true)
	close(s.loaded)
	newLoop(s, timer).run(ctx)
	return nil
}

// emitted is one token handed to its stream in the step just committed.
type emitted struct {
	st   *stream
	q    *seq
	last bool
}

// loop is the engine loop's state: one core per data-parallel rank, each on
// its own step timeline, as Virtual runs them; arrivals go to the least
// loaded rank. Owned by Run's goroutine.
type loop struct {
	s        *Server
	timer    *time.Timer
	cores    []*core
	busy     []bool
	ends     []time.Time // scheduled end of the step in flight
	chained  []bool      // the next step follows the last one directly
	streams  map[int]*stream
	rankOf   map[int]int
	aborted  map[*stream]bool // aborts that overtook their request
	deferred [][]*stream      // per rank: aborts that wait for the step in flight
	pending  [][]*stream      // per rank: arrived requests not yet in the engine, in order of readiness
	base     time.Time
	spin     bool
	// window is how long before a step's end the loop spins: spinWindow
	// on the real clock, where the client's instants are the measurement;
	// none when time-scaled, where token times travel with the engine's
	// clock and a spinning loop would only starve the client of a core.
	window  time.Duration
	now     time.Time
	out     []emitted
	batches [][]pending // per writer: tokens of the step for hijacked streams
}

func newLoop(s *Server, timer *time.Timer) *loop {
	l := &loop{
		s: s, timer: timer,
		cores: make([]*core, s.cfg.DP), busy: make([]bool, s.cfg.DP),
		ends: make([]time.Time, s.cfg.DP), chained: make([]bool, s.cfg.DP),
		streams: map[int]*stream{}, rankOf: map[int]int{}, aborted: map[*stream]bool{},
		deferred: make([][]*stream, s.cfg.DP), pending: make([][]*stream, s.cfg.DP), base: time.Now(), spin: runtime.GOMAXPROCS(0) > 1, window: spinWindow,
		batches: make([][]pending, len(s.writers)),
	}
	for i := range l.cores {
		l.cores[i] = newCore(s.cfg, s.est)
	}
	if s.cfg.TimeScale != 1 {
		l.window = 0
	}
	return l
}

// simNow is the engine clock in simulated seconds.
func (l *loop) simNow(t time.Time) float64 { return t.Sub(l.base).Seconds() * l.s.cfg.TimeScale }

// run steps the cores until ctx ends.
func (l *loop) run(ctx context.Context) {
	for {
		l.intake()
		next := -1
		for k := range l.cores {
			if !l.busy[k] {
				if l.cores[k].idle() && len(l.pending[k]) == 0 {
					l.chained[k] = false
				} else {
					l.start(k)
				}
			}
			if l.busy[k] && (next < 0 || l.ends[k].Before(l.ends[next])) {
				next = k
			}
		}
		if next < 0 {
			l.s.publish(l.cores)
			if done, _ := l.receive(ctx.Done(), nil, l.s.resets); done {
				return
			}
			continue
		}
		done, woke := l.wait(ctx, next)
		if done {
			return
		}
		if !woke {
			l.commit(next)
		}
	}
}

// intake takes everything that arrived, without blocking: the loop is
// the channels' one receiver, so each message waiting is there to take.
func (l *loop) intake() {
	for len(l.s.in) > 0 || len(l.s.aborts) > 0 || len(l.s.resets) > 0 {
		l.receive(nil, nil, l.s.resets)
	}
}

// receive takes the next message that reaches the engine: a request, an
// abort or, from resets (nil while a step is in flight), a prefix-cache
// reset. It waits for one, for stop to close (done) or for wake to fire,
// whichever is first; woke reports a message.
func (l *loop) receive(stop <-chan struct{}, wake <-chan time.Time, resets chan chan struct{}) (done, woke bool) {
	select {
	case <-stop:
		return true, false
	case <-wake:
		return false, false
	case st := <-l.s.in:
		l.admit(st)
	case st := <-l.s.aborts:
		l.abort(st)
	case reset := <-resets:
		l.resetPrefixCache(reset)
	}
	return false, true
}

// resetPrefixCache forgets every cached prefix, as vLLM's POST
// /reset_prefix_cache does: no later prompt hits what came before, and
// the cached blocks no running request uses are freed. Prefixes that
// running requests hold stay theirs until they finish.
func (l *loop) resetPrefixCache(done chan struct{}) {
	for _, c := range l.cores {
		c.resetCache()
	}
	close(done)
}

// wait sleeps until core next's step ends. Go's timers sleep through the
// netpoller at millisecond granularity when the process is idle: it sleeps
// to within spinWindow of the step's end, then spins until it. The spin
// keeps the processor: a yield (runtime.Gosched) would put the loop at the
// back of the global run queue, behind every runnable goroutine, and make
// the step late under load. With a single processor it must yield, or
// nothing else would run. woke reports an arrival or abort that came first
// (the step is still in flight); done that ctx ended.
func (l *loop) wait(ctx context.Context, next int) (done, woke bool) {
	if d := time.Until(l.ends[next]) - l.window; d > 0 {
		l.timer.Reset(d)
		if done, woke = l.receive(ctx.Done(), l.timer.C, nil); done || woke {
			l.timer.Stop()
			return done, woke
		}
	}
	for time.Now().Before(l.ends[next]) {
		if !l.spin {
			runtime.Gosched()
		}
	}
	return false, false
}

// commit ends core next's step: tokens go to their streams first, the
// bookkeeping after, so the last stream of a large batch is not kept
// waiting by metrics.
func (l *loop) commit(next int) {
	l.now = l.ends[next]
	l.busy[next] = false
	l.out = l.out[:0]
	l.cores[next].commit(l.simNow(l.now), l.emit)
	for _, st := range l.deferred[next] {
		if _, ok := l.rankOf[st.s.id]; ok {
			l.abort(st)
		}
	}
	clear(l.deferred[next])
	l.deferred[next] = l.deferred[next][:0]
	for k, b := range l.batches {
		if len(b) > 0 {
			l.s.writers[k].put(b)
			clear(b)
			l.batches[k] = b[:0]
		}
	}
	handed := time.Since(l.now)
	for _, e := range l.out {
		l.s.handoff.observe(handed)
		l.s.observeToken(e.st, e.q, e.last, l.now)
	}
	clear(l.out)
	l.s.publish(l.cores)
}

// emit hands a step's sampled tokens to their stream when it sends them
// now (Config.sends); held tokens go with the next message.
func (l *loop) emit(q *seq, last bool) {
	st := l.streams[q.id]
	if n := q.generated - st.emitted; l.s.cfg.sends(n, st.emitted, last) {
		st.emitted = q.generated
		ev := event{generated: q.generated, n: n, last: last, at: l.now}
		if st.w != nil {
			k := q.id % len(l.batches)
			l.batches[k] = append(l.batches[k], pending{st, ev})
		} else {
			st.events <- ev
		}
	}
	if last {
		delete(l.streams, q.id)
		delete(l.rankOf, q.id)
	}
	l.out = append(l.out, emitted{st, q, last})
}

// admit queues a new request on the least loaded rank.
func (l *loop) admit(st *stream) {
	if l.aborted[st] {
		delete(l.aborted, st)
		return
	}
	l.streams[st.s.id] = st
	st.s.arrival = l.simNow(st.arrived)
	best := 0
	for k := range l.cores {
		if l.cores[k].load()+len(l.pending[k]) < l.cores[best].load()+len(l.pending[best]) {
			best = k
		}
	}
	l.rankOf[st.s.id] = best
	// In order of readiness: a decode engine's request waits for its KV,
	// and one whose KV lands first enters first.
	p := l.pending[best]
	i := len(p)
	for i > 0 && p[i-1].ready.After(st.ready) {
		i--
	}
	l.pending[best] = slices.Insert(p, i, st)
}

// abort drops a request whose client left. An abort that arrives while its
// rank's step is in flight waits for it: the step's commit still counts the
// request's tokens (and releases its blocks when it finishes).
func (l *loop) abort(st *stream) {
	k, ok := l.rankOf[st.s.id]
	if !ok {
		if !st.s.done {
			l.aborted[st] = true
		}
		return
	}
	if i := slices.Index(l.pending[k], st); i >= 0 {
		l.pending[k] = slices.Delete(l.pending[k], i, i+1)
		delete(l.streams, st.s.id)
		delete(l.rankOf, st.s.id)
		return
	}
	if l.busy[k] {
		l.deferred[k] = append(l.deferred[k], st)
		return
	}
	l.cores[k].abort(&st.s)
	delete(l.streams, st.s.id)
	delete(l.rankOf, st.s.id)
}

// start plans core k's next step on the engine's own timeline: steps chain
// back to back, the first after an idle spell starts when its request
// arrived (not when the loop noticed it), and a request joins the first
// step that starts after it arrived. So the engine's clock is the model's
// whatever this machine's scheduling does to the loop: a late loop emits
// late, which the client measures once, instead of a restarted timeline
// that would turn every stall into engine time, time-scale times over.
func (l *loop) start(k int) {
	from := l.ends[k]
	if !l.chained[k] && len(l.pending[k]) > 0 {
		if a := l.pending[k][0].ready; a.After(from) {
			from = a
		}
	}
	l.enter(k, from)
	b, secs := l.cores[k].schedule(l.simNow(from))
	if b.tokens == 0 && len(l.pending[k]) > 0 {
		// Nothing runs until the next arrival: the step starts then.
		from = l.pending[k][0].ready
		l.enter(k, from)
		b, secs = l.cores[k].schedule(l.simNow(from))
	}
	if b.tokens == 0 {
		l.chained[k] = false
		return
	}
	l.busy[k], l.chained[k] = true, true
	l.ends[k] = from.Add(l.s.scale(time.Duration(secs * 1e9)))
}

// enter moves the requests that arrived by at into core k.
func (l *loop) enter(k int, at time.Time) {
	n := 0
	for n < len(l.pending[k]) && !l.pending[k][n].ready.After(at) {
		l.cores[k].add(&l.pending[k][n].s)
		n++
	}
	if n > 0 {
		l.pending[k] = append(l.pending[k][:0], l.pending[k][n:]...)
	}
}

// scale converts simulated time to real time.
func (s *Server) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.cfg.TimeScale)
}

// publish copies the cores' gauges and counters (summed over
// data-parallel ranks; KV usage averaged) into the metrics.
func (s *Server) publish(cores []*core) {
	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running, m.waiting, m.kvUsage = 0, 0, 0
	m.promptTokens, m.genTokens, m.preemptions, m.prefixQueries, m.prefixHits = 0, 0, 0, 0, 0
	m.specDrafts, m.specDraftTokens, m.specAccepted = 0, 0, 0
	clear(m.specAcceptedAt)
	for _, c := range cores {
		if c.specK > 0 {
			m.spec = true
			m.specDrafts += c.specDrafts
			m.specDraftTokens += c.specDraftTokens
			m.specAccepted += c.specAccepted
			if m.specAcceptedAt == nil {
				m.specAcceptedAt = make([]int64, c.specK)
			}
			for i, v := range c.specAcceptedAt {
				m.specAcceptedAt[i] += v
			}
		}
		m.running += c.active()
		m.waiting += c.waitingCount()
		m.kvUsage += c.kvUsage() / float64(len(cores))
		m.promptTokens += c.promptTokens
		m.genTokens += c.genTokens
		m.preemptions += c.preemptions
		m.prefixQueries += c.prefixQueries
		m.prefixHits += c.prefixHits
	}
	if t := time.Now(); t.Sub(m.genWindowAt) >= time.Second {
		if !m.genWindowAt.IsZero() {
			m.genThroughput = float64(m.genTokens-m.genWindow[0]) / t.Sub(m.genWindowAt).Seconds()
		}
		m.genWindow[0], m.genWindowAt = m.genTokens, t
	}
	close(m.published)
	m.published = make(chan struct{})
}

// observeToken feeds the latency histograms (real-clock seconds).
func (s *Server) observeToken(st *stream, q *seq, last bool, now time.Time) {
	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	if q.generated == 1 {
		st.first = now
		m.ttft.observe(now.Sub(st.arrived).Seconds())
	} else {
		m.itl.observe(now.Sub(st.prev).Seconds())
	}
	st.prev = now
	if last {
		m.success++
		m.e2e.observe(now.Sub(st.arrived).Seconds())
		m.decode.observe(now.Sub(st.first).Seconds())
		queued := q.queuedFor / s.cfg.TimeScale
		m.queue.observe(queued)
		m.prefill.observe(max(0, st.first.Sub(st.arrived).Seconds()-queued))
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-s.done:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	default:
	}
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	owner := "vllm"
	if s.cfg.Engine == engine.SGLang {
		owner = "sglang"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.ModelID, "object": "model", "created": s.created, "owned_by": owner,
			"root": s.cfg.Model.ID, "max_model_len": s.cfg.MaxModelLen,
		}},
	})
}

// apiError writes an OpenAI-style error body.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody(status, typ, msg))
}

// errorBody is an OpenAI-style error: the server's and the router's.
func errorBody(status int, typ, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authorized checks the Bearer token when the server was started with
// --api-key. The key is compared in constant time and never logged.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.APIKey)) == 1 {
		return true
	}
	apiError(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
	return false
}

// genRequest is the part of a completions or chat request the simulator uses.
type genRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
	N *int `json:"n"`
	// The sampling fields the simulator costs (Config.RequestSampling);
	// unset ones take the server's defaults.
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	TopK        *int     `json:"top_k"`
	// KVTransferParams is the disaggregation handshake (disagg.go).
	KVTransferParams *kvTransferParams `json:"kv_transfer_params"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// maxBodyBytes bounds a request body (long prompts are a few MB at most).
const maxBodyBytes = 64 << 20

// maxBodiesBytes bounds the request bodies one server holds at once, from
// reading them to the end of their answers: eight concurrent 60 MB bodies
// took it from 65 MB to 1.34 GB. A request past it waits for room (as
// long as a body may take to arrive), then is answered 503.
const maxBodiesBytes = 2 * maxBodyBytes

// bodyBudget is a weighted semaphore over request body bytes.
type bodyBudget struct {
	mu      sync.Mutex
	used    int64
	waiters []chan struct{}
}

// acquire takes n bytes, waiting until they fit or ctx ends (false).
func (b *bodyBudget) acquire(ctx context.Context, n int64) bool {
	for {
		b.mu.Lock()
		if b.used+n <= maxBodiesBytes {
			b.used += n
			b.mu.Unlock()
			return true
		}
		ch := make(chan struct{})
		b.waiters = append(b.waiters, ch)
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// release returns n bytes and wakes every waiter to try again.
func (b *bodyBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	w := b.waiters
	b.waiters = nil
	b.mu.Unlock()
	for _, ch := range w {
		close(ch)
	}
}

// admitWait is how long a request waits for room among the bodies in
// flight: as long as a body may take to arrive.
var admitWait = bodyTimeout

// admitBody reserves r's body (its Content-Length, or the largest body
// when it sends none) in the server's budget; false after answering 503
// when no room came within admitWait.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	n := r.ContentLength
	if n < 0 || n > maxBodyBytes {
		n = maxBodyBytes // MaxBytesReader refuses more
	}
	ctx, cancel := context.WithTimeout(r.Context(), admitWait)
	defer cancel()
	if !s.bodies.acquire(ctx, n) {
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError",
			fmt.Sprintf("request bodies in flight are at the server's cap of %d bytes", maxBodiesBytes))
		return nil, false
	}
	return func() { s.bodies.release(n) }, true
}

// promptTokens counts the tokens of a completions prompt (a string, one
// string in an array, or token ids) or of chat messages (the text of every
// message; the simulated chat template adds nothing), and returns the text
// (TokenIDs gives its ids) or, for a prompt of token ids, the ids.
func promptTokens(req *genRequest, chat bool) (int, string, []int, error) {
	if chat {
		if len(req.Messages) == 0 {
			return 0, "", nil, errors.New("messages: at least one message is required")
		}
		n := 0
		var all strings.Builder
		for i, m := range req.Messages {
			k, text, err := contentTokens(m.Content)
			if err != nil {
				return 0, "", nil, fmt.Errorf("messages[%d].content: %w", i, err)
			}
			n += k
			all.WriteString(text)
			all.WriteByte(' ')
		}
		return n, all.String(), nil, nil
	}
	if len(req.Prompt) == 0 {
		return 0, "", nil, errors.New("prompt: field required")
	}
	var text string
	if err := json.Unmarshal(req.Prompt, &text); err == nil {
		return CountTokens(text), text, nil, nil
	}
	var texts []string
	if err := json.Unmarshal(req.Prompt, &texts); err == nil {
		if len(texts) != 1 {
			return 0, "", nil, errors.New("prompt: the simulator takes one prompt per request")
		}
		return CountTokens(texts[0]), texts[0], nil, nil
	}
	var ids []int
	if err := json.Unmarshal(req.Prompt, &ids); err == nil {
		return len(ids), "", ids, nil
	}
	return 0, "", nil, errors.New("prompt: want a string, an array of one string, or token ids")
}

// inVocabulary refuses a prompt of token ids holding one outside the
// model's vocabulary (vocab 0: unknown, only negative ids refused), in
// vLLM's words.
func inVocabulary(ids []int, vocab int) error {
	for _, id := range ids {
		if id < 0 || (vocab > 0 && id >= vocab) {
			return fmt.Errorf("Token id %d is out of vocabulary (the model's has %d tokens, ids 0 to %d)", id, vocab, vocab-1)
		}
	}
	return nil
}

func contentTokens(raw json.RawMessage) (int, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "", nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return CountTokens(text), text, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return 0, "", errors.New("want a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte(' ')
	}
	return CountTokens(b.String()), b.String(), nil
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req struct {
		Prompt   *string       `json:"prompt"`
		Messages []chatMessage `json:"messages"`
	}
	release, ok := s.admitBody(w, r)
	if !ok {
		return
	}
	defer release()
	if !decodeBody(w, r, &req) {
		return
	}
	var text string
	switch {
	case req.Prompt != nil:
		text = *req.Prompt
	case len(req.Messages) > 0:
		var b strings.Builder
		for i, m := range req.Messages {
			_, t, err := contentTokens(m.Content)
			if err != nil {
				apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("messages[%d].content: %v", i, err))
				return
			}
			b.WriteString(t)
			b.WriteByte(' ')
		}
		text = b.String()
	default:
		apiError(w, http.StatusBadRequest, "BadRequestError", "prompt or messages: field required")
		return
	}
	ids := TokenIDs(text, s.cfg.Model.Vocab)
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": s.cfg.MaxModelLen, "tokens": ids})
}

// headerTimeout bounds reading a request's headers: a client that
// connects and sends nothing (slowloris) is dropped after it.
var headerTimeout = 10 * time.Second

// bodyTimeout bounds reading a request body: a client that sends headers
// and then stalls the body would otherwise hold its handler forever.
var bodyTimeout = 30 * time.Second

// decodeBody reads r's JSON body into v, at most maxBodyBytes within
// bodyTimeout, and answers the error itself when it cannot: 413 for a body
// too large, 408 for one that stalls, 400 for invalid JSON.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(v)
	var tooLarge *http.MaxBytesError
	var nerr net.Error
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
		return true
	}
	// The deadline stays: after the handler the server would otherwise
	// wait for the rest of a stalled body before sending the answer.
	w.Header().Set("Connection", "close")
	switch {
	case errors.As(err, &tooLarge):
		apiError(w, http.StatusRequestEntityTooLarge, "BadRequestError", fmt.Sprintf("request body too large: over %d bytes", tooLarge.Limit))
	case errors.As(err, &nerr) && nerr.Timeout():
		apiError(w, http.StatusRequestTimeout, "BadRequestError", fmt.Sprintf("request body not received within %s", bodyTimeout))
	default:
		apiError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body: "+err.Error())
	}
	return false
}

// checkedRequest is what checkRequest reads off an admitted request.
type checkedRequest struct {
	prompt int    // prompt tokens
	text   string // the prompt's text ("" for token ids)
	ids    []int  // the prompt's token ids (nil for text)
	maxOut int    // output tokens the request may generate
}

// checkRequest answers whether the engine takes req as vLLM's API server
// would: the served model, one choice, a prompt of in-vocabulary tokens,
// a max_tokens that fits the context, KV-transfer parameters this role
// understands. msg is "" when it does; otherwise status, kind and msg are
// the error to answer with.
func (s *Server) checkRequest(req *genRequest, chat bool) (c checkedRequest, status int, kind, msg string) {
	if req.Model != "" && req.Model != s.cfg.ModelID {
		return c, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model)
	}
	bad := func(m string) (checkedRequest, int, string, string) {
		return c, http.StatusBadRequest, "BadRequestError", m
	}
	if req.N != nil && *req.N != 1 {
		return bad("n: the simulator generates one choice per request")
	}
	var err error
	c.prompt, c.text, c.ids, err = promptTokens(req, chat)
	if err == nil {
		err = inVocabulary(c.ids, s.cfg.Model.Vocab)
	}
	if err != nil {
		return bad(err.Error())
	}
	maxTokens := 0 // unset
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens
	}
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if (req.MaxTokens != nil || req.MaxCompletionTokens != nil) && maxTokens < 1 && c.prompt > 0 {
		return bad(fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens))
	}
	c.maxOut, msg = admitLength(s.cfg.Engine, s.cfg.MaxModelLen, c.prompt, maxTokens)
	if msg != "" {
		return bad(msg)
	}
	if msg := s.checkKVParams(req.KVTransferParams, req.Stream); msg != "" {
		return bad(msg)
	}
	return c, 0, "", ""
}

// handleGenerate serves /v1/completions and /v1/chat/completions.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	w.Header().Set(engine.SimAnswerHeader, engine.SimAnswerValue)
	if !s.authorized(w, r) {
		return
	}
	if !s.ready.Load() {
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the engine is loading")
		return
	}
	release, ok := s.admitBody(w, r)
	if !ok {
		return
	}
	defer release()
	var req genRequest
	if !decodeBody(w, r, &req) {
		return
	}
	c, status, kind, msg := s.checkRequest(&req, chat)
	if msg != "" {
		apiError(w, status, kind, msg)
		return
	}
	prompt, text, ids, maxOut := c.prompt, c.text, c.ids, c.maxOut

	id := int(s.nextID.Add(1))
	st := &stream{
		s: seq{id: id, prompt: prompt, maxOut: maxOut, prefixID: -1,
			filters: s.cfg.RequestSampling(req.Temperature, req.TopP, req.TopK).Filters()},
		// arrived is stamped as the request enters the engine (submit):
		// the handler's own work before that is this machine's, not the
		// engine's, and under a time scale would be multiplied by it.
	}
	if s.cfg.PrefixCaching {
		// The prefix cache keys pages by the prompt's token ids
		// (core.pageHash).
		if ids == nil {
			ids = TokenIDs(text, s.cfg.Model.Vocab)
		}
		st.s.ids = ids
	}
	o := output{chat: chat, model: s.cfg.ModelID, created: s.created, prompt: prompt}
	if s.cfg.TimeScale != 1 {
		o.scale = s.cfg.TimeScale
	}
	if chat {
		o.id = "chatcmpl-" + strconv.Itoa(id)
	} else {
		o.id = "cmpl-" + strconv.Itoa(id)
	}
	if req.Stream && req.StreamOptions != nil {
		o.usage, o.continuous = req.StreamOptions.IncludeUsage, req.StreamOptions.ContinuousUsageStats
	}
	s.applyKVParams(req.KVTransferParams, st, &o)
	if req.Stream && s.respondWire(w, r, st, &o) {
		return
	}
	st.events = make(chan event, maxOut+1)
	s.stamp(st, &o)
	select {
	case s.in <- st:
	case <-r.Context().Done():
		return
	case <-s.done:
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", ErrShutdown.Error())
		return
	}
	w.Header().Set("X-Request-Id", strconv.Itoa(id))
	if !req.Stream {
		s.respondWhole(w, r, st, &o)
		return
	}
	s.respondStream(w, r, st, &o)
}

// wait returns the next event, or false when the client left or the engine
// stopped (the caller then aborts or reports the error).
func (s *Server) wait(r *http.Request, st *stream) (event, bool, error) {
	select {
	case ev := <-st.events:
		return ev, true, nil
	case <-r.Context().Done():
		s.abort(st)
		return event{}, false, r.Context().Err()
	case <-s.done:
		return event{}, false, ErrShutdown
	}
}

// abort tells the engine to drop a request whose client went away.
func (s *Server) abort(st *stream) {
	select {
	case s.aborts <- st:
	case <-s.done:
	}
}

func (s *Server) respondWhole(w http.ResponseWriter, r *http.Request, st *stream, o *output) {
	var ev event
	for !ev.last {
		var ok bool
		var err error
		if ev, ok, err = s.wait(r, st); !ok {
			if errors.Is(err, ErrShutdown) {
				apiError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
			}
			return
		}
	}
	var text strings.Builder
	for i := range ev.generated {
		text.WriteString(outputText(i))
	}
	choice := map[string]any{"index": 0, "finish_reason": "length", "logprobs": nil, "stop_reason": nil}
	obj := "text_completion"
	if o.chat {
		obj = "chat.completion"
		choice["message"] = map[string]any{"role": "assistant", "content": text.String()}
	} else {
		choice["text"] = text.String()
	}
	body := map[string]any{
		"id": o.id, "object": obj, "created": o.created, "model": o.model,
		"choices": []any{choice},
		"usage":   map[string]int{"prompt_tokens": o.prompt, "completion_tokens": ev.generated, "total_tokens": o.prompt + ev.generated},
	}
	if o.kvOut {
		body["kv_transfer_params"] = s.producedKV(o, ev)
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) respondStream(w http.ResponseWriter, r *http.Request, st *stream, o *output) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 0, 1024)
	if o.chat {
		buf = o.roleChunk(buf)
	}
	var ats []time.Time
	for {
		ev, ok, err := s.wait(r, st)
		if !ok {
			if errors.Is(err, ErrShutdown) {
				buf = append(buf, `data: {"error":{"message":"engine shut down","type":"InternalServerError","param":null,"code":500}}`+"\n\n"...)
				_, _ = w.Write(buf)
				if flusher != nil {
					flusher.Flush()
				}
			}
			return
		}
		// Coalesce writes (never messages) when the handler fell behind.
		ats = ats[:0]
		for {
			buf = o.tokenChunk(buf, ev)
			ats = append(ats, ev.at)
			if ev.last {
				break
			}
			select {
			case next := <-st.events:
				ev = next
				continue
			default:
			}
			break
		}
		if ev.last {
			if o.usage {
				buf = o.usageChunk(buf, ev.generated)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			s.abort(st)
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		now := time.Now()
		for _, at := range ats {
			s.lateness.observe(now.Sub(at))
		}
		buf = buf[:0]
		if ev.last {
			return
		}
	}
}

// output renders the stream messages of one request.
type output struct {
	chat, usage, continuous bool
	id, model               string
	created                 int64
	prompt                  int
	hd                      []byte // the rendered head, built once
	// scale, when not 0, is the time scale: each token chunk then carries
	// the engine's own clock since the request arrived
	// (servetune_engine_us) and how late this process wrote it
	// (servetune_lag_us), so a client converts its measurement back to
	// engine time without multiplying its own overhead (measure.EngineTime).
	scale   float64
	arrived time.Time
	// before is the engine time the request spent on a prefill engine
	// before it came here (real time at this server's scale), so the
	// engine clock of the chunks starts at the client's request.
	before time.Duration
	// kvOut: a prefill engine's request, whose answer carries the
	// kv_transfer_params a decode engine pulls the KV with.
	kvOut bool
}

// head appends the start every message of the request shares.
func (o *output) head(b []byte) []byte {
	if o.hd == nil {
		o.hd = o.renderHead(nil)
	}
	return append(b, o.hd...)
}

func (o *output) renderHead(b []byte) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, o.id...)
	if o.chat {
		b = append(b, `","object":"chat.completion.chunk","created":`...)
	} else {
		b = append(b, `","object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, o.created, 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, o.model)
	return b
}

func (o *output) roleChunk(b []byte) []byte {
	b = o.head(b)
	b = append(b, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	return b
}

func (o *output) tokenChunk(b []byte, ev event) []byte {
	b = o.head(b)
	if o.scale != 0 {
		b = append(b, `,"servetune_engine_us":`...)
		b = strconv.AppendInt(b, int64(ev.at.Sub(o.arrived).Seconds()*o.scale*1e6), 10)
		// How late this process writes the chunk after the instant its
		// engine timeline gave it (real time): the simulator's own lag on a
		// busy machine, which a real engine would not have, so the client
		// removes it rather than counting it as network.
		b = append(b, `,"servetune_lag_us":`...)
		b = strconv.AppendInt(b, max(0, time.Since(ev.at).Microseconds()), 10)
	}
	if o.chat {
		b = append(b, `,"choices":[{"index":0,"delta":{"content":"`...)
	} else {
		b = append(b, `,"choices":[{"index":0,"text":"`...)
	}
	for i := ev.generated - max(ev.n, 1); i < ev.generated; i++ {
		b = append(b, outputText(i)...)
	}
	if o.chat {
		b = append(b, `"}`...)
	} else {
		b = append(b, `"`...)
	}
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if ev.last {
		b = append(b, `"length"`...)
	} else {
		b = append(b, `null`...)
	}
	b = append(b, `}]`...)
	switch {
	case o.continuous:
		b = appendUsage(b, o.prompt, ev.generated)
	case o.usage:
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func (o *output) usageChunk(b []byte, generated int) []byte {
	b = o.head(b)
	b = append(b, `,"choices":[]`...)
	b = appendUsage(b, o.prompt, generated)
	return append(b, "}\n\n"...)
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	return append(b, '}')
}

// ListenAndServe is `sim serve`: it waits the simulated load time before
// listening on addr (a real engine refuses connections while it loads),
// then serves until ctx ends and shuts down gracefully. ready, when not nil,
// receives the bound address once the server accepts connections.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	// A port in use fails at once, not after the load time (the engine
	// binds it again once loaded, when it takes connections).
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	probe.Close()
	engineCtx, stopEngine := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = s.Run(engineCtx) })
	// Stop the engine before waiting for it, on every return.
	defer func() { stopEngine(); wg.Wait() }()
	select {
	case <-ctx.Done():
		return nil
	case <-s.loaded:
	}
	hs := &http.Server{Addr: addr, Handler: s.Handler(), ReadHeaderTimeout: headerTimeout, IdleTimeout: 60 * time.Second}
	err = httpserve.ListenAndServe(ctx, hs, 5*time.Second, httpserve.Hooks{Ready: ready, Stopping: stopEngine})
	stopEngine()
	wg.Wait()
	if err != nil {
		return err
	}
	return runErr
}

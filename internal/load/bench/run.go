package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/load/scrape"
	"github.com/servetune/servetune/internal/redact"
)

// DefaultTimeout is the per-request timeout when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Minute

// durationPool is how many requests a duration-bound run generates; past
// them it cycles, each cycle with distinct prompts (recycledPrompt).
const durationPool = 2048

// countPool is the most distinct requests a count-bound run generates
// (their prompts are built up front); a longer run cycles through them
// with distinct prompts, as a duration-bound one does.
const countPool = 10_000

// MaxOpenSessions bounds the sessions of a conversation in flight, started
// all at once (no request rate, no max concurrency) or as its max
// concurrency: each holds a goroutine, its messages and a connection with
// its buffers (about 60 KB in flight; 4,096 at once peaked at 660 MB), and
// 100,000 at once took 1.7 GB before this machine ran out of file
// descriptors.
const MaxOpenSessions = 1024

// MaxRequests bounds the requests of one level (and of its warm-up): a
// duration-bound level stops sending there. Each measured request keeps a
// record with its chunk times (about 3 KB at 128 output tokens), so this
// is at most a few hundred megabytes; two billion requests crashed the
// process out of memory.
const MaxRequests = 200_000

// recycledPrompt makes the cycle-th reuse of r's prompt differ from the
// original and from every other cycle in its first words after the shared
// prefix, so an engine's prefix cache cannot serve a repeated prompt from
// memory and under-report TTFT. The cycle number is written in mixed radix
// into up to three words, each swapped for another word of the same length:
// that keeps the token count in the simulated engine's tokenizer and, for
// these short common words, in BPE vocabularies.
func recycledPrompt(r measure.Request, cycle int) string {
	f := strings.Fields(r.Prompt)
	at := 0
	if r.PrefixID >= 0 && r.PrefixTokens > 0 {
		at = r.PrefixTokens // the prefix is built one word per token
	}
	rest := cycle - 1
	for k := at; k < min(at+3, len(f)); k++ {
		var alts []string
		for _, w := range words {
			if len(w) == len(f[k]) && w != f[k] {
				alts = append(alts, w)
			}
		}
		if len(alts) == 0 {
			continue
		}
		f[k] = alts[rest%len(alts)]
		rest /= len(alts)
	}
	return strings.Join(f, " ")
}

// Validate reports a config that cannot run, in one line.
func (cfg Config) Validate() error {
	if cfg.Transport == nil {
		if err := cfg.Target.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrBadConfig, err)
		}
	}
	l := cfg.Load
	if l.Rate < 0 || math.IsNaN(l.Rate) {
		return fmt.Errorf("%w: request rate %g must be > 0 or inf", ErrBadConfig, l.Rate)
	}
	if l.Burstiness < 0 || math.IsNaN(l.Burstiness) || math.IsInf(l.Burstiness, 0) {
		return fmt.Errorf("%w: burstiness %g must be > 0", ErrBadConfig, l.Burstiness)
	}
	if l.MaxConcurrency < 0 {
		return fmt.Errorf("%w: max concurrency %d must be >= 0", ErrBadConfig, l.MaxConcurrency)
	}
	if cfg.Duration < 0 || cfg.NumRequests < 0 || cfg.Warmup < 0 || cfg.Timeout < 0 {
		return fmt.Errorf("%w: negative duration, request count, warm-up or timeout", ErrBadConfig)
	}
	if cfg.NumRequests > MaxRequests || cfg.Warmup > MaxRequests || len(cfg.Requests) > MaxRequests {
		return fmt.Errorf("%w: at most %d requests (and warm-up requests) per level; split a longer run into levels or use --duration", ErrBadConfig, MaxRequests)
	}
	trace := cfg.Requests == nil && cfg.Dataset.Kind == DatasetTrace // its window bounds the run
	if cfg.Dataset.Kind == DatasetConversation && cfg.Requests == nil {
		// Bound by its sessions: NumRequests does not apply.
		switch {
		case cfg.Transport != nil && !converses(cfg.Transport):
			return fmt.Errorf("%w: a conversation needs an HTTP server or a transport that runs sessions closed loop: each turn waits for the answer before it", ErrBadConfig)
		case cfg.Duration > 0:
			return fmt.Errorf("%w: a conversation runs its sessions to the end: give --sessions, not --duration", ErrBadConfig)
		case l.Unlimited() && l.MaxConcurrency == 0 && cfg.Dataset.Sessions > MaxOpenSessions:
			return fmt.Errorf("%w: %d sessions all at once is over %d: give --max-concurrency or --request-rate", ErrBadConfig, cfg.Dataset.Sessions, MaxOpenSessions)
		case l.MaxConcurrency > MaxOpenSessions:
			return fmt.Errorf("%w: --max-concurrency %d is over %d sessions in flight for a conversation: run several clients for more", ErrBadConfig, l.MaxConcurrency, MaxOpenSessions)
		}
		return cfg.Dataset.Validate()
	}
	if cfg.Duration == 0 && cfg.NumRequests == 0 && cfg.Requests == nil && !trace {
		return fmt.Errorf("%w: need a request count or a duration", ErrBadConfig)
	}
	if cfg.Duration > 0 && l.Unlimited() && l.MaxConcurrency == 0 && !trace {
		return fmt.Errorf("%w: a duration-bound run needs a request rate or a max concurrency", ErrBadConfig)
	}
	if cfg.Requests == nil {
		return cfg.Dataset.Validate()
	}
	if len(cfg.Requests) == 0 {
		return fmt.Errorf("%w: empty request list", ErrBadConfig)
	}
	return nil
}

// Run drives cfg's load against its target and returns the measurements.
//
// Run owns the request stream: the dataset's requests, the warm-up ones and
// the arrival schedule come from independent streams seeded by cfg.Seed, so
// the same seed sends the same requests at the same offsets over every
// transport. Arrivals are open loop: the transport sends each request at its
// intended time whatever the server is doing; with MaxConcurrency it also
// waits for a free slot, and that wait shows up as queue time
// (t_send - t_sched), never hidden. Warm-up requests run first, closed loop
// at the run's concurrency, and are marked Warmup. A duration-bound run
// stops sending at Duration and drains requests in flight (each bounded by
// Timeout). Cancelling ctx aborts requests in flight; Run then returns what
// it has with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k, load := cfg.scale(), cfg.Load // the engine's time, for the summary
	cfg = cfg.realClock()
	tr := cfg.Transport
	if tr == nil {
		h := newHTTPTransport(cfg.Target, cfg.Load.MaxConcurrency, !cfg.KeepEOS, cfg.Sampling)
		defer h.close()
		tr = h
	}
	text := true
	if lo, ok := tr.(lengthsOnly); ok && lo.LengthsOnly() {
		text = false
	}
	if err := cfg.checkLengths(ctx, tr); err != nil {
		return nil, err
	}
	var sessions []convSession // a conversation's (conversation.go)
	conv := cfg.Dataset.Kind == DatasetConversation && cfg.Requests == nil
	var reqs, warm []measure.Request
	var offsets []time.Duration
	var build func(int) string // a trace's prompts, built as they are sent
	var err error
	if conv {
		sessions, reqs, warm, err = cfg.conversation(text)
	} else {
		reqs, warm, offsets, build, err = cfg.requests(text)
	}
	if err != nil {
		return nil, err
	}
	align, reset := cfg.prepareServer(ctx, tr, reqs, warm)
	if conv && len(sessions) > 0 && sessions[0].lazy != nil && !cfg.NoAlign {
		align = fmt.Sprintf("off: the level's %d turns are over %d, so each session's messages are built when it starts, not aligned with /tokenize; prompt lengths approximate", len(reqs), eagerTurns)
	}

	var fold *measure.Folded
	var done func(*measure.Record)
	if cfg.Transport == nil && !cfg.KeepChunks && !cfg.Summary.KeepSamples {
		fold = measure.NewFolded(cfg.Seed)
		done = func(r *measure.Record) { fold.Add(r, k) }
	}
	records, err := cfg.warmUp(ctx, tr, warm, done)
	if err != nil {
		return &Result{Records: records}, err
	}
	if err := ctx.Err(); err != nil {
		return &Result{Records: records}, err
	}

	w := cfg.watch(ctx, tr)
	lr, timed := tr.(latenessReporter)
	var probe *clientProbe
	if timed {
		probe = startClientProbe()
	}
	measured, start := cfg.send(ctx, tr, conv, sessions, reqs, offsets, build, done, k)
	if records == nil {
		records = measured // no warm-up: no copy of a level's records
	} else {
		records = append(records, measured...)
	}
	if fold != nil {
		for i := range records {
			fold.Add(&records[i], k) // a no-op for those folded as they ended
		}
	}
	why := stopReason(tr)
	seen := w.stop()

	opts := cfg.Summary
	opts.Folded = fold
	sum := summarize(records, opts, k)
	if timed {
		// The client's lateness is on its own clock: judged against the
		// latencies as it saw them.
		sum.Client = probe.stop(lr.Lateness(), sum.TTFT.P99/k, sum.E2EL.Median/k)
	}
	sum.MaxConcurrency = load.MaxConcurrency
	if !load.Unlimited() {
		sum.RequestRate = load.Rate
	}
	sum.Meta = runMeta(cfg, start, align, len(warm), records)
	if reset != "" {
		sum.Meta["prefix_cache_reset"] = reset
	}
	describe(&sum, cfg, start)
	seen.into(&sum, k, cfg.GPU != nil)
	if conv {
		sum.Conversation = summarizeConversation(sessions, records, sum.Engine)
	}
	if why != "" {
		sum.Meta["stopped"] = why
		return &Result{Summary: sum, Records: records, Start: start, GPU: seen.gpu}, fmt.Errorf("%w: %s", ErrStopped, why)
	}
	return &Result{Summary: sum, Records: records, Start: start, GPU: seen.gpu}, ctx.Err()
}

// send runs the measured phase over tr: a conversation's sessions when
// conv, else reqs at their offsets, each prompt built by
// build as it is sent when build is set. done sees each record as it
// ends; k is the engine's time scale.
func (cfg Config) send(ctx context.Context, tr measure.Transport, conv bool, sessions []convSession, reqs []measure.Request,
	offsets []time.Duration, build func(int) string, done func(*measure.Record), k float64) ([]measure.Record, time.Time) {
	if conv {
		p := measure.Phase{MaxConcurrency: cfg.Load.MaxConcurrency, Timeout: timeout(cfg), Progress: cfg.Progress, Waiting: cfg.Waiting,
			Next: cfg.Load.Pacer(rand.New(rand.NewPCG(cfg.Seed, streamSchedule))).Next, Done: done}
		if h, ok := tr.(*httpTransport); ok {
			return h.converse(ctx, p, sessions, reqs, k)
		}
		return tr.Send(ctx, closedLoop(p, sessions, reqs, cfg.Seed))
	}
	p := cfg.phase(reqs, offsets)
	p.Done = done
	if cfg.Duration == 0 && k == 1 {
		p.Bounds = cfg.Bounds // the records are the summary's: in the engine's time
	}
	p.LatenciesOnly = cfg.LatenciesOnly
	if build != nil {
		request := p.Request
		p.Request = func(i int) measure.Request {
			r := request(i)
			r.Prompt = build(i)
			return r
		}
	}
	return tr.Send(ctx, p)
}

// prepareServer aligns the prompts' lengths with the server's tokenizer
// and resets its prefix cache when asked; it returns what each did, for
// the result's meta.
func (cfg Config) prepareServer(ctx context.Context, tr measure.Transport, reqs, warm []measure.Request) (align, reset string) {
	align = "off"
	if !cfg.NoAlign {
		// Bounded so that a hung server costs little before the run
		// classifies it.
		actx, cancel := context.WithTimeout(ctx, min(timeout(cfg), 10*time.Second))
		alignRNG := rand.New(rand.NewPCG(cfg.Seed, streamAlign))
		align = tr.Align(actx, reqs, alignRNG)
		if len(warm) > 0 {
			tr.Align(actx, warm, alignRNG)
		}
		cancel()
	}
	if cfg.ResetPrefixCache && cfg.Transport == nil {
		// After the checks, before anything is sent: a refused run
		// leaves the server as it was. Bounded like the alignment.
		rctx, cancel := context.WithTimeout(ctx, min(timeout(cfg), 3*time.Second))
		reset, _ = ResetPrefixCache(rctx, cfg.Target)
		cancel()
	}
	return align, reset
}

// warmUp sends the warm-up requests (none when warm is empty); an error
// when the transport stopped during them.
func (cfg Config) warmUp(ctx context.Context, tr measure.Transport, warm []measure.Request, done func(*measure.Record)) ([]measure.Record, error) {
	if len(warm) == 0 {
		return nil, nil
	}
	wc := cfg.Load.MaxConcurrency
	if wc == 0 {
		wc = min(max(cfg.Warmup, len(warm)), 4096)
	}
	count := max(cfg.Warmup, len(warm)) // the warm-up pool cycles past countPool
	recs, _ := tr.Send(ctx, measure.Phase{Waiting: cfg.Waiting,
		Warmup: true, Count: count, MaxConcurrency: wc, Timeout: timeout(cfg), Done: done,
		Request: func(i int) measure.Request {
			r := warm[i%len(warm)]
			if cycle := i / len(warm); cycle > 0 {
				r.Prompt = recycledPrompt(r, cycle)
			}
			r.Index = -1 - i // warm-up indices are negative
			return r
		},
	})
	if why := stopReason(tr); why != "" {
		return recs, fmt.Errorf("%w during the warm-up: %s", ErrStopped, why)
	}
	return recs, nil
}

// watcher observes the engine during a measured phase: its /metrics and
// its GPUs.
type watcher struct {
	tr      measure.Transport
	scraper *scrape.Scraper
	gpus    *gpu.Sampler
}

// watch starts what cfg asks to observe during the measured phase.
func (cfg Config) watch(ctx context.Context, tr measure.Transport) *watcher {
	w := &watcher{tr: tr}
	if cfg.ScrapeMetrics && cfg.Transport == nil {
		h := http.Header{}
		if cfg.Target.APIKey != "" {
			h.Set("Authorization", "Bearer "+cfg.Target.APIKey)
		}
		w.scraper = scrape.New(strings.TrimRight(cfg.Target.BaseURL, "/")+"/metrics", cfg.MetricsInterval, nil, h)
		w.scraper.Start(ctx)
	}
	if g := cfg.GPU; g != nil && g.Reader != nil && len(g.GPUs) > 0 {
		w.gpus = gpu.NewSampler(g.Reader, g.GPUs, g.Interval)
		w.gpus.Start(ctx)
	}
	return w
}

// seen is what a watcher observed.
type seen struct {
	engine    *measure.EngineMetrics
	engineErr error // why engine is nil or rests on fewer readings
	gpu       []gpu.Sample
}

// into puts what was seen into sum: the engine's metrics on the engine's
// time (scale k), why they are missing, and with gpus the GPUs' usage.
func (sn seen) into(sum *measure.Summary, k float64, gpus bool) {
	sum.Engine = sn.engine
	sum.Engine.Scale(k)
	if sn.engineErr != nil {
		// Why the level has no engine metrics (or fewer readings).
		sum.Meta["engine_metrics_error"] = redact.Message(sn.engineErr.Error()) // the URL may hold a password or a key
	}
	if gpus {
		sum.GPU = gpu.Usage(sn.gpu, sum.TotalOutputTokens)
	}
}

// stop ends the observation and returns what it saw.
func (w *watcher) stop() seen {
	var out seen
	if w.gpus != nil {
		out.gpu = w.gpus.Stop()
	}
	switch r, ok := w.tr.(engineReporter); {
	case w.scraper != nil:
		out.engine, out.engineErr = w.scraper.Stop()
	case ok:
		out.engine = r.EngineMetrics()
	}
	return out
}

// stopReason is why the transport's last phase stopped sending early.
func stopReason(tr measure.Transport) string {
	if s, ok := tr.(interface{ Stopped() string }); ok {
		return s.Stopped()
	}
	return ""
}

// modelLimiter is a transport that knows the server's context length.
type modelLimiter interface {
	MaxModelLen(ctx context.Context) int
}

// checkLengths refuses a run whose requests cannot fit the server's
// context (a prompt and output longer than its max_model_len) before any
// prompt text is built or sent: each such request would be a 400 after
// building and uploading a prompt that may be gigabytes. The lengths come
// from the same seeded streams as the requests, without text.
func (cfg Config) checkLengths(ctx context.Context, tr measure.Transport) error {
	ml, ok := tr.(modelLimiter)
	if !ok {
		return nil
	}
	var reqs []measure.Request
	if cfg.Requests != nil {
		reqs = cfg.Requests
	} else if cfg.Dataset.Kind == DatasetConversation {
		var err error
		if reqs, err = cfg.conversationLengths(); err != nil {
			return err
		}
	} else {
		c := cfg
		if c.Duration > 0 {
			c.NumRequests = durationPool
		}
		var err error
		if reqs, _, _, err = c.lengths(); err != nil {
			return err
		}
	}
	// Bounded like the prompt alignment: a hung server costs little here.
	lctx, cancel := context.WithTimeout(ctx, min(timeout(cfg), 3*time.Second))
	limit := ml.MaxModelLen(lctx)
	cancel()
	if limit <= 0 {
		return nil
	}
	over, worst := 0, measure.Request{}
	for _, r := range reqs {
		if r.PromptTokens+r.MaxTokens > limit {
			over++
			if r.PromptTokens+r.MaxTokens > worst.PromptTokens+worst.MaxTokens {
				worst = r
			}
		}
	}
	if over > 0 {
		return fmt.Errorf("%w: %d of %d requests do not fit the server's max_model_len %d (the longest: %d prompt + %d output tokens); shorten the input/output lengths or clip them (max=)",
			ErrBadConfig, over, len(reqs), limit, worst.PromptTokens, worst.MaxTokens)
	}
	return nil
}

// lengths generates cfg's requests without prompt text.
func (cfg Config) lengths() (reqs, warm []measure.Request, offsets []time.Duration, err error) {
	reqs, warm, offsets, _, err = cfg.requests(false)
	return reqs, warm, offsets, err
}

// The seeded streams of a run: independent, so that changing one part of
// the workload does not shift another's random choices. The simulator's
// virtual clock and every transport see the same requests for one seed.
const (
	streamData     = 1 // the measured requests
	streamSchedule = 2 // arrival offsets
	streamWarmup   = 3 // warm-up requests
	streamAlign    = 4 // prompt re-sizing
)

// requests generates the measured and warm-up requests of cfg: the
// dataset's, or cfg.Requests (whose first Warmup entries, cycled, warm up).
// text false leaves prompts empty (lengths only). offsets are a trace's
// send times (traceWorkload), nil for every other dataset.
func (cfg Config) requests(text bool) (reqs, warm []measure.Request, offsets []time.Duration, build func(int) string, err error) {
	if cfg.Requests != nil {
		reqs = cfg.Requests
		for i := range cfg.Warmup {
			warm = append(warm, reqs[i%len(reqs)])
		}
		return reqs, warm, nil, nil, nil
	}
	if cfg.Dataset.Kind == DatasetTrace {
		return cfg.traceWorkload(text)
	}
	gen := cfg.Dataset.Generate
	if !text {
		gen = cfg.Dataset.GenerateLengths
	}
	n := min(cfg.NumRequests, countPool)
	if cfg.Duration > 0 {
		n = durationPool
	}
	if reqs, err = gen(rand.New(rand.NewPCG(cfg.Seed, streamData)), n); err != nil {
		return nil, nil, nil, nil, err
	}
	keyPrefixes(reqs, cfg.Seed, streamData)
	if cfg.Warmup > 0 {
		if warm, err = gen(rand.New(rand.NewPCG(cfg.Seed, streamWarmup)), min(cfg.Warmup, countPool)); err != nil {
			return nil, nil, nil, nil, err
		}
		keyPrefixes(warm, cfg.Seed, streamWarmup)
	}
	return reqs, warm, nil, nil, nil
}

// keyPrefixes makes the prefix groups of one generated batch distinct from
// every other batch's: each batch draws its own prefix texts, so an engine
// that shares KV blocks by prefix (the simulator does by group) must not
// see group 0 of the warm-up as group 0 of the measurement, nor one load
// level's as the next one's.
func keyPrefixes(reqs []measure.Request, seed, stream uint64) {
	for i := range reqs {
		if g := reqs[i].PrefixID; g >= 0 {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%d/%d", seed, stream, g)
			reqs[i].PrefixID = int(h.Sum64() >> 2)
		}
	}
}

// phase is the measured phase of cfg over reqs: count- or duration-bound,
// paced by the load's arrival process; past the pool of a duration-bound
// run the requests cycle with distinct prompts (recycledPrompt). With a
// trace's offsets it sends each request once, at its offset (cut at
// Duration when set).
func (cfg Config) phase(reqs []measure.Request, offsets []time.Duration) measure.Phase {
	p := measure.Phase{MaxConcurrency: cfg.Load.MaxConcurrency, Timeout: timeout(cfg), Progress: cfg.Progress,
		Waiting: cfg.Waiting, Duration: cfg.Duration}
	if offsets != nil {
		p.Count = len(reqs)
		next := 0
		p.Next = func() time.Duration { next++; return offsets[next-1] }
		p.Request = func(i int) measure.Request {
			req := reqs[i]
			req.Index = i
			return req
		}
		return p
	}
	switch {
	case cfg.Duration > 0:
		p.Count = MaxRequests
	case cfg.NumRequests > 0 && cfg.Requests == nil:
		p.Count = cfg.NumRequests
	default:
		p.Count = len(reqs)
	}
	pacer := cfg.Load.Pacer(rand.New(rand.NewPCG(cfg.Seed, streamSchedule)))
	p.Next = pacer.Next
	p.Request = func(i int) measure.Request {
		req := reqs[i%len(reqs)]
		if cycle := i / len(reqs); cycle > 0 {
			req.Prompt = recycledPrompt(req, cycle)
		}
		req.Index = i
		return req
	}
	return p
}

// describe sets what vLLM's result file says of the run: its start (local
// time, as vLLM's datetime.now()), vLLM's name of the API, the model (also
// the tokenizer: prompts are sized by the server's /tokenize) and the
// arrival process.
func describe(sum *measure.Summary, cfg Config, start time.Time) {
	sum.Date = start.Format("20060102-150405")
	sum.Backend = "openai"
	if cfg.Target.Chat() {
		sum.Backend = "openai-chat"
	}
	sum.ModelID, sum.TokenizerID = cfg.Target.Model, cfg.Target.Model
	sum.Burstiness = cfg.Load.Burstiness
	if sum.Burstiness <= 0 {
		sum.Burstiness = 1
	}
}

// runMeta records everything needed to reproduce the run, never secrets
// (header values and the API key are left out; header names are kept).
func runMeta(cfg Config, start time.Time, align string, warm int, records []measure.Record) map[string]any {
	host, _ := os.Hostname()
	var hdrs []string
	for k := range cfg.Target.Headers {
		hdrs = append(hdrs, k)
	}
	estimated := 0
	for i := range records {
		if records[i].TokensEstimated && !records[i].Warmup {
			estimated++
		}
	}
	load := cfg.Load
	if load.Unlimited() {
		load.Rate = 0 // inf, written as measure.Load documents it: JSON has no infinity
	}
	ep := cfg.Target.Endpoint
	if ep == "" {
		ep = openai.EndpointCompletions
	}
	m := map[string]any{
		"base_url":         cfg.Target.RedactedURL(),
		"endpoint":         ep,
		"model":            cfg.Target.Model,
		"dataset":          cfg.Dataset,
		"load":             load,
		"num_requests":     cfg.NumRequests,
		"duration_s":       cfg.Duration.Seconds(),
		"warmup":           warm,
		"seed":             cfg.Seed,
		"timeout_s":        timeout(cfg).Seconds(),
		"start_time":       start.UTC().Format(time.RFC3339Nano),
		"host":             host,
		"tokenize":         align,
		"ignore_eos":       !cfg.KeepEOS,
		"temperature":      cfg.Sampling.Temperature,
		"tokens_estimated": estimated,
		"auth":             cfg.Target.APIKey != "",
	}
	if len(hdrs) > 0 {
		m["header_names"] = hdrs
	}
	if p := cfg.Sampling.TopP; p != nil {
		m["top_p"] = *p
	}
	if k := cfg.Sampling.TopK; k != nil {
		m["top_k"] = *k
	}
	if cfg.Requests != nil {
		m["dataset"] = "pre-generated requests"
	}
	return m
}

func timeout(cfg Config) time.Duration {
	if cfg.Timeout == 0 {
		return DefaultTimeout
	}
	return cfg.Timeout
}

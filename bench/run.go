package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout is the per-request timeout when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Minute

// durationPool is how many requests a duration-bound run generates; past
// them it cycles, each cycle with distinct prompts (recycledPrompt).
const durationPool = 2048

// recycledPrompt makes the cycle-th reuse of r's prompt differ from the
// original and from every other cycle in its first words after the shared
// prefix, so an engine's prefix cache cannot serve a repeated prompt from
// memory and under-report TTFT. The cycle number is written in mixed radix
// into up to three words, each swapped for another word of the same length:
// that keeps the token count in the simulated engine's tokenizer and, for
// these short common words, in BPE vocabularies.
func recycledPrompt(r Request, cycle int) string {
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
	if err := cfg.Target.Validate(); err != nil {
		return err
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
	if cfg.Duration == 0 && cfg.NumRequests == 0 && cfg.Requests == nil {
		return fmt.Errorf("%w: need a request count or a duration", ErrBadConfig)
	}
	if cfg.Duration > 0 && unlimitedRate(l.Rate) && l.MaxConcurrency == 0 {
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

func unlimitedRate(r float64) bool { return r <= 0 || math.IsInf(r, 1) }

// Run drives cfg's load against its target and returns the measurements.
//
// Arrivals are open loop: the dispatcher sleeps until each intended send time
// and starts the request in its own goroutine, so a slow server never delays
// the schedule; with MaxConcurrency it also waits for a free slot, and that
// wait shows up as queue time (t_send - t_sched), never hidden. Warm-up
// requests run first at the run's concurrency on the same connection pool and
// are marked Warmup. A duration-bound run stops sending at Duration and
// drains requests in flight (each bounded by Timeout). Cancelling ctx aborts
// requests in flight; Run then returns what it has with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	// Independent seeded streams so that changing one part of the workload
	// does not shift another's random choices.
	dataRNG := rand.New(rand.NewPCG(cfg.Seed, 1))
	schedRNG := rand.New(rand.NewPCG(cfg.Seed, 2))
	warmRNG := rand.New(rand.NewPCG(cfg.Seed, 3))
	alignRNG := rand.New(rand.NewPCG(cfg.Seed, 4))

	reqs := cfg.Requests
	if reqs == nil {
		n := cfg.NumRequests
		if cfg.Duration > 0 {
			n = durationPool
		}
		var err error
		if reqs, err = cfg.Dataset.Generate(dataRNG, n); err != nil {
			return nil, err
		}
	}
	var warm []Request
	if cfg.Warmup > 0 {
		if cfg.Requests == nil {
			var err error
			if warm, err = cfg.Dataset.Generate(warmRNG, cfg.Warmup); err != nil {
				return nil, err
			}
		} else {
			for i := range cfg.Warmup {
				warm = append(warm, reqs[i%len(reqs)])
			}
		}
	}

	conc := cfg.Load.MaxConcurrency
	idle := conc
	if idle == 0 {
		idle = 4096
	}
	hc := newHTTPClient(idle)
	defer hc.CloseIdleConnections()
	c := newClient(hc, cfg.Target, !cfg.KeepEOS)

	align := "off"
	if !cfg.NoAlign {
		// Bounded so that a hung server costs little before the run
		// classifies it.
		actx, cancel := context.WithTimeout(ctx, min(timeout, 10*time.Second))
		align = alignPrompts(actx, hc, cfg.Target, reqs, alignRNG)
		if len(warm) > 0 {
			alignPrompts(actx, hc, cfg.Target, warm, alignRNG)
		}
		cancel()
	}

	var records []Record
	if len(warm) > 0 {
		wc := conc
		if wc == 0 {
			wc = len(warm)
		}
		records = append(records, runWarmup(ctx, c, warm, wc, timeout)...)
	}
	if err := ctx.Err(); err != nil {
		return &Result{Records: records}, err
	}

	measured, start := dispatch(ctx, c, cfg, reqs, schedRNG, timeout)
	records = append(records, measured...)

	sum := Summarize(records, cfg.Summary)
	sum.MaxConcurrency = cfg.Load.MaxConcurrency
	if !unlimitedRate(cfg.Load.Rate) {
		sum.RequestRate = cfg.Load.Rate
	}
	sum.Meta = runMeta(cfg, start, align, len(warm), records)
	return &Result{Summary: sum, Records: records, Start: start}, ctx.Err()
}

// runWarmup sends warm in a closed loop with conc workers.
func runWarmup(ctx context.Context, c *client, warm []Request, conc int, timeout time.Duration) []Record {
	out := make([]Record, len(warm))
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(conc, len(warm)) {
		wg.Go(func() {
			for i := range next {
				c.do(ctx, warm[i], start, timeout, &out[i])
				out[i].Warmup = true
				out[i].Index = -1 - i // warm-up indices are negative
			}
		})
	}
	for i := range warm {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out[:countDone(out)]
}

func countDone(rs []Record) int {
	n := len(rs)
	for n > 0 && rs[n-1].End == 0 && rs[n-1].Send == 0 {
		n--
	}
	return n
}

// dispatch runs the measured phase.
func dispatch(ctx context.Context, c *client, cfg Config, reqs []Request, rng *rand.Rand, timeout time.Duration) ([]Record, time.Time) {
	total := len(reqs)
	if cfg.Duration > 0 {
		total = 0
	} else if cfg.NumRequests > 0 && cfg.Requests == nil {
		total = cfg.NumRequests
	}
	var sem chan struct{}
	if cfg.Load.MaxConcurrency > 0 {
		sem = make(chan struct{}, cfg.Load.MaxConcurrency)
	}
	results := make(chan Record, 1024)
	var (
		records []Record
		collect sync.WaitGroup
	)
	collect.Go(func() {
		done := 0
		for r := range results {
			records = append(records, r)
			done++
			if cfg.Progress != nil {
				cfg.Progress(done, total)
			}
		}
	})

	start := time.Now()
	// dctx ends the sending phase; requests in flight keep ctx.
	dctx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, start.Add(cfg.Duration))
		defer cancel()
	}
	p := cfg.Load.pacer(rng)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var inflight sync.WaitGroup
	for i := 0; total == 0 || i < total; i++ {
		sched := p.next()
		if cfg.Duration > 0 && sched >= cfg.Duration {
			break
		}
		req := reqs[i%len(reqs)]
		if cycle := i / len(reqs); cycle > 0 {
			req.Prompt = recycledPrompt(req, cycle)
		}
		req.Index = i
		body, bodyErr := c.body(req) // while waiting, not at send time
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
			rec := Record{Sched: sched}
			c.send(ctx, req, body, bodyErr, start, timeout, &rec)
			if sem != nil {
				<-sem
			}
			results <- rec
		})
	}
	inflight.Wait()
	close(results)
	collect.Wait()
	// Records arrive in completion order; restore send order.
	slices.SortFunc(records, func(a, b Record) int { return cmp.Compare(a.Index, b.Index) })
	return records, start
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

// runMeta records everything needed to reproduce the run, never secrets
// (header values and the API key are left out; header names are kept).
func runMeta(cfg Config, start time.Time, align string, warm int, records []Record) map[string]any {
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
	if unlimitedRate(load.Rate) {
		load.Rate = 0 // inf, written as Load documents it: JSON has no infinity
	}
	ep := cfg.Target.Endpoint
	if ep == "" {
		ep = EndpointCompletions
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
		"tokens_estimated": estimated,
		"auth":             cfg.Target.APIKey != "",
	}
	if len(hdrs) > 0 {
		m["header_names"] = hdrs
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

package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// exitGrace bounds the wait for an engine's exit to be reported after a
// level with failed requests.
const exitGrace = time.Second

// stoppedGrace bounds the wait for an engine's exit to be reported after
// the benchmark stopped because the engine refused every connection (a
// batch scheduler reports a job's end at its next poll).
const stoppedGrace = 5 * time.Second

// BenchFunc runs one load level; bench.Run in production.
type BenchFunc func(ctx context.Context, cfg bench.Config) (*bench.Result, error)

// Plan is everything one trial needs.
type Plan struct {
	Launcher     launcher.Launcher
	Spec         launcher.Spec // what to launch; Spec.Model is also the model name sent
	ReadyTimeout time.Duration // launch to healthy; default launcher.DefaultReadyTimeout
	StopTimeout  time.Duration // for tearing down; default launcher.DefaultStopTimeout

	Dataset          bench.DatasetSpec
	Levels           []measure.Load // measured in order
	Capacity         *Capacity      // instead of Levels: search the highest load meeting the SLOs
	RequestsPerLevel int
	Warmup           int           // warm-up requests before each level, excluded
	Timeout          time.Duration // per request, in the engine's time
	Goodput          measure.SLO   // per-request limits for goodput
	Seed             uint64        // level i's workload is seeded Seed+i
	Bootstrap        int           // bootstrap resamples of each level's CIs; 0 = measure's default
	// KeepChunks keeps each request's chunk times in the level's records
	// (bench.Config.KeepChunks); by default they are folded into the
	// summary as requests end, as the store keeps none.
	KeepChunks bool
	// SummariesOnly drops each level's records once it is summarized (and
	// a rate probe checked for a growing queue): a forecast needs no more,
	// and holds one level's records at a time instead of the trial's.
	SummariesOnly bool
	// LatenciesOnly says each level is read for its requests' TTFT, TPOT,
	// E2EL and counts alone (bench.Config.LatenciesOnly).
	LatenciesOnly bool

	// GPUs, when set, samples the trial's GPUs (Spec.GPUs) through NVML
	// during each level's measured phase; nil = no telemetry.
	GPUs        gpu.Reader
	GPUInterval time.Duration // default gpu.DefaultInterval
	// ScrapeMetrics reads the engine's /metrics during each level
	// (bench.Config.ScrapeMetrics); the virtual launcher's engine reports
	// its metrics whatever this says.
	ScrapeMetrics bool

	// Quality, when set, asks the engine the quality gate's tasks after
	// its levels (endpoint is its base URL); a verdict that is scored and
	// fails ends the trial as failed/quality_fail, its levels kept.
	Quality func(ctx context.Context, endpoint string) measure.Quality

	Bench    BenchFunc                           // default bench.Run
	Progress func(level string, done, total int) // optional, from one goroutine
	OnLevel  func(level measure.Level)           // optional, after each level
}

// Capacity configures the capacity search: concurrency doubles from 1 while
// Met holds, then bisects between the last level that met it and the first
// that did not. With Rate set, the search is over the Poisson request rate
// instead (SearchRate).
type Capacity struct {
	MaxConcurrency int                        // upper bound of the search
	Met            func(measure.Summary) bool // the SLO test of one level
	Steps          int                        // bisection probes after the doubling; default 3
	Rate           *RateSearch                // search the request rate, not the concurrency
	// Bounds are Met's latency bounds, under an SLO that allows no
	// failed request (nil when it allows some): a probe may end as soon
	// as it misses one (bench.Config.Bounds), its level then kept with
	// the requests answered by then. The search takes the same path;
	// only a missed level's figures are cut short, and never those that
	// may have to say why no load met the SLO: before a probe has met
	// it, the search's lowest rate (RateSearch.Min) and every
	// concurrency go to their end.
	Bounds []measure.Bound
}

// RateSearch bounds a capacity search over the request rate (requests/s):
// it starts at Start, doubles or halves until one rate meets the SLOs and
// another does not (within [Min, Max]), then bisects geometrically until
// the two are within Precision of each other (0.05 = 5%).
type RateSearch struct {
	Start, Min, Max float64
	Precision       float64
	Burstiness      float64 // arrivals' gamma shape; 0 or 1 = Poisson
	// MinSpan makes every probe send for at least this long (engine time):
	// a probe sends max(RequestsPerLevel, rate x MinSpan) requests, so that
	// a rate a little above the capacity has the time to build the queue
	// that shows it (a fixed count at a high rate is a burst, which any
	// engine absorbs). 0 = RequestsPerLevel always. On a conversation of
	// synthetic sessions the rate is the sessions' arrival rate and a
	// probe starts max(sessions, rate x MinSpan) of them, so that as many
	// are in flight as the rate keeps in flight (a fixed number of
	// sessions at a high rate all run at once, whatever the rate).
	MinSpan time.Duration
	// MaxRequests bounds the requests of one probe that MinSpan asks for;
	// 0 = bench.MaxRequests.
	MaxRequests int
}

// Sustained reports whether a rate probe's queue held steady: the median
// TTFT of its last quarter of requests (in send order) is within twice
// that of its second quarter plus half a second. A rate above the capacity
// grows the queue for as long as requests arrive, which this catches even
// where the SLOs bound no queueing delay (a TPOT-only SLO).
func Sustained(recs []measure.Record) bool {
	var ok []measure.Record
	for _, r := range recs {
		if !r.Warmup && r.Error == measure.ErrNone {
			ok = append(ok, r)
		}
	}
	if len(ok) < 8 {
		return true
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].Sched < ok[j].Sched })
	quarter := len(ok) / 4
	med := func(rs []measure.Record) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = (r.First - r.Send).Seconds()
		}
		return measure.Median(v)
	}
	second, last := med(ok[quarter:2*quarter]), med(ok[len(ok)-quarter:])
	return last <= 2*second+0.5
}

// Result is the outcome of a trial.
type Result struct {
	Status  measure.Status
	Failure engine.Failure // set when Status is StatusFailed
	Message string         // one line saying why it failed (the engine's own message when known)
	LogTail string         // the engine's output tail, for failed trials
	Levels  []measure.Level
	GPU     []gpu.Sample     // telemetry of the trial's GPUs during the levels' measured phases
	Quality *measure.Quality // the quality gate's verdict, when Plan.Quality ran
	Started time.Time
	Ready   time.Duration // launch to healthy, the queue included
	// Pending is how long a batch scheduler kept the engine's job waiting
	// before it started (nil for launchers without a queue); Launch is from
	// the engine's start to healthy (nil when it never was).
	Pending, Launch *time.Duration
	Finished        time.Time
}

// Failed builds the result of a trial that failed with class and message.
func Failed(class engine.Failure, message string) Result {
	return Result{Status: measure.StatusFailed, Failure: class, Message: message, Started: time.Now(), Finished: time.Now()}
}

// transporter is implemented by instances that are not reached over HTTP
// (the simulated engine on a virtual clock).
type transporter interface {
	Transport() measure.Transport
}

// queued is implemented by instances a batch scheduler queues (a Slurm
// job): pending is how long the job waited before it started (so far,
// while it still waits), started is when it started (zero while it
// waits), reason is the scheduler's reason for the wait.
type queued interface {
	Queue() (pending time.Duration, started time.Time, reason string)
}

// Run launches the engine, waits until it is healthy, measures every load
// level (or searches the capacity), tears the engine down and classifies
// any failure. It returns StatusInterrupted when ctx ends first.
func Run(ctx context.Context, p Plan) Result {
	start := time.Now()
	r := newRunner(p)
	res := r.run(ctx)
	res.Started, res.Finished = start, time.Now()
	return res
}

// runner is one trial in progress.
type runner struct {
	p    Plan
	res  Result
	inst launcher.Instance
	exit launcher.Exiter // nil when the instance cannot report an exit
	// bounds are the bounds the level being measured may end at
	// (Capacity.Bounds).
	bounds []measure.Bound
}

func newRunner(p Plan) *runner {
	if p.Bench == nil {
		p.Bench = bench.Run
	}
	if p.ReadyTimeout <= 0 {
		p.ReadyTimeout = launcher.DefaultReadyTimeout
	}
	if p.StopTimeout <= 0 {
		p.StopTimeout = launcher.DefaultStopTimeout
	}
	return &runner{p: p, res: Result{Started: time.Now()}}
}

func (r *runner) run(ctx context.Context) (out Result) {
	if stop := r.start(ctx); stop != nil {
		return *stop
	}
	// Tear down with a context of its own: the trial's may be cancelled.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.StopTimeout+5*time.Second)
		defer cancel()
		_ = r.inst.Stop(sctx)
	}()
	if stop := r.ready(ctx); stop != nil {
		return *stop
	}
	// A crash under load cancels the measurement at once.
	mctx, stopWatch := r.watch(ctx)
	defer stopWatch()
	if r.p.Capacity != nil {
		return r.checkQuality(ctx, mctx, r.capacity(ctx, mctx))
	}
	for i, load := range r.p.Levels {
		lv, stop := r.level(ctx, mctx, i, load)
		if stop != nil {
			return *stop
		}
		r.res.Levels = append(r.res.Levels, r.kept(lv))
	}
	return r.checkQuality(ctx, mctx, r.ok())
}

// checkQuality runs the quality gate on an engine that measured its levels
// well: its verdict goes with the result, and a scored failure turns the
// trial into failed/quality_fail with both scores in the message.
func (r *runner) checkQuality(ctx, mctx context.Context, res Result) Result {
	if r.p.Quality == nil || res.Status != measure.StatusOK {
		return res
	}
	q := r.p.Quality(mctx, r.inst.Endpoint())
	switch {
	case ctx.Err() != nil:
		return *r.interrupted()
	case r.exit != nil && isClosed(r.exit.Exited()):
		// Its answers failed because it died: a crash, not bad answers.
		return *r.crashed()
	}
	r.res.Quality = &q
	res.Quality = &q
	if q.Scored && !q.Pass {
		return *r.fail(engine.FailQuality, q.String(), "")
	}
	return res
}

// ok ends a trial that measured every level: ok, unless no request of any
// level succeeded (a server that answers 500, a key it refuses), which is
// a failure with the dominant request failure and the server's words.
func (r *runner) ok() Result {
	var all measure.Summary
	all.Errors = map[string]int{}
	for _, lv := range r.res.Levels {
		if lv.Summary.Completed > 0 {
			r.res.Status = measure.StatusOK
			return r.res
		}
		all.Failed += lv.Summary.Failed
		for c, n := range lv.Summary.Errors {
			all.Errors[c] += n
		}
		for c, m := range lv.Summary.ErrorMessages {
			if all.ErrorMessages == nil {
				all.ErrorMessages = map[string]string{}
			}
			if _, ok := all.ErrorMessages[c]; !ok {
				all.ErrorMessages[c] = m
			}
		}
	}
	if len(r.res.Levels) == 0 {
		r.res.Status = measure.StatusOK
		return r.res
	}
	class, n, msg := all.DominantError()
	text := fmt.Sprintf("no request succeeded: %d of %d failed %s", n, all.Failed, class)
	if msg != "" {
		text += ": " + msg
	}
	return *r.fail(engine.FailRequests, text, r.inst.Logs())
}

// fail ends the trial as failed with class.
func (r *runner) fail(class engine.Failure, msg, logs string) *Result {
	res := r.res
	// The engine's words may hold its own flags (vLLM logs its non-default
	// args, an API key among them): redacted before anyone prints them.
	res.Status, res.Failure, res.Message, res.LogTail = measure.StatusFailed, class, redact.Text(oneLine(msg)), redact.Text(logs)
	return &res
}

func (r *runner) interrupted() *Result {
	res := r.res
	res.Status = measure.StatusInterrupted
	return &res
}

// start launches the engine.
func (r *runner) start(ctx context.Context) *Result {
	inst, err := r.p.Launcher.Launch(ctx, r.p.Spec)
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted()
		}
		return r.fail(engine.FailLaunchError, err.Error(), "")
	}
	r.inst = inst
	r.exit, _ = inst.(launcher.Exiter)
	return nil
}

// ready waits for the engine to be healthy and classifies why it was not.
func (r *runner) ready(ctx context.Context) *Result {
	rctx, cancel := context.WithTimeout(ctx, r.p.ReadyTimeout)
	err := r.inst.Ready(rctx)
	cancel()
	now := time.Now()
	r.res.Ready = now.Sub(r.res.Started)
	launch := r.res.Ready
	q, isQueued := r.inst.(queued)
	var waiting string // the scheduler's reason, while the job has not started
	if isQueued {
		pending, started, reason := q.Queue()
		r.res.Pending = &pending
		if started.IsZero() {
			waiting = reason
			launch -= pending
		} else {
			launch = now.Sub(started)
		}
	}
	if err == nil {
		r.res.Launch = &launch
		return nil
	}
	logs := r.inst.Logs()
	var exit *launcher.ExitError
	switch {
	case ctx.Err() != nil:
		return r.interrupted()
	case errors.As(err, &exit):
		// One part of several (a disaggregated trial's prefill or decode
		// engine): classified by its own output, and named.
		var part *launcher.PartError
		if errors.As(err, &part) {
			class, msg := engine.Classify(exit.Exit, false, part.Logs)
			return r.fail(class, part.Part+": "+msg, logs)
		}
		class, msg := engine.Classify(exit.Exit, false, logs)
		return r.fail(class, msg, logs)
	case errors.Is(err, context.DeadlineExceeded) && isQueued && waiting != "":
		return r.fail(engine.FailNotReady, fmt.Sprintf("the job was still queued after the ready timeout (%s): %s", r.p.ReadyTimeout, waiting), logs)
	case errors.Is(err, context.DeadlineExceeded):
		return r.fail(engine.FailNotReady, fmt.Sprintf("no healthy /health within %s", r.p.ReadyTimeout), logs)
	}
	return r.fail(engine.FailLaunchError, err.Error(), logs)
}

// watch returns the measurement's context, cancelled when the engine exits,
// and the function that ends the watch.
func (r *runner) watch(ctx context.Context) (context.Context, func()) {
	mctx, mcancel := context.WithCancel(ctx)
	if r.exit == nil {
		return mctx, mcancel
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-r.exit.Exited():
			mcancel()
		case <-done:
		}
	}()
	return mctx, func() { close(done); <-watched; mcancel() }
}

// exitedWithin reports whether the engine exits within d.
func (r *runner) exitedWithin(d time.Duration) bool {
	if r.exit == nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.exit.Exited():
		return true
	case <-t.C:
		return false
	}
}

// crashed classifies the engine's exit during the measurement.
func (r *runner) crashed() *Result {
	logs := r.inst.Logs()
	if pe, ok := r.inst.(launcher.PartExiter); ok {
		if name, own := pe.ExitedPart(); name != "" {
			class, msg := engine.Classify(r.exit.Exit(), true, own)
			return r.fail(class, name+": "+msg, logs)
		}
	}
	class, msg := engine.Classify(r.exit.Exit(), true, logs)
	return r.fail(class, msg, logs)
}

// BenchConfig is the benchmark configuration of load level i of p at load,
// in the engine's time: the workload seeded Seed+i, the plan's request
// counts, timeout and goodput limits; no target URL, transport or progress.
// A calibration re-runs a stored trial's levels with it.
func (p Plan) BenchConfig(i int, load measure.Load) bench.Config {
	n := p.RequestsPerLevel
	if c := p.Capacity; c != nil && c.Rate != nil && c.Rate.MinSpan > 0 && !load.Unlimited() {
		most := bench.MaxRequests
		if c.Rate.MaxRequests > 0 {
			most = min(most, c.Rate.MaxRequests)
		}
		// In float: rate x span may be beyond any int.
		n = max(n, int(math.Min(float64(most), math.Ceil(load.Rate*c.Rate.MinSpan.Seconds()))))
	}
	ds := p.Dataset
	if turns := ds.MostTurns(); turns > 0 && ds.Kind == bench.DatasetConversation && p.Capacity != nil && p.Capacity.Rate != nil &&
		p.Capacity.Rate.MinSpan > 0 && !load.Unlimited() {
		// A session is up to turns requests: the sessions' turns stay
		// within the requests a probe may send.
		most := bench.MaxRequests
		if m := p.Capacity.Rate.MaxRequests; m > 0 {
			most = min(most, m)
		}
		span := math.Ceil(load.Rate * p.Capacity.Rate.MinSpan.Seconds())
		ds.Sessions = max(ds.Sessions, int(math.Min(float64(most/turns), span)))
	}
	return bench.Config{
		Target:      openai.Target{Model: p.Spec.Model},
		Dataset:     ds,
		Load:        load,
		NumRequests: n,
		Warmup:      p.Warmup,
		Timeout:     p.Timeout,
		Seed:        p.Seed + uint64(i),
		Summary:     measure.SummaryOptions{Goodput: p.Goodput, Seed: p.Seed, Bootstrap: p.Bootstrap},
		KeepChunks:  p.KeepChunks,
	}
}

// SeedIndex is the workload seed index (BenchConfig's i) of the i-th level
// a trial of p measured: its position, except in a search over the rate,
// whose probes all run on the plan's seed.
func (p Plan) SeedIndex(i int) int {
	if p.Capacity != nil && p.Capacity.Rate != nil {
		return 0
	}
	return i
}

// measure runs load level i, in the engine's time: the benchmark sends
// on the real clock and summarises in the engine's (bench.Config.TimeScale).
func (r *runner) measure(mctx context.Context, i int, load measure.Load) (measure.Level, error) {
	p := r.p
	label, _, _ := load.Label()
	cfg := p.BenchConfig(i, load)
	cfg.Target.BaseURL = r.inst.Endpoint()
	cfg.TimeScale = p.Launcher.Capabilities().TimeScale // 0 (real time) reads as 1
	cfg.ScrapeMetrics = p.ScrapeMetrics
	cfg.Bounds = r.bounds
	cfg.LatenciesOnly = p.LatenciesOnly
	if p.GPUs != nil && len(p.Spec.GPUs) > 0 {
		cfg.GPU = &bench.GPUWatch{Reader: p.GPUs, GPUs: p.Spec.GPUs, Interval: p.GPUInterval}
	}
	if t, ok := r.inst.(transporter); ok {
		cfg.Transport = t.Transport()
	}
	if p.Progress != nil {
		cfg.Progress = func(done, total int) { p.Progress(label, done, total) }
	}
	res, err := p.Bench(mctx, cfg)
	if res != nil {
		r.res.GPU = append(r.res.GPU, res.GPU...)
	}
	if err != nil {
		return measure.Level{}, err
	}
	lv := measure.NewLevel(load, res.Summary, res.Records)
	if p.OnLevel != nil {
		p.OnLevel(lv)
	}
	return lv, nil
}

// level measures load level i and says whether the trial must stop there:
// the study was interrupted, the engine exited, or the benchmark failed.
func (r *runner) level(ctx, mctx context.Context, i int, load measure.Load) (measure.Level, *Result) {
	lv, err := r.measure(mctx, i, load)
	switch {
	case ctx.Err() != nil:
		return lv, r.interrupted()
	case r.exit != nil && isClosed(r.exit.Exited()):
		return lv, r.crashed()
	case errors.Is(err, bench.ErrStopped):
		// The engine stopped accepting connections: it died, or its node
		// did. Its exit (a process reaped, a container's or a job's state)
		// may take a moment to be reported: give it that moment.
		if r.exitedWithin(stoppedGrace) {
			return lv, r.crashed()
		}
		return lv, r.fail(engine.FailCrash, "the engine stopped accepting connections during the measurement: "+err.Error(), r.inst.Logs())
	case err != nil:
		return lv, r.fail(engine.FailBenchError, err.Error(), r.inst.Logs())
	}
	if _, err := json.Marshal(lv.Summary); err != nil {
		// A figure overflowed (an engine's clock scaled past reason): the
		// trial fails here, saying so, rather than in the store's write.
		return lv, r.fail(engine.FailBenchError, fmt.Sprintf("the measurement gave a figure that is not a finite number (%v)", err), r.inst.Logs())
	}
	// Failed requests may be the engine dying: its exit is observed a
	// moment after the connections break (the process reaped, the
	// container's wait answered), so give it that moment.
	if lv.Summary.Failed > 0 && r.exitedWithin(exitGrace) {
		return lv, r.crashed()
	}
	return lv, nil
}

// kept is lv as the trial's result keeps it (Plan.SummariesOnly).
func (r *runner) kept(lv measure.Level) measure.Level {
	if r.p.SummariesOnly {
		lv.Records = nil
	}
	return lv
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// capacity runs the capacity search over concurrency levels or request
// rates. Concurrency probe i runs on workload seed Seed+i; every rate probe
// runs on Seed, so that probes differ by their rate alone (the same
// requests, the same arrival pattern stretched), which keeps the SLO test
// monotone in the rate.
func (r *runner) capacity(ctx, mctx context.Context) Result {
	c := r.p.Capacity
	var stopped *Result
	errStop := errors.New("stop")
	i := 0
	anyMet := false
	defer func() { r.bounds = nil }()
	probe := func(load measure.Load) (bool, error) {
		seed := r.p.SeedIndex(i)
		i++
		r.bounds = nil
		if anyMet || c.Rate != nil && load.Rate > c.Rate.floor() {
			// Its figures are read only if no probe meets the SLO, and
			// then only the lowest rate's (the search's last).
			r.bounds = c.Bounds
		}
		lv, stop := r.level(ctx, mctx, seed, load)
		if stop != nil {
			stopped = stop
			return false, errStop
		}
		if c.Rate != nil && !Sustained(lv.Records) {
			lv.Summary.Unsustained = true
		}
		r.res.Levels = append(r.res.Levels, r.kept(lv))
		met := !lv.Summary.Unsustained && c.Met(lv.Summary)
		anyMet = anyMet || met
		return met, nil
	}
	var err error
	if rs := c.Rate; rs != nil {
		_, err = SearchRate(*rs, func(rate float64) (bool, error) {
			return probe(measure.Load{Rate: rate, Burstiness: rs.Burstiness})
		})
	} else {
		_, err = SearchCapacity(c.MaxConcurrency, c.Steps, func(n int) (bool, error) {
			return probe(measure.Load{MaxConcurrency: n})
		})
	}
	if err != nil && stopped != nil {
		return *stopped
	}
	return r.ok()
}

// SearchCapacity finds the highest concurrency in [1, maxConcurrency] at
// which met holds: concurrency doubles from 1 while probe says the SLOs are
// met, then steps bisections (default 3) narrow the gap between the last
// level that met them and the first that did not. It returns 0 when even
// concurrency 1 misses. An error from probe ends the search.
func SearchCapacity(maxConcurrency, steps int, probe func(concurrency int) (met bool, err error)) (int, error) {
	maxC := max(maxConcurrency, 1)
	if steps <= 0 {
		steps = 3
	}
	good, bad := 0, 0
	for n := 1; ; n *= 2 {
		n = min(n, maxC)
		ok, err := probe(n)
		if err != nil {
			return good, err
		}
		if !ok {
			bad = n
			break
		}
		good = n
		if n == maxC {
			break
		}
	}
	s := 0
	return bisect(good, bad, func(good, bad int) bool {
		s++
		return s > steps || bad <= 0 || bad-good <= 1
	}, func(good, bad int) int { return (good + bad) / 2 }, probe)
}

// bisect narrows a bracket around a capacity: good met the SLOs and bad
// did not. It probes mid(good, bad) and keeps the probe as whichever end
// it turned out to be, until closed(good, bad); an error from probe ends
// it with the best good so far. SearchCapacity halves concurrency counts,
// SearchRate rates geometrically.
func bisect[T int | float64](good, bad T, closed func(good, bad T) bool, mid func(good, bad T) T, probe func(T) (bool, error)) (T, error) {
	for !closed(good, bad) {
		m := mid(good, bad)
		ok, err := probe(m)
		if err != nil {
			return good, err
		}
		if ok {
			good = m
		} else {
			bad = m
		}
	}
	return good, nil
}

// SearchRate finds the highest request rate at which met holds, to within
// rs.Precision: from rs.Start it doubles while probe says the SLOs are met
// (or halves while they are not) until a rate that met them and one that
// did not bracket the capacity, then bisects the bracket geometrically. It
// is SearchCapacity's doubling-then-bisecting on a continuous, scale-free
// axis. It returns 0 when even rs.Min misses, and rs.Max when rs.Max
// meets them. An error from probe ends the search.
func SearchRate(rs RateSearch, probe func(rate float64) (met bool, err error)) (float64, error) {
	lo, hi := rs.floor(), rs.Max
	if !(hi > lo) {
		hi = lo * 1e6
	}
	prec := rs.Precision
	if !(prec > 0) {
		prec = 0.05
	}
	// A finer bracket only adds probes, and one finer than the spacing of
	// floats would never close.
	prec = max(prec, 1e-3)
	r := min(max(rs.Start, lo), hi)
	if !(r > 0) {
		r = lo
	}
	good, bad := 0.0, 0.0
	ok, err := probe(r)
	if err != nil {
		return 0, err
	}
	if ok {
		for good = r; bad == 0; {
			if good >= hi {
				return good, nil
			}
			next := min(good*2, hi)
			if ok, err = probe(next); err != nil {
				return good, err
			}
			if ok {
				good = next
			} else {
				bad = next
			}
		}
	} else {
		for bad = r; good == 0; {
			if bad <= lo {
				return 0, nil
			}
			next := max(bad/2, lo)
			if ok, err = probe(next); err != nil {
				return 0, err
			}
			if ok {
				good = next
			} else {
				bad = next
			}
		}
	}
	return bisect(good, bad, func(good, bad float64) bool { return bad/good <= 1+prec }, func(good, bad float64) float64 { return math.Sqrt(good * bad) }, probe)
}

// floor is the lowest rate SearchRate probes: Min, or 1e-3 without one.
func (rs RateSearch) floor() float64 {
	if !(rs.Min > 0) {
		return 1e-3
	}
	return rs.Min
}

// oneLine flattens a message for one-line display, bounded in length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:497] + "..."
	}
	return s
}

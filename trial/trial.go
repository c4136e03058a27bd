package trial

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/gpu"
	"github.com/servetune/servetune/launcher"
)

// Status is how a trial ended. The values match the store's trial statuses.
type Status string

// Trial statuses.
const (
	StatusOK          Status = "ok"
	StatusFailed      Status = "failed"
	StatusInterrupted Status = "interrupted" // the study was stopped mid-trial
)

// Failure classes of a failed trial; the values match the store's.
const (
	FailOOM         = "oom"          // the engine reported running out of memory at start-up
	FailCrash       = "crash"        // the engine exited during the measurement
	FailNotReady    = "not_ready"    // no healthy /health within the ready timeout
	FailLaunchError = "launch_error" // could not start, or exited before ready for another reason
	FailBenchError  = "bench_error"  // the benchmark itself failed
	FailInfeasible  = "infeasible"   // rejected before launch by a constraint
)

// exitGrace bounds the wait for an engine's exit to be reported after a
// level with failed requests.
const exitGrace = time.Second

// BenchFunc runs one load level; bench.Run in production.
type BenchFunc func(ctx context.Context, cfg bench.Config) (*bench.Result, error)

// Plan is everything one trial needs.
type Plan struct {
	Launcher     launcher.Launcher
	Spec         launcher.Spec // what to launch; Spec.Model is also the model name sent
	ReadyTimeout time.Duration // launch to /health 200; default 20m
	StopTimeout  time.Duration // for tearing down; default launcher.DefaultStopTimeout

	Dataset          bench.DatasetSpec
	Levels           []bench.Load // measured in order
	Capacity         *Capacity    // instead of Levels: search the highest load meeting the SLOs
	RequestsPerLevel int
	Warmup           int           // warm-up requests before each level, excluded
	Timeout          time.Duration // per request, in the engine's time
	Goodput          bench.SLO     // per-request limits for goodput
	Seed             uint64
	// TimeScale is how many times faster than real time the engine runs
	// (the simulated engine's --time-scale); 0 or 1 = real time. Loads,
	// limits and every measurement are converted so results are in the
	// engine's time.
	TimeScale float64

	// GPUs, when set, samples the trial's GPUs (Spec.GPUs) through NVML
	// while the engine is measured; nil = no telemetry.
	GPUs        gpu.Reader
	GPUInterval time.Duration // default gpu.DefaultInterval

	Bench    BenchFunc                                   // default bench.Run
	Progress func(level string, done, total int)         // optional, from one goroutine
	OnLevel  func(level Level)                           // optional, after each level
	IsOOM    func(logs string) (message string, ok bool) // default IsOOM
}

// Capacity configures the capacity search: concurrency doubles from 1 while
// Met holds, then bisects between the last level that met it and the first
// that did not.
type Capacity struct {
	MaxConcurrency int                      // upper bound of the search
	Met            func(bench.Summary) bool // the SLO test of one level
	Steps          int                      // bisection probes after the doubling; default 3
}

// Level is one measured load level.
type Level struct {
	Label   string  // "concurrency=8" or "rate=4"
	Kind    string  // "concurrency" or "rate"
	Value   float64 // the level's value
	Load    bench.Load
	Summary bench.Summary
	Records []bench.Record
}

// Result is the outcome of a trial.
type Result struct {
	Status   Status
	Failure  string // a Fail* class when Status is StatusFailed
	Message  string // one line saying why it failed (the engine's own message when known)
	LogTail  string // the engine's output tail, for failed trials
	Levels   []Level
	GPU      []gpu.Sample // telemetry of the trial's GPUs during the measurement
	Started  time.Time
	Ready    time.Duration // launch to healthy
	Finished time.Time
}

// Failed builds the result of a trial that failed with class and message.
func Failed(class, message string) Result {
	return Result{Status: StatusFailed, Failure: class, Message: message, Started: time.Now(), Finished: time.Now()}
}

// LevelLabel names a load level: "concurrency=N", "rate=R" or both.
func LevelLabel(l bench.Load) (label, kind string, value float64) {
	switch {
	case l.Rate > 0 && l.MaxConcurrency > 0:
		return "rate=" + strconv.FormatFloat(l.Rate, 'g', -1, 64) + ",concurrency=" + strconv.Itoa(l.MaxConcurrency), "rate", l.Rate
	case l.Rate > 0:
		return "rate=" + strconv.FormatFloat(l.Rate, 'g', -1, 64), "rate", l.Rate
	}
	return "concurrency=" + strconv.Itoa(l.MaxConcurrency), "concurrency", float64(l.MaxConcurrency)
}

// Run launches the engine, waits until it is healthy, measures every load
// level (or searches the capacity), tears the engine down and classifies
// any failure. It returns StatusInterrupted when ctx ends first.
func Run(ctx context.Context, p Plan) Result {
	start := time.Now()
	res := run(ctx, p)
	res.Started, res.Finished = start, time.Now()
	return res
}

func run(ctx context.Context, p Plan) (out Result) {
	res := Result{Started: time.Now()}
	k := p.TimeScale
	if k <= 0 {
		k = 1
	}
	if p.Bench == nil {
		p.Bench = bench.Run
	}
	if p.IsOOM == nil {
		p.IsOOM = IsOOM
	}
	if p.ReadyTimeout <= 0 {
		p.ReadyTimeout = 20 * time.Minute
	}
	if p.StopTimeout <= 0 {
		p.StopTimeout = launcher.DefaultStopTimeout
	}
	fail := func(class, msg, logs string) Result {
		res.Status, res.Failure, res.Message, res.LogTail = StatusFailed, class, oneLine(msg), logs
		return res
	}

	inst, err := p.Launcher.Launch(ctx, p.Spec)
	if err != nil {
		if ctx.Err() != nil {
			res.Status = StatusInterrupted
			return res
		}
		return fail(FailLaunchError, err.Error(), "")
	}
	// Tear down with a context of its own: the trial's may be cancelled.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.StopTimeout+5*time.Second)
		defer cancel()
		_ = inst.Stop(sctx)
	}()

	rctx, cancel := context.WithTimeout(ctx, p.ReadyTimeout)
	err = inst.Ready(rctx)
	cancel()
	res.Ready = time.Since(res.Started)
	if err != nil {
		logs := inst.Logs()
		switch {
		case ctx.Err() != nil:
			res.Status = StatusInterrupted
			return res
		case errors.Is(err, launcher.ErrExited):
			if msg, ok := p.IsOOM(logs); ok {
				return fail(FailOOM, msg, logs)
			}
			return fail(FailLaunchError, "engine exited before it was ready: "+lastLine(logs), logs)
		case errors.Is(err, context.DeadlineExceeded):
			return fail(FailNotReady, fmt.Sprintf("no healthy /health within %s", p.ReadyTimeout), logs)
		}
		return fail(FailLaunchError, err.Error(), logs)
	}

	// A crash under load cancels the measurement at once.
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	exited := func() bool { return false }
	exitedWithin := func(time.Duration) bool { return false }
	if ex, ok := inst.(launcher.Exiter); ok {
		exitedWithin = func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ex.Exited():
				return true
			case <-t.C:
				return false
			}
		}
		done := make(chan struct{})
		watch := make(chan struct{})
		go func() {
			defer close(watch)
			select {
			case <-ex.Exited():
				mcancel()
			case <-done:
			}
		}()
		defer func() { close(done); <-watch }()
		exited = func() bool {
			select {
			case <-ex.Exited():
				return true
			default:
				return false
			}
		}
	}
	crashed := func() Result {
		logs := inst.Logs()
		msg := "engine exited during the measurement"
		if oom, ok := p.IsOOM(logs); ok {
			msg += ": " + oom
		} else if l := lastLine(logs); l != "" {
			msg += ": " + l
		}
		return fail(FailCrash, msg, logs)
	}

	measure := func(i int, load bench.Load) (Level, error) {
		label, kind, value := LevelLabel(load)
		sent := load
		sent.Rate *= k
		goodput := bench.SLO{TTFTms: p.Goodput.TTFTms / k, TPOTms: p.Goodput.TPOTms / k, E2ELms: p.Goodput.E2ELms / k}
		cfg := bench.Config{
			Target:      bench.Target{BaseURL: inst.Endpoint(), Model: p.Spec.Model},
			Dataset:     p.Dataset,
			Load:        sent,
			NumRequests: p.RequestsPerLevel,
			Warmup:      p.Warmup,
			Timeout:     time.Duration(float64(p.Timeout) / k), // engine time to real time
			Seed:        p.Seed + uint64(i),
			Summary:     bench.SummaryOptions{Goodput: goodput, Seed: p.Seed},
		}
		if p.Progress != nil {
			cfg.Progress = func(done, total int) { p.Progress(label, done, total) }
		}
		r, err := p.Bench(mctx, cfg)
		if err != nil {
			return Level{}, err
		}
		if k != 1 {
			ScaleSummary(&r.Summary, k)
			ScaleRecords(r.Records, k)
		}
		lv := Level{Label: label, Kind: kind, Value: value, Load: load, Summary: r.Summary, Records: r.Records}
		if p.OnLevel != nil {
			p.OnLevel(lv)
		}
		return lv, nil
	}
	run := func(i int, load bench.Load) (Level, *Result) {
		lv, err := measure(i, load)
		switch {
		case ctx.Err() != nil:
			res.Status = StatusInterrupted
			return lv, &res
		case exited():
			r := crashed()
			return lv, &r
		case err != nil:
			r := fail(FailBenchError, err.Error(), inst.Logs())
			return lv, &r
		}
		// Failed requests may be the engine dying: its exit is observed a
		// moment after the connections break (the process reaped, the
		// container's wait answered), so give it that moment.
		if lv.Summary.Failed > 0 && exitedWithin(exitGrace) {
			r := crashed()
			return lv, &r
		}
		return lv, nil
	}

	if p.GPUs != nil && len(p.Spec.GPUs) > 0 {
		gs := gpu.NewSampler(p.GPUs, p.Spec.GPUs, p.GPUInterval)
		gs.Start(ctx)
		// Stop ends the sampling goroutine before Run returns.
		defer func() { out.GPU = gs.Stop() }()
	}
	if p.Capacity != nil {
		return p.capacity(&res, run)
	}
	for i, load := range p.Levels {
		lv, stop := run(i, load)
		if stop != nil {
			return *stop
		}
		res.Levels = append(res.Levels, lv)
	}
	res.Status = StatusOK
	return res
}

// capacity runs the capacity search with run.
func (p Plan) capacity(res *Result, run func(int, bench.Load) (Level, *Result)) Result {
	c := p.Capacity
	i := 0
	var stopped *Result
	errStop := errors.New("stop")
	_, err := SearchCapacity(c.MaxConcurrency, c.Steps, func(n int) (bool, error) {
		lv, stop := run(i, bench.Load{MaxConcurrency: n})
		i++
		if stop != nil {
			stopped = stop
			return false, errStop
		}
		res.Levels = append(res.Levels, lv)
		return c.Met(lv.Summary), nil
	})
	if err != nil && stopped != nil {
		return *stopped
	}
	res.Status = StatusOK
	return *res
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
	for s := 0; s < steps && bad > 0 && bad-good > 1; s++ {
		mid := (good + bad) / 2
		ok, err := probe(mid)
		if err != nil {
			return good, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}

// oomPatterns are the start-up and runtime out-of-memory messages of vLLM,
// SGLang, PyTorch and the simulated engine (which prints the engines' own).
var oomPatterns = regexp.MustCompile(`(?i)(out of memory|OutOfMemoryError|No available memory for the cache blocks|larger than the available KV cache memory|KV cache is needed|Not enough memory|insufficient (GPU )?memory|does not fit)`)

// IsOOM finds an out-of-memory message in an engine's output and returns
// its line.
func IsOOM(logs string) (string, bool) {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if oomPatterns.MatchString(lines[i]) {
			return strings.TrimSpace(lines[i]), true
		}
	}
	return "", false
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// oneLine flattens a message for one-line display, bounded in length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:497] + "..."
	}
	return s
}

// ScaleSummary converts a summary measured against an engine running k
// times faster than real time into the engine's time: durations and
// latencies grow by k, rates shrink by k.
func ScaleSummary(s *bench.Summary, k float64) {
	s.Duration *= k
	s.RequestThroughput /= k
	s.OutputThroughput /= k
	s.TotalTokenThroughput /= k
	s.PeakOutputThroughput /= k
	s.RequestGoodput /= k
	s.RequestRate /= k
	for _, st := range []*bench.Stats{&s.TTFT, &s.TTFTSched, &s.Queue, &s.TPOT, &s.ITL, &s.ITLPerToken, &s.E2EL} {
		for _, v := range []*float64{&st.Mean, &st.Median, &st.Std, &st.P50, &st.P90, &st.P95, &st.P99, &st.P999,
			&st.MedianCI[0], &st.MedianCI[1], &st.P99CI[0], &st.P99CI[1]} {
			*v *= k
		}
	}
}

// ScaleRecords converts per-request instants into the engine's time.
func ScaleRecords(recs []bench.Record, k float64) {
	sc := func(d *time.Duration) { *d = time.Duration(float64(*d) * k) }
	for i := range recs {
		r := &recs[i]
		sc(&r.Sched)
		sc(&r.Send)
		sc(&r.First)
		sc(&r.Last)
		sc(&r.End)
		for j := range r.Chunks {
			sc(&r.Chunks[j].At)
		}
	}
}

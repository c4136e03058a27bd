package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"gonum.org/v1/gonum/optimize"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/parallel"
)

// Level is one measured load level: the benchmark that was run (its
// workload, seed and load, in the engine's time) and what it measured.
type Level struct {
	Bench    bench.Config
	Measured measure.Summary
}

// Run is one engine measured at one or more load levels in order, as a
// trial measures them: the levels share one engine (its prefix cache and
// clock carry over), so a simulation replays them in the same order.
type Run struct {
	Name   string     // for reports, e.g. "trial 3"
	Config sim.Config // the engine as launched; the fit replaces its constants
	Levels []Level
}

// DefaultMetrics are the metrics a fit compares, by tuner metric name.
var DefaultMetrics = []string{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"}

// Options tune a fit.
type Options struct {
	// Fit names the constants to fit (sim.ConstantNames); nil = those of
	// Candidates that the points tell apart (Identify).
	Fit []string
	// Metrics compared (DefaultMetrics when nil): ttft, tpot, itl or e2el
	// with p50, p90, p95 or p99 or mean.
	Metrics []string
	// MaxEvals bounds the simulations of the whole set (default 600).
	MaxEvals int
	// Workers simulate runs in parallel (default GOMAXPROCS).
	Workers int
	// Progress, when set, is told each evaluation's count and loss.
	Progress func(evals int, loss float64)
}

// Result is a fit: the constants found and how well they reproduce the
// measurements, per metric, before (the start constants) and after.
type Result struct {
	Start     sim.Constants
	Constants sim.Constants
	Fitted    []string // constants the fit moved
	Held      []string // candidates left at their start value, with why
	Errors    []sim.MetricError
	Points    int     // measured levels compared
	Evals     int     // simulations of the whole set
	StartLoss float64 // mean squared log error at the start
	Loss      float64 // and after the fit
}

// ErrNoPoints is returned when no run has a level with a measured metric.
var ErrNoPoints = errors.New("no measured load point to calibrate from")

// maxLogError bounds one residual: a level the simulator saturates while
// the engine did not (or the reverse) counts as a factor of 4, so that one
// point on the wrong side of a knee does not swamp the fit.
var maxLogError = math.Log(4)

// jacobianStep is the log-step of the sensitivity estimate: 10%, larger
// than the simulator's step-level discreteness.
const jacobianStep = 0.1

// Identification thresholds: a constant is fitted when a 10% change moves
// the compared metrics by at least 2% RMS (dlog metric / dlog constant
// >= 0.02) and at least 30% of that effect is not already explained by the
// constants accepted before it.
const (
	minSensitivity = 0.02
	minUnique      = 0.3
)

// Candidates are the constants the runs could inform: memory bandwidth,
// the GEMM efficiency of the quantizations they use, attention, the link
// when any run spans GPUs, and the host and kernel overheads. The API
// server's front end (frontend_overhead_ms) is not among them: it adds
// the same time to every TTFT, which the step overhead and the GEMM rates
// of short prompts also move, so a fit of it competes with theirs; name
// it (Options.Fit, calibrate --fit) to fit it.
func Candidates(runs []Run) []string {
	set := map[string]bool{"hbm_efficiency": true, "attention_efficiency": true,
		"step_overhead_ms": true, "per_seq_overhead_us": true, "kernel_overhead_us": true}
	for _, r := range runs {
		c := r.Config
		switch {
		case c.Quantization == "fp8" && c.GPU.HasFP8():
			set["fp8_gemm_efficiency"] = true
		case c.Quantization == "awq" || c.Quantization == "gptq":
			set["w4a16_gemm_efficiency"] = true
		default:
			set["bf16_gemm_efficiency"] = true
		}
		if c.TP > 1 || c.PP > 1 {
			set["link_efficiency"] = true
		}
	}
	var out []string
	for _, name := range sim.ConstantNames() {
		if set[name] {
			out = append(out, name)
		}
	}
	return out
}

// Metric returns the named metric of a summary (tuner metric names);
// ok is false when it has no value.
func Metric(s measure.Summary, name string) (float64, bool) {
	v, ok := s.Latency(name)
	return v, ok && v > 0
}

// ValidMetric checks a compared metric's name: a latency metric of the
// metric table (measure.Summary.Latency reads it).
func ValidMetric(name string) error {
	if m, ok := measure.LookupMetric(name); !ok || m.Series == "" {
		return fmt.Errorf("metric %q: want %s", name, measure.LatencyMetrics())
	}
	return nil
}

// Simulate replays run's levels on the simulated engine with constants c
// and returns what each level measures.
func Simulate(ctx context.Context, run Run, c sim.Constants) ([]measure.Summary, error) {
	cfg := run.Config
	cfg.Constants = c
	eng, err := sim.NewVirtual(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]measure.Summary, len(run.Levels))
	for i, lv := range run.Levels {
		bc := lv.Bench
		bc.Transport = eng
		bc.Progress = nil
		bc.Summary.Bootstrap = 1 // only the point estimates are compared
		res, err := bench.Run(ctx, bc)
		if err != nil {
			return nil, fmt.Errorf("%s level %d: %w", run.Name, i, err)
		}
		out[i] = res.Summary
	}
	return out, nil
}

// fitter evaluates the residuals of a set of runs under constants.
type fitter struct {
	ctx     context.Context
	runs    []Run
	metrics []string
	workers int
	evals   int
	mu      sync.Mutex
	err     error
}

// point is one compared measurement: run, level and metric.
type point struct {
	run, level int
	metric     string
	measured   float64
}

func (f *fitter) points() []point {
	var pts []point
	for i, r := range f.runs {
		for j, lv := range r.Levels {
			if lv.Measured.Completed == 0 || lv.Measured.Failed > 0 {
				continue
			}
			for _, m := range f.metrics {
				if v, ok := Metric(lv.Measured, m); ok {
					pts = append(pts, point{i, j, m, v})
				}
			}
		}
	}
	return pts
}

// simulate runs every run under c, in parallel, and returns each run's
// level summaries (nil for a run the simulator cannot start).
func (f *fitter) simulate(c sim.Constants) [][]measure.Summary {
	out := make([][]measure.Summary, len(f.runs))
	// Every run is handed out whatever f.ctx says: a cancelled one fails
	// in Simulate, and f.err says so.
	parallel.Each(context.Background(), len(f.runs), f.workers, func(i int) {
		s, err := Simulate(f.ctx, f.runs[i], c)
		if err != nil {
			var se *sim.StartupError
			if !errors.As(err, &se) {
				f.mu.Lock()
				if f.err == nil {
					f.err = err
				}
				f.mu.Unlock()
			}
			return
		}
		out[i] = s
	})
	f.evals++
	return out
}

// residuals are logRatio(simulated, measured) per point, bounded by
// maxLogError; a level the simulator could not run or complete counts as
// maxLogError.
func (f *fitter) residuals(pts []point, c sim.Constants) []float64 {
	r, _ := f.eval(pts, c)
	return r
}

// eval returns the residuals the fit minimises and, for the errors a
// person reads, the plain log(simulated/measured) of each point (with the
// front end in), both bounded by maxLogError.
func (f *fitter) eval(pts []point, c sim.Constants) (r, plain []float64) {
	sims := f.simulate(c)
	r, plain = make([]float64, len(pts)), make([]float64, len(pts))
	bound := func(x float64) float64 { return math.Max(-maxLogError, math.Min(maxLogError, x)) }
	for k, p := range pts {
		r[k], plain[k] = maxLogError, maxLogError
		if sims[p.run] == nil {
			continue
		}
		s := sims[p.run][p.level]
		if s.Failed > 0 {
			continue
		}
		if v, ok := Metric(s, p.metric); ok {
			r[k], plain[k] = bound(logRatio(p.metric, v, p.measured, c)), bound(math.Log(v/p.measured))
		}
	}
	return r, plain
}

// logRatio is one point's residual: log(simulated/measured) of the part
// of the latency the engine's constants shape. TTFT and E2E latency hold
// the API server's fixed front-end time (sim.Constants.FrontendOverheadMs)
// once per request; it comes off both sides first, so that a short
// prompt's TTFT, much of it front end, still tells the engine's constants
// apart rather than diluting their effect. A measurement no longer than
// the front end the model assumes keeps the plain ratio.
func logRatio(metric string, simulated, measured float64, c sim.Constants) float64 {
	if strings.HasPrefix(metric, "ttft_") || strings.HasPrefix(metric, "e2el_") {
		f := c.FrontendOverheadMs // start's zero fields were filled (Fit)
		if f > 0 && measured > f && simulated > f {
			return math.Log((simulated - f) / (measured - f))
		}
	}
	return math.Log(simulated / measured)
}

func meanSquare(r []float64) float64 {
	var s float64
	for _, x := range r {
		s += x * x
	}
	return s / float64(max(len(r), 1))
}

// at returns start with the named constants scaled by exp(x[i]), and
// whether every value stays in its constant's range.
func at(start sim.Constants, names []string, x []float64) (sim.Constants, bool) {
	c := start
	for i, name := range names {
		v0, _ := start.Get(name)
		if err := c.Set(name, v0*math.Exp(x[i])); err != nil {
			return c, false
		}
	}
	return c, true
}

// Identify returns which of candidates the points tell apart, by the
// sensitivity of the residuals to each (a 10% step each way) and what of
// it the constants accepted before do not already explain; held says why
// the others are left at their start value. r0 are the residuals at
// start.
func (f *fitter) identify(pts []point, start sim.Constants, candidates []string, r0 []float64) (fit, held []string) {
	type col struct {
		name string
		v    []float64
		norm float64
	}
	var cols []col
	for _, name := range candidates {
		up, okUp := at(start, []string{name}, []float64{jacobianStep})
		down, okDown := at(start, []string{name}, []float64{-jacobianStep})
		if !okUp || !okDown {
			held = append(held, name+" (at its bound)")
			continue
		}
		// A step each way: a metric that jumps (a median on the edge
		// between two modes of its distribution, a level tipping into
		// saturation) answers one of them and not the other, while a
		// constant that matters moves it both ways alike. The smaller
		// of the two slopes is kept, none when they disagree in sign,
		// so one jump cannot pass for a constant's effect.
		ru, rd := f.residuals(pts, up), f.residuals(pts, down)
		v := make([]float64, len(ru))
		var n float64
		for k := range ru {
			a, b := (ru[k]-r0[k])/jacobianStep, (r0[k]-rd[k])/jacobianStep
			if a*b > 0 {
				v[k] = math.Copysign(math.Min(math.Abs(a), math.Abs(b)), a)
			}
			n += v[k] * v[k]
		}
		cols = append(cols, col{name, v, math.Sqrt(n)})
	}
	sort.SliceStable(cols, func(i, j int) bool { return cols[i].norm > cols[j].norm })
	var basis [][]float64
	sqrtN := math.Sqrt(float64(max(len(pts), 1)))
	for _, c := range cols {
		if c.norm/sqrtN < minSensitivity {
			held = append(held, fmt.Sprintf("%s (no effect on these points)", c.name))
			continue
		}
		v := slices.Clone(c.v)
		for _, q := range basis {
			var d float64
			for k := range v {
				d += q[k] * v[k]
			}
			for k := range v {
				v[k] -= d * q[k]
			}
		}
		var n float64
		for _, x := range v {
			n += x * x
		}
		n = math.Sqrt(n)
		if n < minUnique*c.norm {
			held = append(held, fmt.Sprintf("%s (not told apart from the others)", c.name))
			continue
		}
		for k := range v {
			v[k] /= n
		}
		basis = append(basis, v)
		fit = append(fit, c.name)
	}
	// In the constants' own order, for stable output.
	order := sim.ConstantNames()
	sort.SliceStable(fit, func(i, j int) bool { return slices.Index(order, fit[i]) < slices.Index(order, fit[j]) })
	return fit, held
}

// Fit fits the simulator's constants, from start, to the measured levels
// of runs: it minimises the mean squared log error of the compared metrics
// (bounded per point) with Nelder-Mead over the log of each constant it
// fits. start's zero fields take the stock values of the first run's
// engine.
func Fit(ctx context.Context, runs []Run, start sim.Constants, opts Options) (Result, error) {
	if len(runs) == 0 {
		return Result{}, ErrNoPoints
	}
	start = start.WithDefaults(runs[0].Config.Engine)
	f := &fitter{ctx: ctx, runs: runs, metrics: opts.Metrics, workers: opts.Workers}
	if len(f.metrics) == 0 {
		f.metrics = DefaultMetrics
	}
	if f.workers <= 0 {
		f.workers = runtime.GOMAXPROCS(0)
	}
	pts := f.points()
	if len(pts) == 0 {
		return Result{}, ErrNoPoints
	}
	res := Result{Start: start, Constants: start}
	for _, m := range f.metrics {
		if err := ValidMetric(m); err != nil {
			return res, err
		}
	}
	points := map[[2]int]bool{}
	for _, p := range pts {
		points[[2]int{p.run, p.level}] = true
	}
	res.Points = len(points)
	r0, plain0 := f.eval(pts, start)
	if f.err != nil {
		return res, f.err
	}
	res.StartLoss = meanSquare(r0)
	names := opts.Fit
	if names == nil {
		names, res.Held = f.identify(pts, start, Candidates(runs), r0)
	} else {
		for _, n := range names {
			if _, ok := start.Get(n); !ok {
				return res, fmt.Errorf("unknown simulator constant %q (known: %s)", n, strings.Join(sim.ConstantNames(), ", "))
			}
		}
	}
	res.Fitted = names
	best, bestLoss := start, res.StartLoss
	final := plain0
	if len(names) > 0 && ctx.Err() == nil {
		maxEvals := opts.MaxEvals
		if maxEvals <= 0 {
			maxEvals = 600
		}
		prob := optimize.Problem{Func: func(x []float64) float64 {
			c, ok := at(start, names, x)
			if !ok || ctx.Err() != nil {
				return math.Inf(1)
			}
			l := meanSquare(f.residuals(pts, c))
			if l < bestLoss {
				best, bestLoss = c, l
			}
			if opts.Progress != nil {
				opts.Progress(f.evals, l)
			}
			return l
		}}
		settings := &optimize.Settings{
			FuncEvaluations: maxEvals,
			Converger:       &optimize.FunctionConverge{Absolute: 1e-10, Relative: 1e-8, Iterations: 40},
		}
		_, err := optimize.Minimize(prob, make([]float64, len(names)), settings, &optimize.NelderMead{SimplexSize: 0.15})
		if err != nil && !isLimit(err) && bestLoss >= res.StartLoss {
			return res, fmt.Errorf("fit: %w", err)
		}
		if f.err != nil {
			return res, f.err
		}
		_, final = f.eval(pts, best)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Constants, res.Loss, res.Evals = best, bestLoss, f.evals
	res.Errors = metricErrors(f.metrics, pts, plain0, final)
	return res, nil
}

// isLimit reports whether Minimize stopped on its evaluation budget, which
// leaves the best point found (kept by the objective) usable.
func isLimit(err error) bool {
	return err != nil && strings.Contains(err.Error(), "limit")
}

// metricErrors summarises the residuals per metric as relative errors.
func metricErrors(metrics []string, pts []point, before, after []float64) []sim.MetricError {
	var out []sim.MetricError
	for _, m := range metrics {
		var b, a []float64
		for k, p := range pts {
			if p.metric == m {
				b = append(b, math.Abs(math.Exp(before[k])-1))
				a = append(a, math.Abs(math.Exp(after[k])-1))
			}
		}
		if len(b) == 0 {
			continue
		}
		out = append(out, sim.MetricError{Metric: m, Points: len(b), Before: measure.Median(b), After: measure.Median(a), MaxAfter: slices.Max(a)})
	}
	return out
}

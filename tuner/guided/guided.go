package guided

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/calibrate"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/parallel"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// The guided sampler's rules. Each is a stated choice, not a fit to one
// benchmark.
const (
	// guidedExhaustive: spaces up to this many configurations are forecast
	// whole; larger ones by a seeded sample of guidedSample plus the
	// neighbours of the best guidedRefine forecasts.
	guidedExhaustive = 1024
	guidedSample     = 384
	guidedRefine     = 8
	// guidedRerank: forecasts redone under the refit constants after each
	// measurement (the best by the current ranking); the rest keep theirs.
	guidedRerank = 24
	// A refit uses the latest guidedFitRuns measured trials and at most
	// guidedFitEvals simulations of them.
	guidedFitRuns  = 4
	guidedFitEvals = 30
	// A measurement disagrees with its forecast when they differ by more
	// than a factor 1.25 (or one met the SLOs and the other did not);
	// after guidedFallback disagreements in a row TPE proposes instead.
	guidedDisagree = 1.25
	guidedFallback = 3
	// The search stops when the best unmeasured forecast beats the best
	// measurement by less than guidedNoise (a repeated run of one
	// configuration moves its throughput by about this much) after at
	// least guidedMinTrials measurements.
	guidedNoise     = recommend.Noise
	guidedMinTrials = 3
	// guidedMinStep: a configuration whose listed settings equal those of
	// a measured (or running) one and whose every range setting lies
	// within this share of its range (log-scaled for a log range) is not
	// proposed unless its forecast beats that measurement by more than
	// guidedNoise: one request more in a range of 500 moves throughput
	// far less than a repeated run does. It is also the step of a range's
	// neighbours in refinement.
	guidedMinStep = 1.0 / 16
	// memSigma is the prior log-spread of the engine's real start-up
	// reservations around the memory model's (sim constant
	// memory_overhead): about ±15%.
	memSigma = 0.15
	// confidentFail: a configuration whose chance to start is below this is
	// never launched.
	confidentFail = 0.02
	// guidedIDBase offsets the guided sampler's proposal handles from
	// those of the TPE it may fall back to.
	guidedIDBase = 1 << 30
)

// Forecast is the simulator's view of one configuration.
type Forecast struct {
	Settings space.Settings
	// Value is the objective over the levels that meet the SLOs (Met).
	Value float64
	Met   bool
	// Critical is the memory_overhead scale up to which the memory model
	// lets the configuration start (0: never; +Inf: not modelled).
	Critical float64
	// PStart is the chance it starts on the real engine, given what the
	// study has observed (1 - PStart is the predicted infeasibility).
	PStart float64
	// Failure is why the forecast run failed (the engine's class), ""
	// when it ran.
	Failure string
	// Best is the level that gave Value.
	Best *recommend.Point
	pts  []recommend.Point
}

// forecaster runs configurations of a study in virtual time.
type forecaster struct {
	base *spec.Spec // the study spec with a virtual launcher, no precheck, no quality gate
	// The study's calibration profile, when its launcher is virtual.
	calibration string
	force       bool
	requests    atomic.Int64 // requests simulated, all forecasts together
}

func newForecaster(study *spec.Spec) *forecaster {
	vs := *study
	vs.Tuner.Precheck = false
	vs.Quality = nil
	f := &forecaster{base: &vs}
	if l, err := tuner.NewLauncher(study); err == nil {
		if v, ok := l.(*simulated.Virtual); ok {
			f.calibration, f.force = v.Calibration, v.ForceCalibration
		}
	}
	return f
}

func (f *forecaster) virtual(c sim.Constants) *simulated.Virtual {
	return &simulated.Virtual{GPU: f.base.Hardware.GPU, ModelConfig: f.base.Launcher.ModelConfig,
		Calibration: f.calibration, ForceCalibration: f.force, Constants: c}
}

// run forecasts set under constants c. A configuration the memory model
// stops is forecast as if it started (with the reservations just under its
// critical scale), so its value is known for the bet on whether it starts.
func (f *forecaster) run(ctx context.Context, set space.Settings, c sim.Constants, crit float64) Forecast {
	if crit > 0 && !math.IsInf(crit, 1) {
		m := c.MemoryOverhead
		if m == 0 {
			m = 1
		}
		c.MemoryOverhead = math.Max(0.05, math.Min(m, 0.98*crit))
	}
	res := (&tuner.TrialRunner{Spec: f.base, Launcher: f.virtual(c), Memory: memory.Model{}, Bootstrap: 1, Forecast: true}).Evaluate(ctx, 0, set, nil)
	for _, lv := range res.Levels {
		f.requests.Add(int64(lv.Summary.Completed + lv.Summary.Failed))
	}
	fc := Forecast{Settings: set, Critical: crit}
	if res.Status != measure.StatusOK {
		fc.Failure = string(res.Failure)
		if fc.Failure == "" {
			fc.Failure = string(res.Status)
		}
		return fc
	}
	// A forecast keeps its levels' summaries only: the per-request records
	// (hundreds per level, each with its token times) held for every
	// configuration of a whole space took gigabytes (a dry run of
	// examples/guided-bench.yaml's 864 reached 8.9 GB).
	for i := range res.Levels {
		res.Levels[i].Records = nil
	}
	pts := recommend.PointsOf(0, set, f.base.Hardware.PricePerGPUHour, res.Levels)
	fc.pts = pts
	var best int
	best, fc.Value, fc.Met = recommend.BestPoint(pts, f.base.Tuner.Objective, f.base.SLO)
	if !fc.Met {
		best = len(pts) - 1 // the heaviest level, to show how far off it is
	}
	if best >= 0 {
		fc.Best = &pts[best]
	}
	return fc
}

// critical is the largest memory_overhead scale at which set starts by the
// memory model (bisection: the reservations only grow with it).
func (f *forecaster) critical(set space.Settings) float64 {
	ls := (&tuner.TrialRunner{Spec: f.base}).LaunchSpec(0, set, nil)
	cfg, err := f.virtual(sim.Constants{}).Config(ls)
	if err != nil {
		return math.Inf(1) // settings the simulator does not model: the engine decides
	}
	starts := func(s float64) bool {
		c := cfg
		c.Constants.MemoryOverhead = s
		_, err := sim.Estimate(c)
		return !errors.Is(err, sim.ErrOOM)
	}
	lo, hi, _ := sim.ConstantRange("memory_overhead")
	if !starts(lo) {
		return 0
	}
	if starts(hi) {
		return math.Inf(1)
	}
	for range 40 {
		mid := math.Sqrt(lo * hi)
		if starts(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// cand is one configuration the guide knows.
type cand struct {
	set      space.Settings
	key      string
	coords   []float64 // each parameter in [0, 1], for the residual kernel
	crit     float64
	critDone bool
	fc       Forecast
	fv, mv   []view // forecast and measured levels
	never    bool   // the space rejects it (constraints, heads)
	pending  bool
	measured bool
	mu       float64 // measured utility (0: failed or missed the SLOs)
	started  bool    // the engine started (ok, or failed after starting)
	skipped  bool    // counted among the launches saved
	pred     float64 // the corrected forecast when proposed (mean), 0 when not
	// ratedMet: when proposed, the corrected forecast had a level more
	// likely than not to meet the SLOs (pred > 0).
	ratedMet bool
}

// guide is the guided sampler's state; Sampler serialises its calls.
type guide struct {
	ctx   context.Context
	spec  *spec.Spec
	f     *forecaster
	c     sim.Constants // the refit constants (zero = the launcher's)
	cands []*cand
	by    map[string]*cand
	ids   map[int]*cand
	next  int
	note  func(string)
	// progress reports the first forecast's configurations done of
	// total (sampler.Hooks.Forecast); nil once the guide is built, as
	// the refits' forecasts are part of a trial's tell.
	progress    func(done, total int)
	progressMu  sync.Mutex
	done, total int

	lo, hi   float64 // the real memory_overhead scale lies in (lo, hi]
	runs     []calibrate.Run
	refits   int
	disagree int
	fallback sampler.Sampler
	stopped  bool
	why      string // why it stopped proposing, "" before
	saved    int
	// inNoise counts the latest measurements in a row that came within
	// guidedNoise of their corrected forecast.
	inNoise int
	params  []space.Param
	values  [][]any // each parameter's values when discrete, else nil
}

// newGuide forecasts the space of study (GOMAXPROCS at once), telling
// hooks how far it is.
func newGuide(ctx context.Context, study *spec.Spec, hooks sampler.Hooks) (*guide, error) {
	if err := spec.Forecastable(study); err != nil {
		return nil, fmt.Errorf("sampler guided: %w", err)
	}
	note := hooks.Note
	if note == nil {
		note = func(string) {}
	}
	start := time.Now()
	g := &guide{ctx: ctx, spec: study, f: newForecaster(study), by: map[string]*cand{}, ids: map[int]*cand{},
		next: guidedIDBase, note: note, progress: hooks.Forecast, hi: math.Inf(1), params: study.Space.Params}
	for _, p := range study.Space.Params {
		v, err := p.Values()
		if err != nil {
			v = nil
		}
		g.values = append(g.values, v)
	}
	var sets []space.Settings
	if n, err := study.Space.Size(); err == nil && n <= guidedExhaustive {
		sets, _ = study.Space.Grid()
	} else {
		sets = g.sample(study.Tuner.Seed, guidedSample)
	}
	g.add(sets)
	g.forecast(g.cands)
	if n, err := study.Space.Size(); err != nil || n > guidedExhaustive {
		g.refine(guidedRefine)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.progress = nil
	g.note(fmt.Sprintf("guided: forecast %d configurations in %s: %d simulated requests", len(g.cands), spec.ShortDuration(time.Since(start)), g.f.requests.Load()))
	return g, nil
}

// sample draws n distinct configurations (seeded; fewer when the space is
// smaller).
func (g *guide) sample(seed int64, n int) []space.Settings {
	draw := sampler.Uniform(seed^0x6a1ded, g.params)
	seen := map[string]bool{}
	var out []space.Settings
	for try := 0; len(out) < n && try < 20*n; try++ {
		set := draw()
		if k := set.Key(); !seen[k] {
			seen[k] = true
			out = append(out, set)
		}
	}
	return out
}

// add makes candidates of sets not yet known and returns the new ones.
func (g *guide) add(sets []space.Settings) []*cand {
	var out []*cand
	for _, s := range sets {
		k := s.Key()
		if g.by[k] != nil {
			continue
		}
		c := &cand{set: s, key: k, coords: g.coords(s)}
		g.by[k] = c
		g.cands = append(g.cands, c)
		out = append(out, c)
	}
	return out
}

// forecast runs cs under the current constants, in parallel, and tells
// progress (while the first forecast runs) each one done.
func (g *guide) forecast(cs []*cand) {
	if g.progress != nil {
		g.total += len(cs)
		g.progress(g.done, g.total)
	}
	parallel.Each(g.ctx, len(cs), runtime.GOMAXPROCS(0), func(i int) {
		c := cs[i]
		if !c.critDone {
			c.crit, c.critDone = g.f.critical(c.set), true
		}
		c.fc = g.f.run(g.ctx, c.set, g.c, c.crit)
		c.never = c.fc.Failure == string(engine.FailInfeasible)
		c.fv = g.views(c.fc.pts)
		g.forecastDone()
	})
}

// forecastDone counts one configuration forecast and tells progress,
// one call at a time.
func (g *guide) forecastDone() {
	if g.progress == nil {
		return
	}
	g.progressMu.Lock()
	defer g.progressMu.Unlock()
	g.done++
	g.progress(g.done, g.total)
}

// refine forecasts the neighbours (one step in one parameter) of the best
// top candidates.
func (g *guide) refine(top int) {
	var sets []space.Settings
	for _, c := range g.ranked(top) {
		sets = append(sets, g.neighbours(c.set)...)
	}
	g.forecast(g.add(sets))
}

// neighbours are the configurations one step from set in one parameter.
func (g *guide) neighbours(set space.Settings) []space.Settings {
	var out []space.Settings
	for i, p := range g.params {
		var alts []any
		if p.Kind == space.KindInt && p.High > p.Low {
			// A step the noise can see, not one integer of a wide range.
			x, _ := set.Float(p.Name)
			for _, d := range []float64{-guidedMinStep, guidedMinStep} {
				var y float64
				if p.Log && p.Low > 0 {
					y = x * math.Pow(p.High/p.Low, d)
				} else {
					y = x + d*(p.High-p.Low)
				}
				if v := sampler.RoundInt(y, p); float64(v) != x {
					alts = append(alts, v)
				}
			}
		} else if vals := g.values[i]; vals != nil {
			j := slices.IndexFunc(vals, func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(set[p.Name]) })
			for _, d := range []int{-1, 1} {
				if j+d >= 0 && j+d < len(vals) && j >= 0 {
					alts = append(alts, vals[j+d])
				}
			}
		} else if x, ok := set.Float(p.Name); ok {
			for _, f := range []float64{1 / 1.25, 1.25} {
				y := math.Min(math.Max(x*f, p.Low), p.High)
				if p.Kind == space.KindInt {
					alts = append(alts, sampler.RoundInt(y, p))
				} else {
					alts = append(alts, sampler.RoundFloat(y))
				}
			}
		}
		for _, a := range alts {
			n := set.Clone()
			n[p.Name] = a
			out = append(out, n)
		}
	}
	return out
}

// coords places set in the unit cube: discrete parameters by their index,
// ranges linearly (logarithmically for log ranges); categories stay 0/1
// apart through the index of their choice divided by the count.
func (g *guide) coords(set space.Settings) []float64 {
	out := make([]float64, len(g.params))
	for i, p := range g.params {
		if vals := g.values[i]; vals != nil && len(vals) > 1 {
			j := slices.IndexFunc(vals, func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(set[p.Name]) })
			out[i] = float64(max(j, 0)) / float64(len(vals)-1)
			continue
		}
		if x, ok := set.Float(p.Name); ok && p.High > p.Low {
			if p.Log && p.Low > 0 {
				out[i] = math.Log(x/p.Low) / math.Log(p.High/p.Low)
			} else {
				out[i] = (x - p.Low) / (p.High - p.Low)
			}
		}
	}
	return out
}

// pStart is the chance that a configuration whose critical scale is crit
// starts on the real engine: the real scale has a log-normal prior around
// the model's (memSigma), truncated to what the study observed (lo, hi].
func (g *guide) pStart(crit float64) float64 {
	switch {
	case crit <= g.lo:
		return 0
	case crit >= g.hi || math.IsInf(crit, 1):
		return 1
	}
	m := g.c.MemoryOverhead
	if m == 0 {
		m = 1
	}
	cdf := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		if math.IsInf(x, 1) {
			return 1
		}
		return 0.5 * math.Erfc(-math.Log(x/m)/(memSigma*math.Sqrt2))
	}
	lo, hi := cdf(g.lo), cdf(g.hi)
	if hi-lo < 1e-9 { // the observations lie far in the prior's tail: uniform in log between them
		if g.lo <= 0 || math.IsInf(g.hi, 1) {
			return 0.5
		}
		return math.Log(crit/g.lo) / math.Log(g.hi/g.lo)
	}
	return (cdf(crit) - lo) / (hi - lo)
}

// view is one load level as the guide models it: the objective's utility
// whatever the SLOs, and the metric of each SLO limit (ms).
type view struct {
	u   float64
	lat []float64
	bad bool // failed or unsustained requests: meets no SLO
}

// views are the levels of pts.
func (g *guide) views(pts []recommend.Point) []view {
	obj := g.spec.Tuner.Objective
	out := make([]view, len(pts))
	for i, p := range pts {
		v := view{bad: p.Summary.Completed == 0 || p.Summary.Failed > 0 || p.Summary.Unsustained}
		if m, ok := p.Metric(obj.Metric); ok && m > 0 {
			v.u = m
			if !obj.Maximize {
				v.u = 1 / m
			}
		}
		for _, l := range g.spec.SLO {
			x, ok := p.Metric(l.Metric)
			if !ok || x <= 0 {
				x = math.NaN()
			}
			v.lat = append(v.lat, x)
		}
		out[i] = v
	}
	return out
}

// local is the residual model at c: the measured to forecast log-ratios
// of the objective (ku) and of each SLO metric (klat) over the measured
// configurations, weighted by a Gaussian kernel in the unit cube and
// shrunk towards 1 (the model) far from them; rho in [0, 1) is the share
// of the weight that is evidence.
func (g *guide) local(c *cand) (ku float64, klat []float64, rho float64) {
	const h, w0 = 0.5, 0.5
	nl := len(g.spec.SLO)
	var sw, su float64
	slat := make([]float64, nl)
	wlat := make([]float64, nl)
	for _, m := range g.cands {
		if !m.measured || !m.started || len(m.mv) == 0 || len(m.fv) == 0 {
			continue
		}
		var d2 float64
		for i := range c.coords {
			d := c.coords[i] - m.coords[i]
			d2 += d * d
		}
		w := math.Exp(-d2 / (2 * h * h))
		var lu float64
		var nu int
		llat := make([]float64, nl)
		nlat := make([]int, nl)
		for j := 0; j < len(m.mv) && j < len(m.fv); j++ {
			if a, b := m.mv[j].u, m.fv[j].u; a > 0 && b > 0 {
				lu += clampLog(a / b)
				nu++
			}
			for i := range nl {
				if a, b := m.mv[j].lat[i], m.fv[j].lat[i]; a > 0 && b > 0 {
					llat[i] += clampLog(a / b)
					nlat[i]++
				}
			}
		}
		if nu > 0 {
			sw += w
			su += w * lu / float64(nu)
		}
		for i := range nl {
			if nlat[i] > 0 {
				wlat[i] += w
				slat[i] += w * llat[i] / float64(nlat[i])
			}
		}
	}
	klat = make([]float64, nl)
	for i := range nl {
		klat[i] = math.Exp(slat[i] / (w0 + wlat[i]))
	}
	return math.Exp(su / (w0 + sw)), klat, sw / (w0 + sw)
}

// clampLog is log(r) within a factor 4 either way.
func clampLog(r float64) float64 { return math.Max(-math.Log(4), math.Min(math.Log(4), math.Log(r))) }

// modelSigma is the forecast's log-error far from any measurement: the
// simulator's constants are known to about ±30% before a calibration.
const modelSigma = 0.3

// levelOdds are c's levels under the residual model: the corrected
// utility of each and the chance that it meets every SLO limit (each
// corrected metric log-normal around its forecast with spread sigma).
func (g *guide) levelOdds(c *cand) (u, pMet []float64, sigma float64) {
	ku, klat, rho := g.local(c)
	sigma = modelSigma * math.Sqrt(1-rho)
	for _, v := range c.fv {
		p := 1.0
		if v.bad {
			p = 0
		}
		for i, l := range g.spec.SLO {
			x := v.lat[i]
			if math.IsNaN(x) {
				p = 0
				break
			}
			p *= phi(math.Log(l.Max/(x*klat[i])) / sigma)
		}
		u = append(u, v.u*ku)
		pMet = append(pMet, p)
	}
	return u, pMet, sigma
}

// mean is c's corrected forecast: the best corrected utility of a level
// more likely than not to meet the SLOs (0 when none is).
func (g *guide) mean(c *cand) float64 {
	u, p, _ := g.levelOdds(c)
	best := 0.0
	for j := range u {
		if p[j] >= 0.5 {
			best = math.Max(best, u[j])
		}
	}
	return best
}

// missed counts the measured configurations that started, were rated
// more likely than not to meet the SLOs when proposed, and met them at no
// level: the evidence that the model is optimistic about the SLOs.
func (g *guide) missed() int {
	n := 0
	for _, c := range g.cands {
		if c.measured && c.ratedMet && c.started && len(c.mv) > 0 && c.mu == 0 {
			n++
		}
	}
	return n
}

// expected is c's expected improvement over the best measured utility:
// per level, the corrected utility as the median of a log-normal whose
// spread shrinks near measurements, times the chance that the level meets
// the SLOs; the best level's, times the chance that c starts. With
// nothing measured it is the expected utility. After missed SLO misses
// the chance P to meet the SLOs counts as P^(1+missed): once the
// measurements have shown the model optimistic about the SLOs, a
// configuration it rates unlikely to meet them is no longer launched for
// its upside.
func (g *guide) expected(c *cand) float64 {
	return g.expectedTempered(c, g.missed())
}

// expectedTempered is expected with the SLO odds raised to 1+missed.
func (g *guide) expectedTempered(c *cand, missed int) float64 {
	u, p, sigma := g.levelOdds(c)
	best, _ := g.bestMeasured()
	var top float64
	for j, m := range u {
		if m <= 0 || p[j] == 0 {
			continue
		}
		if missed > 0 {
			p[j] = math.Pow(p[j], float64(1+missed))
		}
		var ei float64
		if best <= 0 {
			ei = m * math.Exp(sigma*sigma/2)
		} else {
			d2 := math.Log(m/best) / sigma
			ei = m*math.Exp(sigma*sigma/2)*phi(d2+sigma) - best*phi(d2)
		}
		top = math.Max(top, p[j]*ei)
	}
	return g.pStart(c.crit) * top
}

// phi is the standard normal CDF.
func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// ranked returns up to n open candidates (not measured, not pending, not
// rejected by the space, not predicted to fail with confidence), best
// expected utility first; ties keep the candidates' order.
func (g *guide) ranked(n int) []*cand {
	type kc struct {
		c *cand
		k float64
	}
	var open []kc
	missed := g.missed()
	for _, c := range g.cands {
		if c.measured || c.pending || c.never || g.pStart(c.crit) < confidentFail || g.indistinct(c) {
			continue
		}
		open = append(open, kc{c, g.expectedTempered(c, missed)})
	}
	sort.SliceStable(open, func(i, j int) bool { return open[i].k > open[j].k })
	out := make([]*cand, 0, min(n, len(open)))
	for i := 0; i < len(open) && i < n; i++ {
		out = append(out, open[i].c)
	}
	return out
}

// bestOpenMean is the best corrected forecast (mean) among the
// configurations ranked may still propose.
func (g *guide) bestOpenMean() float64 {
	best := 0.0
	for _, c := range g.cands {
		if c.measured || c.pending || c.never || g.pStart(c.crit) < confidentFail || g.indistinct(c) {
			continue
		}
		best = math.Max(best, g.mean(c))
	}
	return best
}

// indistinct reports whether c is, to the noise, a configuration already
// measured or running: near it (near) and not forecast to beat it by more
// than guidedNoise.
func (g *guide) indistinct(c *cand) bool {
	mc := math.NaN()
	for _, m := range g.cands {
		if m == c || (!m.measured && !m.pending) || !g.near(c, m) {
			continue
		}
		ref := m.mu
		if !m.measured {
			ref = g.mean(m)
		}
		if math.IsNaN(mc) {
			mc = g.mean(c)
		}
		if mc <= (1+guidedNoise)*ref {
			return true
		}
	}
	return false
}

// near reports whether a and b differ only in range settings, each by
// less than guidedMinStep of its range.
func (g *guide) near(a, b *cand) bool {
	ranged := false
	for i, p := range g.params {
		if (p.Kind == space.KindInt || p.Kind == space.KindFloat) && p.High > p.Low {
			if math.Abs(a.coords[i]-b.coords[i]) >= guidedMinStep {
				return false
			}
			ranged = true
			continue
		}
		if fmt.Sprint(a.set[p.Name]) != fmt.Sprint(b.set[p.Name]) {
			return false
		}
	}
	return ranged
}

// bestMeasured is the best measured utility (0 when none met the SLOs).
func (g *guide) bestMeasured() (best float64, n int) {
	for _, c := range g.cands {
		if c.measured {
			n++
			best = math.Max(best, c.mu)
		}
	}
	return best, n
}

// ask proposes the open candidate of the highest expected utility; it
// returns sampler.ErrExhausted when none is left or when the best one's predicted
// gain over the best measurement is inside the noise.
func (g *guide) ask() (sampler.Proposal, error) {
	if g.stopped {
		return sampler.Proposal{}, sampler.ErrExhausted
	}
	top := g.ranked(1)
	if len(top) == 0 {
		g.why = "every configuration of the space is measured, pending or predicted not to start"
		g.note("guided: " + g.why)
		return sampler.Proposal{}, sampler.ErrExhausted
	}
	c := top[0]
	if best, n := g.bestMeasured(); n >= guidedMinTrials && best > 0 && g.expected(c) < guidedNoise*best {
		g.stopped = true
		g.why = fmt.Sprintf("the forecast's largest expected gain of an unmeasured configuration is %.2f%% of the best measured, inside the %.0f%% noise of a measurement",
			100*g.expected(c)/best, 100*guidedNoise)
		g.note(fmt.Sprintf("guided: stopping after %d measured trials: %s", n, g.why))
		return sampler.Proposal{}, sampler.ErrExhausted
	}
	if best, n := g.bestMeasured(); n >= guidedMinTrials && best > 0 && g.inNoise >= guidedMinTrials {
		// The forecast has been right to the noise lately: when it
		// promises no more than the noise anywhere, a launch can only
		// measure the noise.
		if gain := g.bestOpenMean()/best - 1; gain <= guidedNoise {
			g.stopped = true
			g.why = fmt.Sprintf("the best forecast of an unmeasured configuration is %+.2f%% of the best measured, and the last %d measurements came within the %.0f%% noise of their forecasts",
				100*gain, g.inNoise, 100*guidedNoise)
			g.note(fmt.Sprintf("guided: stopping after %d measured trials: %s", n, g.why))
			return sampler.Proposal{}, sampler.ErrExhausted
		}
	}
	// Configurations the ranking by value alone would have launched first
	// and the learned boundary says will not start: launches saved.
	mc := g.mean(c)
	for _, o := range g.cands {
		if !o.measured && !o.never && !o.skipped && g.pStart(o.crit) < confidentFail && g.mean(o) > mc {
			o.skipped = true
			g.saved++
		}
	}
	c.pending = true
	c.pred = mc
	c.ratedMet = mc > 0
	id := g.next
	g.next++
	g.ids[id] = c
	return sampler.Proposal{ID: id, Settings: c.set.Clone()}, nil
}

// observe learns from a finished trial of c: the start-up boundary from
// whether it started, the constants from its levels.
func (g *guide) observe(c *cand, res trial.Result) {
	started := res.Status == measure.StatusOK || (res.Failure != engine.FailOOM && res.Failure != engine.FailInfeasible && res.Failure != engine.FailLaunchError)
	c.started = started
	switch {
	case res.Failure == engine.FailOOM:
		g.lo = math.Max(g.lo, c.crit)
	case started && !math.IsInf(c.crit, 1):
		g.hi = math.Min(g.hi, c.crit)
	}
	if g.lo >= g.hi {
		// One scale does not explain both: keep the newest observation and
		// forget the other side.
		if res.Failure == engine.FailOOM {
			g.hi = math.Inf(1)
		} else {
			g.lo = 0
		}
		g.note("guided: the engine's start-up boundary is not one shift of the memory model; keeping the newest observation")
	}
	if res.Status != measure.StatusOK || len(res.Levels) == 0 {
		return
	}
	c.mv = g.views(recommend.PointsOf(0, c.set, g.spec.Hardware.PricePerGPUHour, res.Levels))
	r := &tuner.TrialRunner{Spec: g.f.base}
	run, err := calibrationRun(r, g.f.virtual(sim.Constants{}), c.key, 0, 0, c.set, nil, res.Levels)
	if err == nil {
		g.runs = append(g.runs, run)
	}
}

// tell records the measured utility of proposal id and re-ranks.
func (g *guide) tell(id int, score float64, failed bool) {
	c := g.ids[id]
	if c == nil {
		return
	}
	delete(g.ids, id)
	before := g.missed()
	g.record(c, score, failed)
	if c.pred > 0 && c.mu > 0 && math.Abs(c.mu/c.pred-1) <= guidedNoise {
		g.inNoise++
	} else {
		g.inNoise = 0
	}
	g.refit()
	if c.started {
		g.checkAgreement(c)
	}
	if n := g.missed(); n > before {
		g.note(fmt.Sprintf("guided: %d measurements missed the SLOs the corrected forecast rated them likely to meet: a configuration's chance P to meet them counts as P^%d", n, 1+n))
	}
}

// record marks c measured with the objective's score (recommend.Objective.Score).
func (g *guide) record(c *cand, score float64, failed bool) {
	c.pending, c.measured = false, true
	c.mu = 0
	if !failed && !math.IsNaN(score) {
		if g.spec.Tuner.Objective.Maximize {
			c.mu = score
		} else if score < 0 {
			c.mu = -1 / score // score = -value for a minimised metric
		}
	}
}

// refit fits the constants to the latest measured runs and forecasts the
// measured configurations and the best open ones again.
func (g *guide) refit() {
	if len(g.runs) == 0 || len(g.runs) == g.refits {
		return
	}
	g.refits = len(g.runs)
	runs := g.runs[max(0, len(g.runs)-guidedFitRuns):]
	start := g.c
	res, err := calibrate.Fit(g.ctx, runs, start, calibrate.Options{MaxEvals: guidedFitEvals})
	if err == nil && res.Loss < res.StartLoss {
		g.c = res.Constants
		g.c.MemoryOverhead = start.MemoryOverhead
	}
	var again []*cand
	for _, c := range g.cands {
		if c.measured {
			again = append(again, c)
		}
	}
	again = append(again, g.ranked(guidedRerank)...)
	g.forecast(again)
	// The neighbours of the best measurement, which the refit may favour.
	var best *cand
	for _, c := range g.cands {
		if c.measured && c.mu > 0 && (best == nil || c.mu > best.mu) {
			best = c
		}
	}
	if best != nil {
		g.forecast(g.add(g.neighbours(best.set)))
	}
}

// checkAgreement applies the fallback rule to c's measurement: after the
// refit that took it in, does the simulator (without the local
// correction, which c's own ratio would fit) reproduce it?
func (g *guide) checkAgreement(c *cand) {
	pred := 0.0
	if c.fc.Met && c.fc.Value > 0 {
		pred = c.fc.Value
		if !g.spec.Tuner.Objective.Maximize {
			pred = 1 / pred
		}
	}
	agree := (pred == 0) == (c.mu == 0)
	if agree && pred > 0 {
		agree = math.Abs(math.Log(c.mu/pred)) <= math.Log(guidedDisagree)
	}
	if agree {
		g.disagree = 0
		return
	}
	g.disagree++
	g.note(fmt.Sprintf("guided: measured %.4g where the refit simulator forecasts %.4g (%s)", c.mu, pred, c.key))
	if g.disagree >= guidedFallback && g.fallback == nil {
		g.startFallback()
	}
}

// startFallback hands the search to TPE, taught every measurement so far.
func (g *guide) startFallback() {
	s, err := sampler.New(spec.SamplerTPE, g.spec.Space, g.spec.Tuner.Seed)
	if err != nil {
		return
	}
	for _, c := range g.cands {
		switch {
		case c.measured:
			_ = s.Replay(c.set, g.scoreOf(c), c.mu == 0)
		case c.pending:
			s.Reserve(c.set)
		}
	}
	g.fallback = s
	g.note(fmt.Sprintf("guided: %d measurements in a row off their forecast by more than %.0f%%: TPE proposes from here", guidedFallback, 100*(guidedDisagree-1)))
}

// scoreOf is c's measured utility as the objective's score.
func (g *guide) scoreOf(c *cand) float64 {
	if g.spec.Tuner.Objective.Maximize || c.mu == 0 {
		return c.mu
	}
	return -1 / c.mu
}

// replay records a stored trial of a resumed study.
func (g *guide) replay(set space.Settings, score float64, failed bool) {
	c := g.by[set.Key()]
	if c == nil {
		cs := g.add([]space.Settings{set})
		g.forecast(cs)
		c = cs[0]
	}
	g.record(c, score, failed)
	c.started = !failed
}

// reserve marks set as running (an interrupted trial run again).
func (g *guide) reserve(set space.Settings) {
	if c := g.by[set.Key()]; c != nil {
		c.pending = true
	}
}

// Summary is a line on what the guide did, for the study's end.
func (g *guide) summary() string {
	fb := ""
	if g.fallback != nil {
		fb = "; TPE took over after the forecasts kept disagreeing"
	}
	return fmt.Sprintf("guided: %d configurations forecast in virtual time, %d refits of the simulator's constants, %d launches saved by the learned start-up boundary%s",
		len(g.cands), g.refits, g.saved, fb)
}

// forecastValues: a discrete parameter of up to this many values has
// each value's best forecast placed first in the stored forecast (a
// report's chart has a column per value only for so few).
const forecastValues = 64

// forecasts is every configuration the guide knows as the study's store
// keeps it: the corrected forecast (mean) as the objective's metric, the
// chance that the engine starts, the forecast run's failure. The best
// configuration of each value of a discrete parameter comes first, so
// that the store's bound (store.MaxForecasts) keeps the figure the report
// shows for a value no trial measured; then the rest, best first.
func (g *guide) forecasts() []store.Forecast {
	type scored struct {
		c      *cand
		u, ps  float64
		stored store.Forecast
	}
	all := make([]scored, 0, len(g.cands))
	for _, c := range g.cands {
		u, ps := g.mean(c), g.pStart(c.crit)
		f := store.Forecast{Settings: c.set.Clone(), Met: u > 0, PStart: ps, Failure: c.fc.Failure}
		if u > 0 {
			f.Value = u
			if !g.spec.Tuner.Objective.Maximize {
				f.Value = 1 / u
			}
		}
		all = append(all, scored{c, u, ps, f})
	}
	// Best first: by the corrected forecast, then by the chance to
	// start (among those that meet no SLO), the space's rejects last.
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.c.never != b.c.never {
			return !a.c.never
		}
		if a.u != b.u {
			return a.u > b.u
		}
		return a.ps > b.ps
	})
	seen := map[string]bool{} // parameter=value whose best is placed
	var head, tail []store.Forecast
	for _, x := range all {
		lead := false
		for i, p := range g.params {
			if n := len(g.values[i]); n == 0 || n > forecastValues {
				continue // a range: the report shows no column per value
			}
			if k := p.Name + "=" + fmt.Sprint(x.c.set[p.Name]); !seen[k] {
				seen[k], lead = true, true
			}
		}
		if lead {
			head = append(head, x.stored)
		} else {
			tail = append(tail, x.stored)
		}
	}
	return append(head, tail...)
}

// DryRun is a guided study's forecast before anything is launched.
type DryRun struct {
	Ranked     []Forecast // every forecast, best expected value first
	Configs    int        // configurations forecast
	SpaceSize  int        // configurations in the space (0: continuous)
	Infeasible int        // forecast not to start (or rejected by the space)
	MissSLO    int        // start but meet the SLOs at no level
	Requests   int64      // requests simulated, all forecasts together
}

// Forecast ranks study's space in virtual time without launching anything:
// what `tune --dry-run` prints and what the guided sampler starts from.
func ForecastSpace(ctx context.Context, study *spec.Spec) (DryRun, error) {
	g, err := newGuide(ctx, study, sampler.Hooks{})
	if err != nil {
		return DryRun{}, err
	}
	d := DryRun{Configs: len(g.cands), Requests: g.f.requests.Load()}
	d.SpaceSize, _ = study.Space.Size()
	type kc struct {
		fc Forecast
		k  float64
	}
	var all []kc
	for _, c := range g.cands {
		fc := c.fc
		fc.PStart = g.pStart(c.crit)
		switch {
		case c.never || fc.PStart < 0.5:
			d.Infeasible++
		case !fc.Met:
			d.MissSLO++
		}
		k := 0.0
		if !c.never {
			k = g.expected(c)
		}
		all = append(all, kc{fc, k})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].k > all[j].k })
	for _, x := range all {
		d.Ranked = append(d.Ranked, x.fc)
	}
	return d, nil
}

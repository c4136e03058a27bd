package sampler

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/c-bata/goptuna"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/spec"
)

func init() {
	Register(Kind{Name: spec.SamplerTPE, New: func(searchSpace space.Space, seed int64) (Sampler, error) {
		return newOptuna(spec.SamplerTPE, searchSpace, seed, goptuna.StudyOptionSampler(&startupSampler{
			startup: tpeStartupTrials,
			random:  newRandomSampler(seed),
			next:    newTPESampler(seed),
		}))
	}})
}

// tpeSampler is the Tree-structured Parzen Estimator (Bergstra et al.,
// "Algorithms for Hyper-Parameter Optimization", NeurIPS 2011), one
// parameter at a time, with the defaults Optuna made common: the best
// gamma(n) = min(ceil(n/10), 25) observations form the "good" density l,
// the rest the "bad" density g, each a Parzen mixture over the observed
// values plus a prior spanning the range; 24 candidates are drawn from l
// and the one maximising l(x)/g(x) is proposed.
//
// It is ours rather than goptuna's tpe package because that one draws
// mixture components and categories from math/rand's global source, which
// a library cannot seed without a process-wide lock and a go:debug
// setting (randseednop=0) in every main package. This one owns its seeded
// source, so a seeded study proposes the same settings in any program.
type tpeSampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// TPE's constants (Optuna's defaults).
const (
	tpeCandidates  = 24   // candidates drawn from l per proposal
	tpePriorWeight = 1.0  // weight of the prior component
	tpeMaxGood     = 25   // most observations in the good group
	tpeRecent      = 25   // observations that keep full weight; older ones ramp down
	tpeMinSigmaDiv = 100. // a component's width is at least range/min(100, n+1)
)

func newTPESampler(seed int64) *tpeSampler {
	return &tpeSampler{rng: rand.New(rand.NewPCG(uint64(seed), 0x7e9e))}
}

// observation is one completed trial's value of a parameter and its loss.
type observation struct {
	x, loss float64
	number  int
}

// Sample implements goptuna.Sampler: the internal value of param for trial.
func (s *tpeSampler) Sample(st *goptuna.Study, _ goptuna.FrozenTrial, param string, dist any) (float64, error) {
	trials, err := st.GetTrials()
	if err != nil {
		return 0, err
	}
	var obs []observation
	for _, t := range trials {
		if t.State != goptuna.TrialStateComplete {
			continue
		}
		if x, ok := t.InternalParams[param]; ok {
			obs = append(obs, observation{x: x, loss: t.Value, number: t.Number})
		}
	}
	good, bad := splitObservations(obs)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d := dist.(type) {
	case goptuna.UniformDistribution:
		return s.numeric(good, bad, d.Low, d.High, 0, false), nil
	case goptuna.LogUniformDistribution:
		return s.numeric(good, bad, d.Low, d.High, 0, true), nil
	case goptuna.IntUniformDistribution:
		return s.numeric(good, bad, float64(d.Low), float64(d.High), 1, false), nil
	case goptuna.StepIntUniformDistribution:
		return s.numeric(good, bad, float64(d.Low), float64(d.High), float64(d.Step), false), nil
	case goptuna.DiscreteUniformDistribution:
		return s.numeric(good, bad, d.Low, d.High, d.Q, false), nil
	case goptuna.CategoricalDistribution:
		return s.categorical(good, bad, len(d.Choices)), nil
	}
	return 0, goptuna.ErrUnknownDistribution
}

// splitObservations sorts by loss (ties by trial number) and splits off
// the best gamma(n). Each side keeps trial order, for the weights.
func splitObservations(obs []observation) (good, bad []observation) {
	byLoss := slices.Clone(obs)
	sort.SliceStable(byLoss, func(i, j int) bool {
		if byLoss[i].loss != byLoss[j].loss {
			return byLoss[i].loss < byLoss[j].loss
		}
		return byLoss[i].number < byLoss[j].number
	})
	n := min(int(math.Ceil(0.1*float64(len(obs)))), tpeMaxGood)
	good, bad = byLoss[:n], byLoss[n:]
	byNumber := func(o []observation) {
		sort.Slice(o, func(i, j int) bool { return o[i].number < o[j].number })
	}
	byNumber(good)
	byNumber(bad)
	return good, bad
}

// weights are the observations' mixture weights in trial order: the
// latest tpeRecent weigh 1, older ones ramp linearly down to 1/n.
func weights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	if old := n - tpeRecent; old > 0 {
		for i := 0; i < old; i++ {
			w[i] = 1/float64(n) + (1-1/float64(n))*float64(i)/float64(max(old-1, 1))
		}
	}
	return w
}

// parzen is a truncated Gaussian mixture on [low, high].
type parzen struct {
	w, mu, sigma []float64
	low, high    float64
	logMass      []float64 // log of each component's probability mass inside [low, high]
	logW         []float64 // log of normalised weights
}

// newParzen builds the mixture of xs (in trial order) plus the prior.
func newParzen(xs []float64, low, high float64) *parzen {
	n := len(xs)
	w := append(weights(n), tpePriorWeight)
	mus := append(slices.Clone(xs), (low+high)/2)
	span := high - low
	// Each component is as wide as the larger gap to its neighbours in
	// sorted order (the range's ends bound the outermost), clipped to
	// [span/min(100, n+1), span]; the prior spans the whole range.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return xs[order[a]] < xs[order[b]] })
	sigma := make([]float64, n+1)
	minSigma := span / math.Min(tpeMinSigmaDiv, float64(n+1))
	for k, i := range order {
		left, right := low, high
		if k > 0 {
			left = xs[order[k-1]]
		}
		if k < n-1 {
			right = xs[order[k+1]]
		}
		sg := math.Max(xs[i]-left, right-xs[i])
		sigma[i] = math.Min(math.Max(sg, minSigma), span)
	}
	sigma[n] = span
	p := &parzen{w: w, mu: mus, sigma: sigma, low: low, high: high}
	total := 0.0
	for _, x := range w {
		total += x
	}
	for i := range w {
		p.logW = append(p.logW, math.Log(w[i]/total))
		mass := normCDF(high, mus[i], sigma[i]) - normCDF(low, mus[i], sigma[i])
		p.logMass = append(p.logMass, math.Log(math.Max(mass, 1e-300)))
	}
	return p
}

func normCDF(x, mu, sigma float64) float64 {
	return 0.5 * (1 + math.Erf((x-mu)/(sigma*math.Sqrt2)))
}

// logPDF is the mixture's log density at x.
func (p *parzen) logPDF(x float64) float64 {
	terms := make([]float64, len(p.w))
	for i := range p.w {
		z := (x - p.mu[i]) / p.sigma[i]
		terms[i] = p.logW[i] - 0.5*z*z - math.Log(p.sigma[i]*math.Sqrt(2*math.Pi)) - p.logMass[i]
	}
	return logSumExp(terms)
}

func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// draw samples the mixture: a component by weight, then its Gaussian
// until the draw falls in range (a component's mass inside is at least
// that of the range's half-width, so this ends quickly; after 100 misses
// the draw is clipped).
func (p *parzen) draw(rng *rand.Rand) float64 {
	u := rng.Float64()
	k := len(p.w) - 1
	acc := 0.0
	for i, lw := range p.logW {
		acc += math.Exp(lw)
		if u < acc {
			k = i
			break
		}
	}
	for range 100 {
		x := p.mu[k] + p.sigma[k]*rng.NormFloat64()
		if x >= p.low && x <= p.high {
			return x
		}
	}
	return math.Min(math.Max(p.mu[k], p.low), p.high)
}

// numeric proposes a value in [low, high] on a grid of that step (0 = none),
// modelled on the log scale when log is set.
func (s *tpeSampler) numeric(good, bad []observation, low, high, grid float64, log bool) float64 {
	// The model's range: a grid's cells reach half a step past its ends.
	lo, hi := low, high
	if grid > 0 {
		lo, hi = low-grid/2, high+grid/2
	}
	tr := func(x float64) float64 { return x }
	if log {
		tr = math.Log
		lo, hi = math.Log(low), math.Log(high)
	}
	xs := func(o []observation) []float64 {
		out := make([]float64, len(o))
		for i := range o {
			out[i] = tr(o[i].x)
		}
		return out
	}
	l, g := newParzen(xs(good), lo, hi), newParzen(xs(bad), lo, hi)
	best, bestScore := 0.0, math.Inf(-1)
	for range tpeCandidates {
		x := l.draw(s.rng)
		if sc := l.logPDF(x) - g.logPDF(x); sc > bestScore {
			best, bestScore = x, sc
		}
	}
	if log {
		best = math.Exp(best)
	}
	if grid > 0 {
		best = low + math.Round((best-low)/grid)*grid
	}
	return math.Min(math.Max(best, low), high)
}

// categorical proposes one of k choices: each side's probabilities are
// its observations' weights per choice plus the prior spread evenly.
func (s *tpeSampler) categorical(good, bad []observation, k int) float64 {
	probs := func(o []observation) []float64 {
		p := make([]float64, k)
		for i := range p {
			p[i] = tpePriorWeight / float64(k)
		}
		w := weights(len(o))
		for i, x := range o {
			if c := int(x.x); c >= 0 && c < k {
				p[c] += w[i]
			}
		}
		total := 0.0
		for _, v := range p {
			total += v
		}
		for i := range p {
			p[i] /= total
		}
		return p
	}
	l, g := probs(good), probs(bad)
	best, bestScore := 0, math.Inf(-1)
	for range tpeCandidates {
		u, c := s.rng.Float64(), k-1
		acc := 0.0
		for i, p := range l {
			acc += p
			if u < acc {
				c = i
				break
			}
		}
		if sc := math.Log(l[c]) - math.Log(g[c]); sc > bestScore {
			best, bestScore = c, sc
		}
	}
	return float64(best)
}

// tpeStartupTrials is how many random proposals TPE makes before modelling.
const tpeStartupTrials = 10

// startupSampler proposes with random until startup trials are complete,
// then hands over to next (the TPE).
type startupSampler struct {
	startup int
	random  goptuna.Sampler
	next    goptuna.Sampler
}

func (s *startupSampler) Sample(st *goptuna.Study, t goptuna.FrozenTrial, name string, d any) (float64, error) {
	trials, err := st.GetTrials()
	if err != nil {
		return 0, err
	}
	done := 0
	for _, x := range trials {
		if x.State == goptuna.TrialStateComplete {
			if _, ok := x.InternalParams[name]; ok {
				done++
			}
		}
	}
	if done < s.startup {
		return s.random.Sample(st, t, name, d)
	}
	return s.next.Sample(st, t, name, d)
}

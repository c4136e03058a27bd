package sampler

import (
	"math"
	"math/rand/v2"
	"sync"

	"github.com/c-bata/goptuna"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/spec"
)

func init() {
	Register(Kind{Name: spec.SamplerRandom, New: func(searchSpace space.Space, seed int64) (Sampler, error) {
		return newOptuna(spec.SamplerRandom, searchSpace, seed, goptuna.StudyOptionSampler(newRandomSampler(seed)))
	}})
}

// randomSampler is uniform random search on a seeded math/rand/v2 source.
// goptuna v0.9.0's RandomSampler draws categorical values from the unseeded
// global source and never proposes the upper bound of an integer range.
type randomSampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newRandomSampler(seed int64) *randomSampler {
	return &randomSampler{rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed))}
}

func (s *randomSampler) Sample(_ *goptuna.Study, _ goptuna.FrozenTrial, _ string, dist any) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d := dist.(type) {
	case goptuna.UniformDistribution:
		return d.Low + s.rng.Float64()*(d.High-d.Low), nil
	case goptuna.LogUniformDistribution:
		lo, hi := math.Log(d.Low), math.Log(d.High)
		return math.Min(math.Exp(lo+s.rng.Float64()*(hi-lo)), d.High), nil
	case goptuna.IntUniformDistribution:
		return float64(d.Low + s.rng.IntN(d.High-d.Low+1)), nil
	case goptuna.StepIntUniformDistribution:
		return float64(d.Low + d.Step*s.rng.IntN((d.High-d.Low)/d.Step+1)), nil
	case goptuna.DiscreteUniformDistribution:
		n := int(math.Floor((d.High-d.Low)/d.Q+1e-9)) + 1
		return d.Low + d.Q*float64(s.rng.IntN(n)), nil
	case goptuna.CategoricalDistribution:
		return float64(s.rng.IntN(len(d.Choices))), nil
	}
	return 0, goptuna.ErrUnknownDistribution
}

// Uniform returns a seeded source of settings drawn uniformly from params,
// as the random sampler draws them.
func Uniform(seed int64, params []space.Param) func() space.Settings {
	rs := newRandomSampler(seed)
	return func() space.Settings {
		set := make(space.Settings, len(params))
		for _, p := range params {
			ir, _ := rs.Sample(nil, goptuna.FrozenTrial{}, p.Name, distribution(p))
			set[p.Name] = external(p, ir)
		}
		return set
	}
}

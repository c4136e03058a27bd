package sampler

import (
	"fmt"

	"github.com/c-bata/goptuna"
	"github.com/c-bata/goptuna/cmaes"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/spec"
)

// CMA-ES (goptuna's) over the numeric parameters; the others are drawn at
// random.
func init() {
	Register(Kind{Name: spec.SamplerCMAES, New: func(searchSpace space.Space, seed int64) (Sampler, error) {
		nums := numeric(searchSpace)
		if len(nums) < 2 {
			return nil, fmt.Errorf("sampler cmaes needs at least 2 numeric parameters, the space has %d", len(nums))
		}
		return newOptuna(spec.SamplerCMAES, searchSpace, seed,
			goptuna.StudyOptionSampler(newRandomSampler(seed)),
			goptuna.StudyOptionRelativeSampler(cmaes.NewSampler(cmaes.SamplerOptionSeed(seed))),
			goptuna.StudyOptionDefineSearchSpace(nums))
	}})
}

// numeric is the distributions of searchSpace's numeric parameters, by name: the
// space CMA-ES searches.
func numeric(searchSpace space.Space) map[string]any {
	out := map[string]any{}
	for _, p := range searchSpace.Params {
		if p.Kind == space.KindInt || p.Kind == space.KindFloat {
			out[p.Name] = distribution(p)
		}
	}
	return out
}

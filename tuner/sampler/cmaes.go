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
	Register(Kind{Name: spec.SamplerCMAES, New: func(sp space.Space, seed int64) (Sampler, error) {
		numeric := map[string]any{}
		for _, p := range sp.Params {
			if p.Kind == space.KindInt || p.Kind == space.KindFloat {
				numeric[p.Name] = distribution(p)
			}
		}
		if len(numeric) < 2 {
			return nil, fmt.Errorf("sampler cmaes needs at least 2 numeric parameters, the space has %d", len(numeric))
		}
		return newOptuna(spec.SamplerCMAES, sp, seed,
			goptuna.StudyOptionSampler(newRandomSampler(seed)),
			goptuna.StudyOptionRelativeSampler(cmaes.NewSampler(cmaes.SamplerOptionSeed(seed))),
			goptuna.StudyOptionDefineSearchSpace(numeric))
	}})
}

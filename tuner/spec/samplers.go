package spec

import (
	"fmt"
	"strings"

	"github.com/servetune/servetune/space"
)

// samplerKind is a sampler a spec may name in tuner.sampler, with what it
// needs of the study (nil: nothing), whose error reads after the kind's
// name ("cmaes needs ..."). tuner/sampler implements every one of them
// (its TestSpecKindsImplemented), so a spec parses the same whatever the
// program links.
type samplerKind struct {
	name  string
	check func(*Spec) error
}

// samplerKinds lists the kinds in the order errors name them: the default,
// the default without a simulator, the others by name.
var samplerKinds = []samplerKind{
	{SamplerGuided, nil},
	{SamplerTPE, nil},
	{SamplerCMAES, func(s *Spec) error {
		if n := NumericParams(s.Space); n < 2 {
			return fmt.Errorf("needs at least 2 numeric parameters, the space has %d", n)
		}
		return nil
	}},
	{SamplerGrid, func(s *Spec) error {
		if _, err := s.Space.Size(); err != nil {
			return fmt.Errorf("needs a discrete space: %w", err)
		}
		return nil
	}},
	{SamplerRandom, nil},
}

// SamplerKinds returns the names of the kinds a spec may name.
func SamplerKinds() []string {
	out := make([]string, len(samplerKinds))
	for i, k := range samplerKinds {
		out[i] = k.name
	}
	return out
}

// NumericParams counts the space's integer and real parameters: what
// CMA-ES searches (the others it draws at random).
func NumericParams(searchSpace space.Space) int {
	n := 0
	for _, p := range searchSpace.Params {
		if p.Kind == space.KindInt || p.Kind == space.KindFloat {
			n++
		}
	}
	return n
}

// samplerCheck returns kind's check and whether a spec may name it.
func samplerCheck(kind string) (func(*Spec) error, bool) {
	for _, k := range samplerKinds {
		if k.name == kind {
			return k.check, true
		}
	}
	return nil, false
}

// samplerNames lists the kinds as "guided, tpe, cmaes, grid or random".
func samplerNames() string {
	names := SamplerKinds()
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

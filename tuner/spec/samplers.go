package spec

import (
	"slices"
	"strings"
	"sync"
)

// The sampler kinds a spec may name: guided (the default rule, in
// defaultSampler, is the spec's own) and those tuner/sampler's Register
// adds.
var samplers = struct {
	sync.RWMutex
	names  []string
	checks map[string]func(*Spec) error
}{checks: map[string]func(*Spec) error{}}

// RegisterSampler adds a sampler kind a spec may name in tuner.sampler;
// check, when not nil, refuses a spec the kind cannot search (its error
// reads after the kind's name: "needs a discrete space"). tuner/sampler's
// Register calls it.
func RegisterSampler(name string, check func(*Spec) error) {
	samplers.Lock()
	defer samplers.Unlock()
	if _, dup := samplers.checks[name]; !dup {
		samplers.names = append(samplers.names, name)
	}
	samplers.checks[name] = check
}

// samplerCheck returns kind's check and whether a spec may name it.
func samplerCheck(kind string) (func(*Spec) error, bool) {
	samplers.RLock()
	defer samplers.RUnlock()
	check, ok := samplers.checks[kind]
	return check, ok || kind == SamplerGuided
}

// samplerNames lists the kinds as "guided, tpe, a, b or c": the default,
// the default without a simulator, the rest by name.
func samplerNames() string {
	samplers.RLock()
	names := slices.Clone(samplers.names)
	samplers.RUnlock()
	slices.Sort(names)
	out := []string{SamplerGuided}
	if slices.Contains(names, SamplerTPE) {
		out = append(out, SamplerTPE)
	}
	for _, n := range names {
		if n != SamplerGuided && n != SamplerTPE {
			out = append(out, n)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

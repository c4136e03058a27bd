package tuner

import (
	"math"
	"strings"
	"testing"
)

// TestGuidedStartBoundary: the chance to start follows what the study
// saw. An OOM at a configuration of critical scale 1.1 rules out every
// configuration at or below it; a start at 1.4 makes every one at or
// above it certain; between them the chance rises with the critical scale.
func TestGuidedStartBoundary(t *testing.T) {
	g := &guide{hi: math.Inf(1)}
	if p := g.pStart(1); math.Abs(p-0.5) > 1e-9 {
		t.Errorf("before any observation, a configuration at the model's boundary starts with %.3f, want 0.5", p)
	}
	if p := g.pStart(0.6); p >= confidentFail {
		t.Errorf("a configuration needing reservations 40%% under the model's starts with %.3f: want it under the launch threshold", p)
	}
	g.lo, g.hi = 1.1, 1.4
	for _, c := range []struct {
		crit, lo, hi float64
	}{{1.05, 0, 0}, {1.1, 0, 0}, {1.4, 1, 1}, {2, 1, 1}, {math.Inf(1), 1, 1}, {1.2, 0.01, 0.99}} {
		if p := g.pStart(c.crit); p < c.lo || p > c.hi {
			t.Errorf("pStart(%g) = %.3f, want in [%g, %g]", c.crit, p, c.lo, c.hi)
		}
	}
	if a, b := g.pStart(1.15), g.pStart(1.3); !(a < b) {
		t.Errorf("pStart(1.15) = %.3f not below pStart(1.3) = %.3f", a, b)
	}
}

// TestGuidedDefaultSampler: a spec naming no sampler gets guided when the
// simulator knows its model and GPU, TPE otherwise; naming guided for a
// study the simulator cannot forecast is refused at the key.
func TestGuidedDefaultSampler(t *testing.T) {
	base := `name: s
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
HW
space: {max_running_requests: [16, 64]}
workload: {dataset: {kind: random, input: 64, output: 8}, load: {concurrency: [2]}, requests_per_level: 4}
tuner: {trials: 2TUNER}
`
	parse := func(hw, tuner string) (*Spec, error) {
		src := strings.NewReplacer("HW", hw, "TUNER", tuner).Replace(base)
		return ParseSpec([]byte(src), "s.yaml")
	}
	sp, err := parse("hardware: {gpu: H100-SXM}", "")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Tuner.Sampler != SamplerGuided {
		t.Errorf("catalog model and GPU: sampler %q, want guided", sp.Tuner.Sampler)
	}
	sp, err = parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Tuner.Sampler != SamplerTPE {
		t.Errorf("no hardware.gpu: sampler %q, want tpe", sp.Tuner.Sampler)
	}
	_, err = parse("", ", sampler: guided")
	if err == nil || !strings.Contains(err.Error(), "tuner.sampler") || !strings.Contains(err.Error(), "hardware.gpu") {
		t.Errorf("guided without a GPU: %v, want a tuner.sampler error naming hardware.gpu", err)
	}
}

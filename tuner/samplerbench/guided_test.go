package samplerbench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/tuner/spec"
)

func guidedSpec(t *testing.T) *spec.Spec {
	t.Helper()
	study, err := spec.ParseSpecFile(filepath.Join("..", "..", "examples", "guided-bench.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return study
}

// A structural reality is the perturbed reality of its seed plus one
// deviation, the kinds in turn.
func TestStructuralRealities(t *testing.T) {
	study := guidedSpec(t)
	kinds := StructuralKinds()
	seen := map[string]bool{}
	for seed := int64(1); seed <= int64(2*len(kinds)); seed++ {
		p, err := NewReality(study, seed, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewStructuralReality(study, seed, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != "" || p.Constants != s.Constants {
			t.Errorf("seed %d: perturbed %q %+v, structural %+v", seed, p.Kind, p.Constants, s.Constants)
		}
		want := kinds[(seed-1)%int64(len(kinds))]
		if v := s.launcher; s.Kind != want.Name || v.Deviation != want.Deviation {
			t.Errorf("seed %d: kind %q deviating %+v, want %q %+v", seed, s.Kind, v.Deviation, want.Name, want.Deviation)
		}
		if v := p.launcher; v.Deviation != (sim.Deviation{}) {
			t.Errorf("seed %d: the perturbed reality deviates: %+v", seed, v.Deviation)
		}
		seen[s.Kind] = true
	}
	if len(seen) != len(kinds) {
		t.Errorf("kinds used: %v", seen)
	}
}

// A reality keeps each trial's level summaries, not its records.
func TestRealityKeepsSummaries(t *testing.T) {
	study := guidedSpec(t)
	r, err := NewStructuralReality(study, 1, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	grid, err := study.Space.Grid()
	if err != nil {
		t.Fatal(err)
	}
	set := grid[len(grid)-1]
	res := r.Run(context.Background(), set)
	if len(res.Levels) == 0 {
		t.Fatalf("%s: no levels (%s %s)", set.Key(), res.Status, res.Message)
	}
	for _, lv := range res.Levels {
		if lv.Records != nil || lv.Summary.Completed == 0 {
			t.Errorf("level %s: %d records kept, %d completed", lv.Label, len(lv.Records), lv.Summary.Completed)
		}
	}
	if _, ok := r.Value(set, res); !ok {
		t.Errorf("%s: no value from the summaries", set.Key())
	}
}

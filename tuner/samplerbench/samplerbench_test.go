package samplerbench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// bowl is a toy objective on a discrete 8×8×3 space with an infeasible
// corner and one peak.
func bowl() (space.Space, ObjectiveFunc) {
	vals := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	searchSpace := space.Space{Params: []space.Param{
		{Name: "max_running_requests", Kind: space.KindCategorical, Choices: vals(8)},
		{Name: "max_batched_tokens", Kind: space.KindCategorical, Choices: vals(8)},
		{Name: "quantization", Kind: space.KindCategorical, Choices: []any{"none", "fp8", "awq"}},
	}}
	f := func(s space.Settings) (float64, bool) {
		x, _ := s.Int("max_running_requests")
		y, _ := s.Int("max_batched_tokens")
		q, _ := s.String("quantization")
		if x+y > 11 || q == "awq" {
			return 0, true
		}
		v := 100 - float64((x-5)*(x-5)+(y-3)*(y-3))
		if q == "fp8" {
			v += 5
		}
		return v, false
	}
	return searchSpace, f
}

func TestExhaustiveAndTrialsToReach(t *testing.T) {
	searchSpace, f := bowl()
	calls := 0
	memo := NewMemo(func(s space.Settings) (float64, bool) { calls++; return f(s) })
	opt, err := Exhaustive(context.Background(), searchSpace, memo, 0.99, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The peak (105) and its four fp8 neighbours (104) are within 1%;
	// x+y > 11 (6 of 64 pairs) and awq are infeasible: 192 - 58*2 = 76.
	if opt.Configs != 192 || opt.Value != 105 || opt.Near != 5 || opt.Failed != 76 || calls != 192 {
		t.Fatalf("optimum %+v after %d calls", opt, calls)
	}
	for _, kind := range []string{spec.SamplerTPE, spec.SamplerRandom} {
		n, err := TrialsToReach(kind, searchSpace, 1, memo, 0.99*opt.Value, 300)
		if err != nil {
			t.Fatal(err)
		}
		// 192 configurations, no repeats: any sampler finds the peak by then.
		if n < 1 || n > 192 {
			t.Errorf("%s needed %d trials", kind, n)
		}
	}
	if calls != 192 {
		t.Errorf("the memo evaluated %d times, want 192", calls)
	}
	path := filepath.Join(t.TempDir(), "memo.json")
	if err := memo.Save(path); err != nil {
		t.Fatal(err)
	}
	m2 := NewMemo(func(space.Settings) (float64, bool) { t.Fatal("evaluated despite the cache"); return 0, true })
	if n, err := m2.Load(path); err != nil || n != 192 {
		t.Fatalf("Load = %d, %v", n, err)
	}
	if v, failed := m2.Eval(space.Settings{"max_running_requests": 5, "max_batched_tokens": 3.0, "quantization": "fp8"}); failed || v != 105 {
		t.Errorf("cached peak = %g, %v", v, failed)
	}
}

func BenchmarkSamplerAskTellTPE(b *testing.B) {
	searchSpace, f := bowl()
	for b.Loop() {
		s, err := sampler.New(spec.SamplerTPE, searchSpace, 1)
		if err != nil {
			b.Fatal(err)
		}
		for range 30 {
			p, err := s.Ask()
			if err != nil {
				b.Fatal(err)
			}
			v, failed := f(p.Settings)
			if err := s.Tell(p.ID, v, failed); err != nil {
				b.Fatal(err)
			}
		}
	}
}

package report

import (
	"math"
	"testing"
)

func TestImportance(t *testing.T) {
	// tp decides the objective; noise is unrelated to it.
	var vals []float64
	tp, noise, frac := []any{}, []any{}, []any{}
	for i := range 40 {
		t := []float64{1, 2}[i%2]
		vals = append(vals, 100*t+float64(i%3))
		tp = append(tp, t)
		noise = append(noise, []string{"a", "b", "c", "d", "e"}[(i/2)%5])
		frac = append(frac, 0.8+0.01*float64(i%7)) // numeric, 7 values: binned
	}
	got := Importance(vals, map[string][]any{"tensor_parallel": tp, "kv": noise, "gpu_memory_fraction": frac})
	if len(got) != 3 || got[0].Param != "tensor_parallel" {
		t.Fatalf("order %+v", got)
	}
	if got[0].Eta2 < 0.99 || got[0].Groups != 2 || got[0].N != 40 {
		t.Errorf("tensor_parallel %+v: want η² ≈ 1 over 2 groups", got[0])
	}
	for _, e := range got[1:] {
		if e.Eta2 > 0.05 {
			t.Errorf("%s η² = %.3f, want near 0", e.Param, e.Eta2)
		}
	}
	if g := got[1:]; g[0].Param == "gpu_memory_fraction" && g[0].Groups > 4 || g[1].Param == "gpu_memory_fraction" && g[1].Groups > 4 {
		t.Errorf("numeric parameter not binned: %+v", got)
	}
}

func TestImportanceDegenerate(t *testing.T) {
	// Equal objectives: nothing to explain, no NaN.
	got := Importance([]float64{5, 5, 5}, map[string][]any{"x": {1.0, 2.0, 3.0}})
	if len(got) != 1 || got[0].Eta2 != 0 || math.IsNaN(got[0].Eta2) {
		t.Errorf("got %+v", got)
	}
	if got := Importance([]float64{1}, map[string][]any{"x": {1.0}}); len(got) != 0 {
		t.Errorf("one trial: %+v", got)
	}
}

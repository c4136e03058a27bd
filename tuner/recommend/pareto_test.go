package recommend

import (
	"errors"
	"math"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

// pt builds a point with the given output throughput, GPUs and p99 TTFT.
func pt(trial, gpus int, out, ttftP99 float64) Point {
	return Point{
		Trial: trial, GPUs: gpus, Price: 2,
		Level: measure.Level{Summary: measure.Summary{
			Completed:        10,
			OutputThroughput: out,
			RequestGoodput:   out / 100,
			TTFT:             measure.Stats{N: 10, P99: ttftP99, Median: ttftP99 / 2, P50: ttftP99 / 2},
			TPOT:             measure.Stats{N: 10, P99: 20, Median: 10, P50: 10},
			E2EL:             measure.Stats{N: 10, P99: ttftP99 + 1000},
		}},
	}
}

func trials(ps []Point) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Trial)
	}
	return out
}

func TestFront(t *testing.T) {
	objs := []Objective{{"output_throughput_per_gpu", true}, {"ttft_p99", false}}
	tests := []struct {
		name string
		pts  []Point
		want []int
	}{
		{"empty", nil, nil},
		{"single", []Point{pt(0, 1, 100, 50)}, []int{0}},
		{"dominated", []Point{pt(0, 1, 100, 50), pt(1, 1, 200, 40)}, []int{1}},
		{"trade-off", []Point{pt(0, 1, 100, 50), pt(1, 1, 200, 80), pt(2, 1, 150, 90)}, []int{0, 1}},
		{"per GPU", []Point{pt(0, 2, 300, 50), pt(1, 1, 200, 50)}, []int{1}},
		{"duplicates kept", []Point{pt(0, 1, 100, 50), pt(1, 1, 100, 50)}, []int{0, 1}},
		{"missing metric dropped", []Point{{Trial: 0, GPUs: 1}, pt(1, 1, 10, 10)}, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := trials(Front(tc.pts, objs))
			if len(got) != len(tc.want) {
				t.Fatalf("front = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("front = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestRecommend(t *testing.T) {
	objs := []Objective{{"output_throughput_per_gpu", true}, {"ttft_p99", false}}
	slo := SLO{{"ttft_p99", 100}}
	pts := []Point{
		pt(0, 1, 100, 20),  // lowest latency
		pt(1, 1, 300, 90),  // best throughput within SLO
		pt(2, 1, 900, 500), // violates the SLO
		pt(3, 2, 500, 60),  // 250/GPU, more expensive per token than trial 1
	}
	tests := []struct {
		pref Preference
		want int
	}{
		{PreferThroughput, 1},
		{PreferCost, 1},
		{PreferLatency, 0},
	}
	for _, tc := range tests {
		t.Run(string(tc.pref), func(t *testing.T) {
			got, err := Recommend(pts, objs, slo, tc.pref)
			if err != nil {
				t.Fatal(err)
			}
			if got.Trial != tc.want {
				t.Errorf("Recommend(%s) = trial %d, want %d", tc.pref, got.Trial, tc.want)
			}
		})
	}
	t.Run("failed requests miss the SLO", func(t *testing.T) {
		fast := pt(4, 1, 5000, 10)
		fast.Summary.Failed = 3
		got, err := Recommend(append([]Point{fast}, pts...), objs, slo, PreferThroughput)
		if err != nil || got.Trial != 1 {
			t.Errorf("Recommend = trial %d, %v; want trial 1, not the level that dropped requests", got.Trial, err)
		}
	})
	t.Run("none feasible", func(t *testing.T) {
		_, err := Recommend([]Point{pt(0, 1, 100, 500)}, objs, slo, PreferThroughput)
		if !errors.Is(err, ErrNoFeasible) {
			t.Fatalf("err = %v, want ErrNoFeasible", err)
		}
	})
}

func TestCostPerMTok(t *testing.T) {
	tests := []struct {
		name  string
		price float64
		gpus  int
		out   float64
		want  float64
	}{
		// 2 GPUs at $3/h = $6/h; 1000 tok/s = 3.6M tok/h -> $1.6667/Mtok.
		{"two GPUs", 3, 2, 1000, 6.0 / 3.6},
		{"no price", 0, 1, 1000, 0},
		{"no output", 3, 1, 0, math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CostPerMTok(tc.price, tc.gpus, tc.out); math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
				t.Errorf("CostPerMTok = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestParseObjective(t *testing.T) {
	tests := []struct {
		in      string
		want    Objective
		wantErr bool
	}{
		{"max output_throughput_per_gpu", Objective{"output_throughput_per_gpu", true}, false},
		{"min ttft_p99", Objective{"ttft_p99", false}, false},
		{" min  cost_per_mtok ", Objective{"cost_per_mtok", false}, false},
		{"maximize ttft_p99", Objective{}, true},
		{"max nonsense", Objective{}, true},
		{"max", Objective{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseObjective(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseObjective(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
}

func TestTrialValue(t *testing.T) {
	slo := SLO{{"ttft_p99", 100}}
	pts := []Point{pt(0, 1, 100, 20), pt(0, 1, 300, 90), pt(0, 1, 900, 500)}
	if v, ok := TrialValue(pts, Objective{"output_throughput", true}, slo); !ok || v != 300 {
		t.Errorf("throughput under SLO = %g, %v; want 300", v, ok)
	}
	// One definition for every metric: the level that misses the SLOs
	// counts for nothing, even its goodput (9 req/s/GPU at p99 TTFT 500 ms).
	if v, ok := TrialValue(pts, Objective{"goodput_per_gpu", true}, slo); !ok || v != 3 {
		t.Errorf("goodput = %g, %v; want 3 (the best level within the SLOs)", v, ok)
	}
	if _, ok := TrialValue(pts[2:], Objective{"output_throughput", true}, slo); ok {
		t.Error("a trial without a level within the SLOs has a value")
	}
	if g := (SLO{{"ttft_p99", 500}, {"ttft_p50", 200}, {"tpot_p99", 50}}).Goodput(); g.TTFTms != 200 || g.TPOTms != 50 || g.E2ELms != 0 {
		t.Errorf("Goodput = %+v", g)
	}
}

// TestObjectiveScore: the sampler maximises, so a "min" objective is told
// negated and a lower value scores higher.
func TestObjectiveScore(t *testing.T) {
	for _, tc := range []struct {
		obj  Objective
		a, b float64 // a is better than b
	}{
		{Objective{"output_throughput_per_gpu", true}, 200, 100},
		{Objective{"ttft_p99", false}, 100, 200},
		{Objective{"cost_per_mtok", false}, 0.5, 2},
	} {
		if !(tc.obj.Score(tc.a) > tc.obj.Score(tc.b)) {
			t.Errorf("%s: score(%g)=%g not above score(%g)=%g", tc.obj, tc.a, tc.obj.Score(tc.a), tc.b, tc.obj.Score(tc.b))
		}
	}
}

// FuzzParseObjective: an objective parses to a known metric and prints
// back as it parses, or is an error.
func FuzzParseObjective(f *testing.F) {
	for _, s := range []string{"max goodput_per_gpu", "min ttft_p99", "max  happiness", "min", " max cost_per_mtok "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObjective(s)
		if err != nil {
			return
		}
		if !KnownMetric(o.Metric) {
			t.Fatalf("ParseObjective(%q) = %+v: unknown metric", s, o)
		}
		if back, err := ParseObjective(o.String()); err != nil || back != o {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, o, o.String(), back, err)
		}
	})
}

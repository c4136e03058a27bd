package measure

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{7}, 99, 7},
		{"median odd", []float64{1, 2, 3}, 50, 2},
		{"median even", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90 numpy", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{"p0", []float64{3, 4}, 0, 3},
		{"p100", []float64{3, 4}, 100, 4},
		{"p99 of 0..100", seq(101), 99, 99},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); !near(got, tc.want, 1e-9) {
				t.Errorf("Percentile(%v, %g) = %g, want %g", tc.in, tc.p, got, tc.want)
			}
		})
	}
}

func seq(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i)
	}
	return s
}

func TestNewStats(t *testing.T) {
	s := NewStats([]float64{4, 2, 8, 6}, rand.New(rand.NewPCG(1, 2)), 500)
	want := Stats{N: 4, Mean: 5, Median: 5, Std: math.Sqrt(5), P50: 5, P90: 7.4, P95: 7.7, P99: 7.94, P999: 7.994}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"mean", s.Mean, want.Mean}, {"median", s.Median, want.Median}, {"std", s.Std, want.Std},
		{"p90", s.P90, want.P90}, {"p95", s.P95, want.P95}, {"p99", s.P99, want.P99}, {"p999", s.P999, want.P999},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !near(c.got, c.want, 1e-9) {
				t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
			}
		})
	}
	if s.MedianCI[0] > s.Median || s.MedianCI[1] < s.Median {
		t.Errorf("median CI %v does not hold the median %g", s.MedianCI, s.Median)
	}
}

func TestBootstrapCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, 2000)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	st := NewStats(x, rng, 2000)
	// Median of N(0,1), n=2000: standard error ≈ 1.2533/sqrt(n) = 0.028.
	w := st.MedianCI[1] - st.MedianCI[0]
	if w < 0.06 || w > 0.16 {
		t.Errorf("median CI width %g, want about 0.11", w)
	}
	t.Run("diff of equal samples holds zero", func(t *testing.T) {
		ci := BootstrapDiffCI(x, x, 50, rng, 2000)
		if ci[0] > 0 || ci[1] < 0 {
			t.Errorf("CI %v excludes 0", ci)
		}
	})
	t.Run("diff of shifted samples excludes zero", func(t *testing.T) {
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] + 0.5
		}
		ci := BootstrapDiffCI(x, y, 50, rng, 2000)
		if ci[0] <= 0 || !near((ci[0]+ci[1])/2, 0.5, 0.1) {
			t.Errorf("CI %v, want around 0.5", ci)
		}
	})
}

// rec builds a successful record: send at 0, chunks at the given ms offsets
// carrying the given tokens.
func rec(idx int, sched, send float64, chunkMs []float64, tokens []int, out int) Record {
	d := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	r := Record{Index: idx, Sched: d(sched), Send: d(send), OutputTokens: out, PromptTokens: 10}
	for i, c := range chunkMs {
		r.Chunks = append(r.Chunks, Chunk{At: d(c), Tokens: tokens[i]})
	}
	r.First, r.Last, r.End = r.Chunks[0].At, r.Chunks[len(r.Chunks)-1].At, r.Chunks[len(r.Chunks)-1].At+d(1)
	return r
}

func TestRecordMetrics(t *testing.T) {
	tests := []struct {
		name string
		r    Record
		want RequestMetrics
	}{
		{"one token per chunk", rec(0, 0, 0, []float64{50, 60, 70, 80}, []int{1, 1, 1, 1}, 4),
			RequestMetrics{TTFT: 50, TTFTSched: 50, Queue: 0, E2EL: 80, TPOT: 10}},
		{"late send", rec(0, 10, 15, []float64{65, 75}, []int{1, 1}, 2),
			RequestMetrics{TTFT: 50, TTFTSched: 55, Queue: 5, E2EL: 60, TPOT: 10}},
		{"four tokens per chunk", rec(0, 0, 0, []float64{50, 90, 130}, []int{4, 4, 4}, 12),
			RequestMetrics{TTFT: 50, E2EL: 130, TPOT: 80.0 / 11}},
		{"single token has no TPOT", rec(0, 0, 0, []float64{50}, []int{1}, 1),
			RequestMetrics{TTFT: 50, TTFTSched: 50, E2EL: 50, TPOT: math.NaN()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.r.Metrics()
			if !near(m.TTFT, tc.want.TTFT, 1e-9) || !near(m.E2EL, tc.want.E2EL, 1e-9) || !near(m.Queue, tc.want.Queue, 1e-9) {
				t.Errorf("got %+v, want %+v", m, tc.want)
			}
			if math.IsNaN(tc.want.TPOT) != math.IsNaN(m.TPOT) || (!math.IsNaN(m.TPOT) && !near(m.TPOT, tc.want.TPOT, 1e-9)) {
				t.Errorf("TPOT %g, want %g", m.TPOT, tc.want.TPOT)
			}
		})
	}
}

func TestSLOGood(t *testing.T) {
	m := RequestMetrics{TTFT: 100, TPOT: 20, E2EL: 1000}
	tests := []struct {
		slo  SLO
		want bool
	}{
		{SLO{}, true},
		{SLO{TTFTms: 100}, true},
		{SLO{TTFTms: 99}, false},
		{SLO{TPOTms: 19.9}, false},
		{SLO{E2ELms: 1000, TPOTms: 20, TTFTms: 100}, true},
		{SLO{E2ELms: 999}, false},
	}
	for _, tc := range tests {
		t.Run("", func(t *testing.T) {
			if got := tc.slo.Good(m); got != tc.want {
				t.Errorf("%+v.Good = %v, want %v", tc.slo, got, tc.want)
			}
		})
	}
	if !(SLO{TPOTms: 1}).Good(RequestMetrics{TPOT: math.NaN()}) {
		t.Error("a request without TPOT must pass a TPOT limit")
	}
}

func TestSummarize(t *testing.T) {
	records := []Record{
		{Index: -1, Warmup: true, Send: 0, End: time2(5000), Chunks: []Chunk{{At: 1, Tokens: 1}}, OutputTokens: 99},
		rec(0, 0, 0, []float64{50, 60, 70, 80}, []int{1, 1, 1, 1}, 4),
		rec(1, 100, 100, []float64{150, 190, 230}, []int{1, 4, 4}, 9), // TPOT 80/8 = 10; per-token ITL 10
		rec(2, 200, 200, []float64{400, 420}, []int{1, 1}, 2),         // TTFT 200: misses a 100 ms TTFT SLO
		{Index: 3, Send: time2(300), End: time2(999), Error: ErrHTTP5xx},
		{Index: 4, Send: time2(300), End: time2(310), Error: ErrTimeout},
	}
	s := Summarize(records, SummaryOptions{Goodput: SLO{TTFTms: 100}, Seed: 1})
	// duration: first send 0 to last end 999 ms (the failed one ends last).
	checks := []struct {
		name      string
		got, want float64
	}{
		{"completed", float64(s.Completed), 3},
		{"failed", float64(s.Failed), 2},
		{"http_5xx", float64(s.Errors["http_5xx"]), 1},
		{"timeout", float64(s.Errors["timeout"]), 1},
		{"connect", float64(s.Errors["connect"]), 0},
		{"duration", s.Duration, 0.999},
		{"input tokens", float64(s.TotalInputTokens), 30},
		{"output tokens", float64(s.TotalOutputTokens), 15},
		{"request throughput", s.RequestThroughput, 3 / 0.999},
		{"output throughput", s.OutputThroughput, 15 / 0.999},
		{"total throughput", s.TotalTokenThroughput, 45 / 0.999},
		{"goodput", s.RequestGoodput, 2 / 0.999},
		{"median ttft", s.TTFT.Median, 50},
		{"mean ttft", s.TTFT.Mean, 100},
		{"tpot n", float64(s.TPOT.N), 3},
		{"median tpot", s.TPOT.Median, 10},
		{"itl n (per chunk)", float64(s.ITL.N), 3 + 2 + 1},
		{"itl per token n", float64(s.ITLPerToken.N), 3 + 8 + 1},
		{"median itl per token", s.ITLPerToken.Median, 10},
		{"mean itl", s.ITL.Mean, (10 + 10 + 10 + 40 + 40 + 20) / 6.0},
		{"median e2el", s.E2EL.Median, 130},
		{"peak output tok/s", s.PeakOutputThroughput, 15},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !near(c.got, c.want, 1e-9) {
				t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
			}
		})
	}
	if len(s.Errors) != len(ErrorClasses) {
		t.Errorf("errors has %d classes, want all %d", len(s.Errors), len(ErrorClasses))
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := Summarize(nil, SummaryOptions{})
	if s.Completed != 0 || s.Duration != 0 || len(s.Errors) != len(ErrorClasses) {
		t.Errorf("empty summary %+v", s)
	}
}

func TestSummarizeQueue(t *testing.T) {
	// An open-loop request sent 30 ms late: TTFT hides it, queue and TTFT
	// from schedule show it.
	s := Summarize([]Record{rec(0, 0, 30, []float64{80, 90}, []int{1, 1}, 2)}, SummaryOptions{})
	if s.TTFT.Median != 50 || s.Queue.Median != 30 || s.TTFTSched.Median != 80 {
		t.Errorf("ttft %g queue %g ttft_from_sched %g, want 50 30 80", s.TTFT.Median, s.Queue.Median, s.TTFTSched.Median)
	}
}

func time2(msv float64) time.Duration { return time.Duration(msv * float64(time.Millisecond)) }

func newRNG(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }

func TestResampleClustersPercentileMatchesSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{1, 2, 7, 100, 1001} {
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = math.Round(rng.NormFloat64()*10) / 2 // ties included
		}
		for _, p := range []float64{0, 2.5, 50, 90, 99, 99.9, 100} {
			// One cluster holding everything: a resample is the sample itself.
			var buf []float64
			got, ok := resampleClusters(vals, []int{0, n}, p, rng, &buf)
			want := Percentile(slices.Sorted(slices.Values(vals)), p)
			if !ok || math.Abs(got-want) > 1e-9 {
				t.Errorf("n=%d p=%v: selection %v, sorted %v", n, p, got, want)
			}
		}
	}
}

// TestClusterBootstrapWiderForCorrelatedGaps: when each request's gaps move
// together (one slow stream is slow throughout), resampling requests gives
// the honest, wider interval; resampling single gaps overstates certainty.
func TestClusterBootstrapWiderForCorrelatedGaps(t *testing.T) {
	gen := func(seed uint64) ([]float64, []int) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var vals []float64
		var counts []int
		for range 30 {
			level := 10 + 3*rng.NormFloat64()
			for range 100 {
				vals = append(vals, level+0.01*rng.NormFloat64())
			}
			counts = append(counts, 100)
		}
		return vals, counts
	}
	bv, bc := gen(1)
	nv, nc := gen(2)
	rng := rand.New(rand.NewPCG(9, 9))
	cluster := ClusterBootstrapDiffCI(bv, bc, nv, nc, 50, rng, 1000)
	flat := BootstrapDiffCI(slices.Sorted(slices.Values(bv)), slices.Sorted(slices.Values(nv)), 50, rng, 1000)
	cw, fw := cluster[1]-cluster[0], flat[1]-flat[0]
	t.Logf("median diff CI: by request %v (width %.3f), by gap %v (width %.3f)", cluster, cw, flat, fw)
	if cw < 3*fw {
		t.Errorf("request-level CI width %.3f not clearly wider than gap-level %.3f", cw, fw)
	}
	if cluster[0] > 0 || cluster[1] < 0 {
		t.Errorf("same distribution, but the request-level CI %v excludes 0", cluster)
	}
	if bad := ClusterBootstrapDiffCI(bv, []int{1}, nv, nc, 50, rng, 10); bad != [2]float64{} {
		t.Errorf("counts not adding up: %v, want no interval", bad)
	}
}

// TestWeightedMedianAndQuartiles: the time-weighted median is the value
// where the weights in ascending order reach half their total, one of the
// values; quartile edges are values at ranks ⌊n/4⌋, ⌊n/2⌋, ⌊3n/4⌋.
func TestWeightedMedianAndQuartiles(t *testing.T) {
	for _, tc := range []struct {
		w    map[float64]float64
		want float64
	}{
		{map[float64]float64{4: 1, 5: 1}, 4},          // half reached exactly at 4: the lower
		{map[float64]float64{4: 1, 5: 1.5}, 5},        // 4 holds less than half
		{map[float64]float64{8: 0.1, 2: 3, 16: 2}, 2}, // order is by value, not by the map
		{map[float64]float64{7: 2}, 7},
	} {
		if got := WeightedMedian(tc.w); got != tc.want {
			t.Errorf("WeightedMedian(%v) = %g, want %g", tc.w, got, tc.want)
		}
	}
	if !math.IsNaN(WeightedMedian(nil)) || !math.IsNaN(WeightedMedian(map[float64]float64{3: 0})) {
		t.Error("the weighted median of no weight is not NaN")
	}
	if got := Quartiles([]float64{1, 2, 3, 4, 5, 6, 7, 8}); got != [3]float64{3, 5, 7} {
		t.Errorf("Quartiles of 1..8 = %v", got)
	}
	if got := Quartiles([]float64{1, 1, 1, 2, 9}); got != [3]float64{1, 1, 2} {
		t.Errorf("Quartiles with ties = %v", got)
	}
	if q := Quartiles(nil); !math.IsNaN(q[0]) {
		t.Errorf("Quartiles of nothing = %v", q)
	}
}

func TestMedianAndPercentileOf(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want float64
	}{{[]int{3}, 3}, {[]int{5, 1, 3}, 3}, {[]int{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(tc.in)
		if got := Median(in); got != tc.want {
			t.Errorf("Median(%v) = %g, want %g", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its input: %v", in)
		}
	}
	if !math.IsNaN(Median([]float64(nil))) || !math.IsNaN(PercentileOf([]int(nil), 90)) {
		t.Error("the median of nothing is not NaN")
	}
	// Linear interpolation between closest ranks (numpy's default).
	if got := PercentileOf([]float64{10, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 90); math.Abs(got-9.1) > 1e-12 {
		t.Errorf("p90 of 1..10 = %g, want 9.1", got)
	}
}

func TestMeanCIAndWelch(t *testing.T) {
	m, ci := MeanCI([]float64{1, 2, 3})
	// mean 2, s = 1, se = 1/√3, t(0.975, 2) = 4.302653
	if h := 4.302653 / math.Sqrt(3); m != 2 || math.Abs(ci[0]-(2-h)) > 1e-5 || math.Abs(ci[1]-(2+h)) > 1e-5 {
		t.Errorf("MeanCI = %v %v", m, ci)
	}
	if m, ci := MeanCI([]float64{5}); m != 5 || ci != [2]float64{5, 5} {
		t.Errorf("MeanCI of one value = %v %v", m, ci)
	}
	if _, _, ok := Welch([]float64{1}, []float64{1, 2}); ok {
		t.Error("Welch with one value on a side")
	}
	if d, ci, ok := Welch([]float64{3, 3}, []float64{1, 1}); !ok || d != 2 || ci != [2]float64{2, 2} {
		t.Errorf("Welch of exact samples = %v %v %v", d, ci, ok)
	}
	// Equal sizes and variances: Welch's df is 2n-2 and the interval
	// Student's pooled one: diff 1, se √(2/3), t(0.975, 4) = 2.776445.
	d, ci, ok := Welch([]float64{2, 3, 4}, []float64{1, 2, 3})
	if h := 2.776445 * math.Sqrt(2.0/3); !ok || d != 1 || math.Abs(ci[0]-(1-h)) > 1e-5 || math.Abs(ci[1]-(1+h)) > 1e-5 {
		t.Errorf("Welch = %v %v %v", d, ci, ok)
	}
}

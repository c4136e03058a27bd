package recommend

import (
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
)

// storedTrial is an ok trial with one level of the given output
// throughput (one GPU) that meets the SLOs when ttft is within them.
func storedTrial(number int, confirms *int, mrr int, tput, ttft float64) store.Trial {
	sum := measure.Summary{Completed: 100, OutputThroughput: tput, RequestGoodput: tput / 100,
		TTFT: measure.Stats{N: 100, P99: ttft}, TPOT: measure.Stats{N: 100, P99: 10, Median: 8}, Duration: 10, TotalOutputTokens: int(tput * 10)}
	return store.Trial{Number: number, Status: measure.StatusOK, Confirms: confirms,
		Settings:   space.Settings{"max_running_requests": mrr, "tensor_parallel": 1, "gpu_memory_fraction": 0.9},
		LoadPoints: []measure.Level{measure.NewLevel(measure.Load{MaxConcurrency: 8}, sum, nil)}}
}

func ip(n int) *int { return &n }

// TestRecommendStudy: with confirmation runs, configurations rank by the
// mean of their runs (a lucky single measurement does not win), figures
// carry a 95% interval, and the runner-up is named and said to be
// inseparable or not.
func TestRecommendStudy(t *testing.T) {
	terms := Terms{
		Objectives: []Objective{{Metric: "output_throughput_per_gpu", Maximize: true}, {Metric: "tokens_per_user", Maximize: true}},
		SLO:        SLO{{Metric: "ttft_p99", Max: 2000}},
		Price:      3,
		Space: space.Space{Params: []space.Param{
			{Name: "tensor_parallel", Kind: space.KindCategorical, Choices: []any{1, 2}},
			{Name: "max_running_requests", Kind: space.KindCategorical, Choices: []any{8, 16, 32, 64}},
			{Name: "gpu_memory_fraction", Kind: space.KindCategorical, Choices: []any{0.1, 0.9}},
		}},
	}
	trials := []store.Trial{
		storedTrial(0, nil, 8, 1000, 100),
		storedTrial(1, nil, 64, 1300, 100), // lucky: its runs are lower
		storedTrial(2, nil, 32, 1200, 100),
		storedTrial(3, nil, 16, 5000, 9000), // misses the SLO
		storedTrial(4, ip(1), 64, 1000, 100), storedTrial(5, ip(1), 64, 1010, 100),
		storedTrial(6, ip(2), 32, 1190, 100), storedTrial(7, ip(2), 32, 1210, 100),
	}
	rec, err := RecommendStudy(trials, terms, PreferThroughput)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Best.Trial != 2 || rec.Best.Runs() != 3 || rec.RunnerUp == nil || rec.RunnerUp.Trial != 1 {
		t.Fatalf("best %d (%d runs), runner-up %+v; want trial 2 of 3 runs, runner-up 1", rec.Best.Trial, rec.Best.Runs(), rec.RunnerUp)
	}
	if rec.Best.Mean != 1200 || !(rec.Best.CI[0] < 1200 && rec.Best.CI[1] > 1200) {
		t.Errorf("best mean %g CI %v", rec.Best.Mean, rec.Best.CI)
	}
	if rec.Separated {
		t.Errorf("1200 (sd 10) vs 1103 (sd 170), 3 runs each: Welch's interval holds 0, want not separated")
	}
	// Trial 0 was never confirmed: with confirmation runs it cannot win.
	for _, c := range []*Candidate{&rec.Best, rec.RunnerUp} {
		if c.Trial == 0 || c.Trial == 3 {
			t.Errorf("trial %d competes", c.Trial)
		}
	}
	// A consistent gap is separated.
	trials[1] = storedTrial(1, nil, 64, 1005, 100)
	if rec, err = RecommendStudy(trials, terms, PreferThroughput); err != nil || !rec.Separated || rec.Best.Trial != 2 {
		t.Errorf("1200 vs 1005 (sd 5): %+v, %v; want trial 2, separated", rec, err)
	}
	// Two close configurations are not separated.
	trials = []store.Trial{
		storedTrial(0, nil, 8, 1000, 100), storedTrial(1, nil, 16, 1005, 100),
		storedTrial(2, ip(0), 8, 1040, 100), storedTrial(3, ip(0), 8, 960, 100),
		storedTrial(4, ip(1), 16, 1045, 100), storedTrial(5, ip(1), 16, 965, 100),
	}
	rec, err = RecommendStudy(trials, terms, PreferThroughput)
	if err != nil || rec.Separated || rec.RunnerUp == nil {
		t.Errorf("close candidates: %+v, %v; want a runner-up, not separated", rec, err)
	}
	// A configuration the space no longer holds (a --force-spec narrowed
	// it) is not recommended, however fast; alone, it is said why.
	outside := storedTrial(1, nil, 128, 9000, 100)
	rec, err = RecommendStudy([]store.Trial{storedTrial(0, nil, 8, 1000, 100), outside}, terms, PreferThroughput)
	if err != nil || rec.Best.Trial != 0 || rec.RunnerUp != nil {
		t.Errorf("with a trial outside the space: %+v, %v; want trial 0 alone", rec, err)
	}
	if _, err = RecommendStudy([]store.Trial{outside}, terms, PreferThroughput); err == nil || !strings.Contains(err.Error(), "1 trial(s) lie outside the current space") {
		t.Errorf("only a trial outside the space: %v", err)
	}
}

// TestRecommendStudyRanksByObjective: PreferObjective ranks by the study's
// tuner.objective, not throughput: a trial with less throughput and more
// goodput wins under "max goodput_per_gpu"; --prefer takes any metric.
func TestRecommendStudyRanksByObjective(t *testing.T) {
	terms := Terms{
		Objectives: []Objective{{Metric: "output_throughput_per_gpu", Maximize: true}},
		Objective:  Objective{Metric: "goodput_per_gpu", Maximize: true},
		SLO:        SLO{{Metric: "ttft_p99", Max: 2000}},
		Space: space.Space{Params: []space.Param{
			{Name: "max_running_requests", Kind: space.KindCategorical, Choices: []any{8, 16}},
		}},
	}
	fast := storedTrial(0, nil, 8, 2000, 100)
	fast.LoadPoints[0].Summary.RequestGoodput = 5
	good := storedTrial(1, nil, 16, 1500, 100)
	good.LoadPoints[0].Summary.RequestGoodput = 9
	trials := []store.Trial{fast, good}
	rec, err := RecommendStudy(trials, terms, PreferObjective)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Best.Trial != 1 || rec.Best.Metric != "goodput_per_gpu" {
		t.Errorf("objective max goodput_per_gpu: best trial %d by %s, want trial 1 by goodput_per_gpu", rec.Best.Trial, rec.Best.Metric)
	}
	if rec, _ = RecommendStudy(trials, terms, PreferThroughput); rec.Best.Trial != 0 {
		t.Errorf("prefer throughput: best trial %d, want 0", rec.Best.Trial)
	}
	p, err := ParsePreference("goodput_per_gpu")
	if err != nil || p != "max goodput_per_gpu" {
		t.Fatalf("ParsePreference(goodput_per_gpu) = %q, %v", p, err)
	}
	if p, err = ParsePreference("ttft_p90"); err != nil || p != "min ttft_p90" {
		t.Errorf("ParsePreference(ttft_p90) = %q, %v; want min ttft_p90", p, err)
	}
	if _, err := ParsePreference("speed"); err == nil || !strings.Contains(err.Error(), "goodput_per_gpu") {
		t.Errorf("ParsePreference(speed) = %v; want an error listing the metrics", err)
	}
	if d := PreferObjective.For(terms.Objective).Describe(terms.Objective); d != "max goodput_per_gpu (the study's objective)" {
		t.Errorf("Describe = %q", d)
	}
}

// TestSLORisks: a recommendation whose interval crosses an SLO limit says
// so; one whose interval lies within it does not.
func TestSLORisks(t *testing.T) {
	c := Candidate{Values: []float64{1, 1, 1}}
	for _, ttft := range []float64{700, 1400, 1500} {
		lv := storedTrial(0, nil, 8, 1000, ttft).LoadPoints[0]
		c.Levels = append(c.Levels, Point{GPUs: 1, Level: lv})
	}
	slo := SLO{{Metric: "ttft_p99", Max: 1500}, {Metric: ErrorRate, Max: 0.01}}
	risks := c.SLORisks(slo)
	if len(risks) != 1 || !strings.Contains(risks[0], "ttft_p99") || !strings.Contains(risks[0], "1500 ms") {
		t.Fatalf("SLORisks = %q; want one naming ttft_p99 and 1500 ms", risks)
	}
	if r := c.SLORisks(SLO{{Metric: "ttft_p99", Max: 5000}}); r != nil {
		t.Errorf("interval within 5000 ms: SLORisks = %q, want none", r)
	}
}

// TestFigures: every figure a recommendation shows is a metric of the
// table, shown once, and among them are the default objectives and each
// latency an SLO can limit, so that a recommendation shows what it was
// judged by.
func TestFigures(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range Figures() {
		if _, ok := measure.LookupMetric(name); !ok {
			t.Errorf("figure %q is not in the metric table", name)
		}
		if seen[name] {
			t.Errorf("figure %q listed twice", name)
		}
		seen[name] = true
	}
	for _, name := range []string{"output_throughput_per_gpu", "tokens_per_user", "ttft_p99", "tpot_p99", "e2el_p99"} {
		if !seen[name] {
			t.Errorf("figures lack %s", name)
		}
	}
	Figures()[0] = "changed"
	if Figures()[0] == "changed" {
		t.Error("Figures hands out its own list")
	}
}

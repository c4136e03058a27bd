package sim

import (
	"strings"
	"testing"
)

// TestErrorBandFromSuite: a row's band is the fidelity suite's p90 error of
// its metrics in its regimes (medians.json), the widest of them.
func TestErrorBandFromSuite(t *testing.T) {
	mod := suite.Regimes["moderate"]["itl"].P90
	tp := suite.ByLoad["tp>1"]["moderate"]["itl"].P90 // 20 runs: the tp>1 runs at moderate load
	if mod == 0 || tp == 0 {
		t.Fatalf("medians.json lacks moderate itl or tp>1 itl at moderate load: %v", suite)
	}
	b, why := ErrorBand(Situation{Regime: RegimeModerate, Metrics: []string{"itl"}})
	if b != mod || !strings.Contains(why, "moderate") {
		t.Errorf("moderate itl: %v %q, want %v", b, why, mod)
	}
	b, _ = ErrorBand(Situation{Regime: RegimeModerate, TP: 2, Metrics: []string{"itl"}})
	if b != max(mod, tp) {
		t.Errorf("moderate TP2 itl: %v, want %v", b, max(mod, tp))
	}
	both, _ := ErrorBand(Situation{Regime: RegimeModerate, Metrics: []string{"itl", "e2e"}})
	if both != max(mod, suite.Regimes["moderate"]["e2e"].P90) {
		t.Errorf("itl and e2e: %v", both)
	}
	// A regime without runs of the metric takes the whole suite's figure.
	if _, ok := suite.Regimes["saturation"]["ttft"]; !ok {
		b, why = ErrorBand(Situation{Regime: RegimeSaturation, Metrics: []string{"ttft"}})
		if b != suite.Regimes["all"]["ttft"].P90 || !strings.Contains(why, "runs of every regime (none saturation)") {
			t.Errorf("saturation ttft: %v %q", b, why)
		}
	}
}

// TestCalibratedBandCoversEveryMetric: a fit that left TPOT 3% off and
// TTFT 28% off gives a row whose verdict rests on both a ±28% band, not
// the ±5% of the TPOT error alone.
func TestCalibratedBandCoversEveryMetric(t *testing.T) {
	p := Profile{Errors: []MetricError{{Metric: "tpot_p99", MaxAfter: 0.03}, {Metric: "ttft_p99", MaxAfter: 0.28}}}
	b, why := CalibratedBand(p, Situation{Regime: RegimeModerate, Metrics: []string{"ttft", "itl", "throughput"}})
	if b != 0.28 || !strings.Contains(why, "ttft_p99") {
		t.Errorf("band %v (%s), want 0.28 from ttft_p99", b, why)
	}
	b, _ = CalibratedBand(p, Situation{Regime: RegimeModerate, Metrics: []string{"itl", "throughput"}})
	if b != 0.05 {
		t.Errorf("TPOT-bound row: band %v, want the 5%% floor", b)
	}
	// A limit the fit did not measure takes the suite's band for it.
	b, why = CalibratedBand(p, Situation{Regime: RegimeModerate, Metrics: []string{"e2e"}})
	if want := suite.Regimes["moderate"]["e2e"].P90; b != max(want, 0.05) || !strings.Contains(why, "measured no e2e") {
		t.Errorf("e2e row: %v %q, want %v", b, why, want)
	}
}

// TestErrorBandSpeculative: a speculative prediction's throughput band is
// the wider of its load regime's and the suite's speculative regime's p90.
func TestErrorBandSpeculative(t *testing.T) {
	plain := Situation{Regime: RegimeLight, TP: 1, Metrics: []string{"throughput"}}
	spec := plain
	spec.Speculative = true
	p, _ := ErrorBand(plain)
	s, basis := ErrorBand(spec)
	want := suite.Regimes["speculative"]["throughput"].P90
	if !(want > 0) || s != max(p, want) || s == want && !strings.Contains(basis, "speculative") {
		t.Errorf("speculative band %.3f (%s), plain %.3f, suite p90 %.3f", s, basis, p, want)
	}
	if got := spec.Regimes(); got[len(got)-1] != "speculative" {
		t.Errorf("regimes %v", got)
	}
}

// TestDisaggregatedBand: a disaggregated prediction's band takes the
// suite's disaggregated regime too, never narrower than without it.
func TestDisaggregatedBand(t *testing.T) {
	s := Situation{Regime: RegimeModerate, TP: 4, Metrics: []string{"ttft", "itl"}}
	agg, _ := ErrorBand(s)
	s.Disaggregated = true
	dis, basis := ErrorBand(s)
	if dis < agg {
		t.Errorf("band %.2f (%s) below the aggregated %.2f", dis, basis, agg)
	}
	if st, ok := suite.Regimes["disaggregated"]["ttft"]; !ok || dis < st.P90 {
		t.Errorf("band %.2f below the disaggregated regime's ttft p90 %+v", dis, st)
	}
}

// TestErrorBandStructuralWithinLoad: a structural regime's figure is its
// runs' within the row's load regime where it has MinBandRuns runs of the
// metric there, else its runs' under every Poisson load, else nothing for
// a row under load. Against a suite whose tp>1 itl p90 is 46% over every
// load (bursts) and 20% over 20 runs at moderate load, a moderate TP2 itl
// row takes 20%, not the bursts' 46%.
func TestErrorBandStructuralWithinLoad(t *testing.T) {
	saved := suite
	defer func() { suite = saved }()
	suite = suiteFigures{
		Regimes: map[string]map[string]suiteStat{
			"moderate": {"itl": {N: 30, P90: 0.10}},
			"offline":  {"itl": {N: 40, P90: 0.60}},
			"tp>1":     {"itl": {N: 70, P90: 0.46}},
		},
		ByLoad: map[string]map[string]map[string]suiteStat{
			"tp>1": {"moderate": {"itl": {N: MinBandRuns, P90: 0.20}}, "offline": {"itl": {N: 40, P90: 0.60}}},
		},
	}
	s := Situation{Regime: RegimeModerate, TP: 2, Metrics: []string{"itl"}}
	b, why := ErrorBand(s)
	if b != 0.20 || !strings.Contains(why, "20 tp>1 runs at moderate load") {
		t.Errorf("moderate TP2 itl: %v %q, want 0.20 from the tp>1 runs at moderate load", b, why)
	}
	// Too few at moderate load: the tp>1 runs under Poisson load, never
	// the bursts', and nothing when too few are under load either.
	suite.ByLoad["tp>1"]["moderate"]["itl"] = suiteStat{N: MinBandRuns - 1, P90: 0.20}
	suite.ByLoad["tp>1"]["poisson"] = map[string]suiteStat{"itl": {N: 25, P90: 0.25}}
	b, why = ErrorBand(s)
	if b != 0.25 || !strings.Contains(why, "25 tp>1 runs under load (19 at moderate load, fewer than 20)") {
		t.Errorf("moderate TP2 itl, 19 moderate tp>1 runs: %v %q, want 0.25 from the tp>1 runs under load", b, why)
	}
	suite.ByLoad["tp>1"]["poisson"]["itl"] = suiteStat{N: MinBandRuns - 1, P90: 0.25}
	if b, why = ErrorBand(s); b != 0.10 {
		t.Errorf("moderate TP2 itl, 19 tp>1 runs under load: %v %q, want the moderate runs' 0.10", b, why)
	}
	// A load regime without the metric takes the runs under load, not the
	// bursts' (here a throughput measured only offline).
	suite.Regimes["all"] = map[string]suiteStat{"throughput": {N: 41, P90: 1.47}}
	suite.ByLoad["all"] = map[string]map[string]suiteStat{"poisson": {"throughput": {N: 1, P90: 0.65}}}
	b, why = ErrorBand(Situation{Regime: RegimeModerate, Metrics: []string{"itl", "throughput"}})
	if b != 0.10 || strings.Contains(why, "throughput") {
		t.Errorf("moderate itl and throughput: %v %q, want the moderate itl's 0.10 (one throughput run under load is too few)", b, why)
	}
	suite.ByLoad["all"]["poisson"]["throughput"] = suiteStat{N: MinBandRuns, P90: 0.30}
	if b, why = ErrorBand(Situation{Regime: RegimeModerate, Metrics: []string{"itl", "throughput"}}); b != 0.30 || !strings.Contains(why, "20 runs under load (none moderate)") {
		t.Errorf("moderate itl and throughput: %v %q, want 0.30 from the throughput runs under load", b, why)
	}
	if b, _ = ErrorBand(Situation{Regime: RegimeOffline, Metrics: []string{"throughput"}}); b != 1.47 {
		t.Errorf("offline throughput: %v, want every run's 1.47", b)
	}
	// A burst TP row still takes the offline figures.
	b, _ = ErrorBand(Situation{Regime: RegimeOffline, TP: 2, Metrics: []string{"itl"}})
	if b != 0.60 {
		t.Errorf("offline TP2 itl: %v, want 0.60", b)
	}
}

// TestRecordedBandsWithinLoad: on the recorded suite, a moderate TP2 row's
// itl band is the wider of the moderate runs' p90 and the tp>1 runs' under
// load (at moderate load where they are MinBandRuns), from no offline or
// closed-loop run, and from no group of fewer than MinBandRuns runs.
func TestRecordedBandsWithinLoad(t *testing.T) {
	mod := suite.Regimes["moderate"]["itl"]
	in := suite.ByLoad["tp>1"]["moderate"]["itl"]
	if in.N < MinBandRuns {
		in = suite.ByLoad["tp>1"]["poisson"]["itl"]
	}
	if in.N < MinBandRuns {
		t.Fatalf("medians.json: tp>1 itl under load %+v, want at least %d runs", in, MinBandRuns)
	}
	b, why := ErrorBand(Situation{Regime: RegimeModerate, TP: 2, Metrics: []string{"itl"}})
	if b != max(mod.P90, in.P90) {
		t.Errorf("moderate TP2 itl: %v %q, want max(%v, %v)", b, why, mod.P90, in.P90)
	}
	if strings.Contains(why, "offline") || strings.Contains(why, "every load") {
		t.Errorf("moderate TP2 itl band from %q", why)
	}
	// The Poisson figures hold no closed-loop run: the silicon tables'
	// hundreds of concurrency runs are not among them.
	if all, conc := suite.ByLoad["all"]["poisson"]["ttft"], suite.ByLoad["all"]["concurrency"]["ttft"]; conc.N > 0 && all.N >= conc.N {
		t.Errorf("medians.json: %d Poisson ttft runs with %d closed-loop ones beside them: the Poisson figure holds the closed loops", all.N, conc.N)
	}
}

// TestSplitBand: a row with an engine takes the narrowest band group of
// its load, engine and context with MinBandRuns runs, never the runs at
// a fixed concurrency, and adds the moe runs' figure on an MoE row.
func TestSplitBand(t *testing.T) {
	saved := suite
	defer func() { suite = saved }()
	suite = suiteFigures{
		Regimes: map[string]map[string]suiteStat{"moe": {"ttft": {N: 30, P90: 0.50}}},
		ByLoad:  map[string]map[string]map[string]suiteStat{"moe": {"moderate": {"ttft": {N: MinBandRuns, P90: 0.40}}}},
		Bands: map[string]map[string]suiteStat{
			"moderate/vllm/long-context": {"ttft": {N: 2, P90: 1.10}},
			"moderate/vllm":              {"ttft": {N: 29, P90: 0.17}, "itl": {N: 32, P90: 0.13}},
			"poisson/vllm":               {"ttft": {N: 35, P90: 0.47}},
			"poisson":                    {"ttft": {N: 46, P90: 0.48}},
			"concurrency/vllm":           {"ttft": {N: 138, P90: 4.31}},
		},
	}
	s := Situation{Regime: RegimeModerate, Engine: "vllm", LongContext: true, TP: 4, Metrics: []string{"ttft", "itl", "throughput"}}
	b, why := ErrorBand(s)
	if b != 0.17 || !strings.Contains(why, "29 vllm runs at moderate load") {
		t.Errorf("moderate vLLM long-context row: %v %q, want 0.17 from the 29 vLLM runs at moderate load (2 long-context are too few)", b, why)
	}
	s.Regime = RegimeSaturation
	if b, why = ErrorBand(s); b != 0.47 || !strings.Contains(why, "35 vllm runs at Poisson load") {
		t.Errorf("saturation row: %v %q, want the Poisson vLLM runs' 0.47", b, why)
	}
	s.Regime, s.MoE = RegimeModerate, true
	if b, why = ErrorBand(s); b != 0.40 || !strings.Contains(why, "moe") {
		t.Errorf("moderate MoE row: %v %q, want the moe runs' 0.40 at moderate load", b, why)
	}
	s.Engine, s.MoE = "sglang", false
	if b, why = ErrorBand(s); b != 0.48 {
		t.Errorf("SGLang row: %v %q, want every Poisson run's 0.48", b, why)
	}
}

// TestClosedLoopBandsAreTheClosedLoops takes a closed loop's band from the
// suite's runs at a fixed concurrency alone: TTFT and TPOT from them, and
// no band for E2E, which those runs do not report, rather than the
// Poisson runs' figure.
func TestClosedLoopBandsAreTheClosedLoops(t *testing.T) {
	for _, m := range []string{"ttft", "itl"} {
		band, basis := ErrorBand(Situation{Regime: RegimeConcurrency, Engine: "vllm", Metrics: []string{m}})
		if band <= 0 || !strings.Contains(basis, "at concurrency load") {
			t.Errorf("%s: band %g, basis %q: want the closed loops' figure", m, band, basis)
		}
	}
	if band, basis := ErrorBand(Situation{Regime: RegimeConcurrency, Engine: "vllm", Metrics: []string{"e2e"}}); basis != "" {
		t.Errorf("e2e: band %g from %q, want none: no closed-loop run reports it", band, basis)
	}
	if _, basis := ErrorBand(Situation{Regime: RegimeConcurrency, Metrics: []string{"ttft"}}); !strings.Contains(basis, "concurrency") {
		t.Errorf("engine unknown: basis %q, want the closed loops' runs", basis)
	}
}

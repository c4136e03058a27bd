package sim

import (
	"strings"
	"testing"
)

// TestErrorBandFromSuite: a row's band is the fidelity suite's p90 error of
// its metrics in its regimes (medians.json), the widest of them.
func TestErrorBandFromSuite(t *testing.T) {
	mod := suite["moderate"]["itl"].P90
	tp := suite["tp>1"]["itl"].P90
	if mod == 0 || tp == 0 {
		t.Fatalf("medians.json lacks moderate or tp>1 itl: %v", suite)
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
	if both != max(mod, suite["moderate"]["e2e"].P90) {
		t.Errorf("itl and e2e: %v", both)
	}
	// A regime without runs of the metric takes the whole suite's figure.
	if _, ok := suite["saturation"]["ttft"]; !ok {
		b, why = ErrorBand(Situation{Regime: RegimeSaturation, Metrics: []string{"ttft"}})
		if b != suite["all"]["ttft"].P90 || !strings.Contains(why, "all runs (none saturation)") {
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
	if want := suite["moderate"]["e2e"].P90; b != max(want, 0.05) || !strings.Contains(why, "measured no e2e") {
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
	want := suite["speculative"]["throughput"].P90
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
	if st, ok := suite["disaggregated"]["ttft"]; !ok || dis < st.P90 {
		t.Errorf("band %.2f below the disaggregated regime's ttft p90 %+v", dis, st)
	}
}

package recommend

import (
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

// TestSLOErrorRate: by default a level with any failed request misses the
// SLO and says why; slo.error_rate bounds the failed share instead.
func TestSLOErrorRate(t *testing.T) {
	half := Point{GPUs: 1, Level: measure.Level{Summary: measure.Summary{Completed: 4, Failed: 4,
		TTFT: measure.Stats{N: 4, P99: 100}}}}
	none := SLO{{Metric: "ttft_p99", Max: 500}}
	if none.Met(half) || !strings.Contains(none.Miss(half), "4 of 8 requests failed (50%; the SLO allows none") {
		t.Errorf("no error budget: met %v, %q", none.Met(half), none.Miss(half))
	}
	for _, tc := range []struct {
		rate float64
		met  bool
	}{{0.49, false}, {0.5, true}, {0.6, true}} {
		slo := append(SLO{{Metric: ErrorRate, Max: tc.rate}}, none...)
		if slo.Met(half) != tc.met {
			t.Errorf("error_rate %g: met %v, want %v (%s)", tc.rate, !tc.met, tc.met, slo.Miss(half))
		}
	}
	if g := append(SLO{{Metric: ErrorRate, Max: 0.1}}, none...).Goodput(); g.TTFTms != 500 {
		t.Errorf("goodput limits %+v", g)
	}
	slo, err := ParseSLO("ttft_p99_ms=500,error_rate=0.01")
	if err != nil || slo.MaxErrorRate() != 0.01 || slo.String() != "error_rate<=1% ttft_p99<=500ms" {
		t.Errorf("ParseSLO: %v, %v", slo, err)
	}
	for _, bad := range []string{"error_rate=1", "error_rate=-0.1", "error_rate=x", "error_rate=0.1,error_rate=0.2"} {
		if _, err := ParseSLO(bad); err == nil {
			t.Errorf("ParseSLO(%q) accepted", bad)
		}
	}
}

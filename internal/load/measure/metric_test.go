package measure

import (
	"testing"
)

// TestMetricTable: names are unique, every metric has a unit and a
// direction, and each reads its Summary field.
func TestMetricTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Metrics() {
		if seen[m.Name] {
			t.Errorf("%s twice", m.Name)
		}
		seen[m.Name] = true
		if m.Unit == "" || (m.Better != Lower && m.Better != Higher) {
			t.Errorf("%s: unit %q, better %v", m.Name, m.Unit, m.Better)
		}
		if (m.Series != "") != (m.Unit == "ms") {
			t.Errorf("%s: series %q with unit %q", m.Name, m.Series, m.Unit)
		}
	}
	var s Summary
	s.TTFT = Stats{N: 3, Mean: 10, Median: 9, P50: 9, P90: 12, P95: 13, P99: 14}
	s.TPOT = Stats{N: 3, Median: 20, P50: 20}
	s.OutputThroughput = 800
	s.RequestGoodput = 3
	sub := Subject{Level: Level{Summary: s, Load: Load{Rate: 4}}, GPUs: 2, Price: 2}
	for name, want := range map[string]float64{
		"ttft_mean": 10, "ttft_p50": 9, "ttft_median": 9, "ttft_p99": 14, "tpot_p50": 20,
		"output_throughput": 800, "output_throughput_per_gpu": 400, "goodput_per_gpu": 1.5,
		"request_rate_per_gpu": 2, "tokens_per_user": 50, "cost_per_mtok": CostPerMTok(2, 2, 800),
	} {
		m, ok := LookupMetric(name)
		if !ok {
			t.Errorf("%s: not in the table", name)
			continue
		}
		if v, ok := m.Read(sub); !ok || v != want {
			t.Errorf("%s = %v, %v; want %v", name, v, ok, want)
		}
	}
	for _, name := range []string{"itl_p99", "output_tokens_per_joule"} {
		if m, _ := LookupMetric(name); m.read != nil {
			if v, ok := m.Read(sub); ok {
				t.Errorf("%s = %v with no value measured", name, v)
			}
		}
	}
	if _, ok := s.Latency("output_throughput"); ok {
		t.Error("Latency reads a throughput")
	}
	if v, ok := s.Latency("ttft_median"); !ok || v != 9 {
		t.Errorf("Latency(ttft_median) = %v, %v", v, ok)
	}
	if got, want := LatencyMetrics(), "ttft, tpot, itl or e2el with _mean, _p50, _p90, _p95 or _p99"; got != want {
		t.Errorf("LatencyMetrics() = %q, want %q", got, want)
	}
}

func TestSLOLimit(t *testing.T) {
	var slo SLO
	for _, s := range []string{"ttft", "tpot", "e2el"} {
		*slo.Limit(s) = 1
	}
	if slo != (SLO{TTFTms: 1, TPOTms: 1, E2ELms: 1}) || slo.Limit("itl") != nil {
		t.Errorf("Limit: %+v", slo)
	}
}

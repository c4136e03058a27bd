package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

// TestBenchEngineTableLabelsBuckets: a scraped server percentile is
// printed as the histogram bucket that holds it, under a header that
// says so, never as an interpolated figure beside the client's exact
// ones (queue time mean 0 ms with a p50 of 150 ms was the artefact).
func TestBenchEngineTableLabelsBuckets(t *testing.T) {
	s := measure.Summary{TTFT: measure.Stats{N: 10, Mean: 40}, Engine: &measure.EngineMetrics{Engine: "vllm", Source: "scrape", Samples: 3, IntervalS: 0.5,
		QueueTime: &measure.ServerLatency{Count: 10, MeanMs: 0, P50Ms: 150, P99Ms: 297,
			P50Bucket: &measure.Bucket{HiMs: 300}, P99Bucket: &measure.Bucket{HiMs: 300}},
		TTFT: &measure.ServerLatency{Count: 10, MeanMs: 38, P50Ms: 35, P99Ms: 20000,
			P50Bucket: &measure.Bucket{LoMs: 20, HiMs: 40}, P99Bucket: &measure.Bucket{LoMs: 20000, Open: true}}}}
	var b bytes.Buffer
	printEngine(&b, s)
	out := b.String()
	for _, want := range []string{"server p50 (histogram bucket)", "server mean (exact)", "≤ 300", "20-40", "> 20000"} {
		if !strings.Contains(out, want) {
			t.Errorf("engine table lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"150.00", "297.00", "35.00"} {
		if strings.Contains(out, bad) {
			t.Errorf("engine table prints %s, finer than its bucket:\n%s", bad, out)
		}
	}
}

package guided

import (
	"context"
	"testing"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

// TestForecastBounded: one forecast of a capacity search over the request
// rate simulates a bounded number of requests and keeps no records, so
// that forecasting a space holds the summaries of its levels alone (a
// probe of rate x 30 s requests keeping every record would take a guided
// study of a 24B model to 12.7 GB).
func TestForecastBounded(t *testing.T) {
	study, err := spec.ParseSpec([]byte(`name: f
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [256]}
workload:
  dataset: {kind: random, input: 64, output: 16}
  load: {capacity: rate}
  requests_per_level: 64
slo: {ttft_p99_ms: 2000, tpot_p99_ms: 100}
tuner: {trials: 2}
`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := newForecaster(study)
	fc := f.run(context.Background(), space.Settings{"max_running_requests": 256}, sim.Constants{}, 0)
	if fc.Failure != "" || !fc.Met || fc.Best == nil {
		t.Fatalf("forecast failed or met no level: %+v", fc)
	}
	// The capacity is far above the rate (68 req/s) at which a 30 s probe
	// reaches the bound, so the bound is what holds the count.
	if fc.Best.Summary.RequestRate < 4*tuner.ForecastProbeRequests/30 {
		t.Fatalf("capacity %.1f req/s: too low to test the bound", fc.Best.Summary.RequestRate)
	}
	n := f.requests.Load()
	if limit := int64(len(fc.pts) * tuner.ForecastProbeRequests); n > limit || n == 0 {
		t.Errorf("%d probes simulated %d requests, want at most %d", len(fc.pts), n, limit)
	}
	for _, p := range fc.pts {
		if p.Records != nil {
			t.Fatalf("a forecast kept %d records of its level at %s", len(p.Records), p.Label)
		}
	}
	t.Logf("capacity %.1f req/s, %d probes, %d simulated requests", fc.Best.Summary.RequestRate, len(fc.pts), n)
}

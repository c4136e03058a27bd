package guided

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/servetune/servetune/tuner/sampler"
)

// TestForecastProgressAndStored: the guided sampler tells how far its
// forecast is, one configuration at a time up to every one it forecast,
// and its stored view puts each value's best configuration first (so the
// store's bound keeps the figure a report shows for it), with the
// forecast's figure in the objective's unit.
func TestForecastProgressAndStored(t *testing.T) {
	study := mustSpec(t, `name: p
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: [8, 16, 32, 64, 128, 256]
  gpu_memory_fraction: [0.8, 0.9]
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [32]}
  requests_per_level: 32
  warmup: 0
slo: {ttft_p99_ms: 60000}
tuner: {sampler: guided, trials: 8, seed: 1, objective: max output_throughput_per_gpu, confirm: false}
`)
	var calls [][2]int
	var notes []string
	s, err := New(context.Background(), study, sampler.Hooks{
		Note:     func(msg string) { notes = append(notes, msg) },
		Forecast: func(done, total int) { calls = append(calls, [2]int{done, total}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no forecast progress told")
	}
	for i, c := range calls {
		if c[0] > c[1] || (i > 0 && (c[0] < calls[i-1][0] || c[1] < calls[i-1][1])) {
			t.Fatalf("progress %v after %v: done and total must only grow, done within total", c, calls[max(i-1, 0)])
		}
	}
	if last := calls[len(calls)-1]; last != [2]int{12, 12} {
		t.Errorf("last progress %v, want every one of the 12 configurations done", last)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "guided: forecast 12 configurations in ") {
		t.Errorf("the forecast's end note does not say how long it took: %q", notes)
	}

	fcs := s.(*Sampler).Forecasts()
	if len(fcs) != 12 {
		t.Fatalf("%d forecasts stored, want the 12 configurations", len(fcs))
	}
	best := map[string]float64{}
	for _, f := range fcs {
		k := fmt.Sprint(f.Settings["max_running_requests"])
		if f.Met && f.Value <= 0 {
			t.Errorf("%v meets the SLO with figure %g", f.Settings, f.Value)
		}
		best[k] = max(best[k], f.Value)
	}
	// Each value's best comes within the first 6+2 (the values of both
	// parameters): a bound that keeps 8 rows keeps every value's figure.
	first := map[string]int{}
	for i, f := range fcs {
		k := fmt.Sprint(f.Settings["max_running_requests"])
		if _, ok := first[k]; !ok {
			first[k] = i
			if f.Value != best[k] {
				t.Errorf("max_running_requests=%s first appears with %g, its best is %g", k, f.Value, best[k])
			}
		}
	}
	for k, i := range first {
		if i >= 8 {
			t.Errorf("max_running_requests=%s first appears at row %d, want within the first 8", k, i)
		}
	}
	if fcs[0].Value < 100 {
		t.Errorf("best forecast %g tok/s/GPU: not in the objective's unit", fcs[0].Value)
	}
}

package bench

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSummaryJSONRoundTrip(t *testing.T) {
	records := []Record{
		rec(0, 0, 0, []float64{50, 60, 70, 80}, []int{1, 1, 1, 1}, 4),
		rec(1, 100, 101, []float64{150, 190, 230}, []int{1, 4, 4}, 9),
		{Index: 2, Send: time2(5), End: time2(9), Error: ErrConnect},
	}
	s := Summarize(records, SummaryOptions{Seed: 1, Bootstrap: 100, KeepSamples: true})
	s.Meta = map[string]any{"model": "m", "seed": float64(1)}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var flat map[string]any
	if err := json.Unmarshal(raw, &flat); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"duration", "completed", "failed", "errors", "total_input_tokens", "total_output_tokens",
		"request_throughput", "output_throughput", "total_token_throughput", "request_goodput",
		"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "p999_ttft_ms",
		"median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_e2el_ms", "median_itl_per_token_ms", "p99_queue_ms",
		"median_ttft_from_sched_ms", "median_ttft_ms_ci", "p99_e2el_ms_ci", "n_ttft", "meta", "samples"} {
		if _, ok := flat[k]; !ok {
			t.Errorf("no key %q", k)
		}
	}
	if errs := flat["errors"].(map[string]any); len(errs) != len(ErrorClasses) || errs["connect"].(float64) != 1 {
		t.Errorf("errors %v", errs)
	}
	var back Summary
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, s)
	}
}

func TestSummaryReadsVLLMResult(t *testing.T) {
	// A vLLM benchmark_serving result file has the flat keys only.
	raw := `{"duration": 10.5, "completed": 100, "total_output_tokens": 12800, "median_ttft_ms": 45.5, "p99_itl_ms": 30.1, "mean_tpot_ms": 12}`
	var s Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	if s.Completed != 100 || s.TTFT.Median != 45.5 || s.ITL.P99 != 30.1 || s.TPOT.Mean != 12 {
		t.Errorf("read %+v", s)
	}
}

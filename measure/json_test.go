package measure

import (
	"encoding/json"
	"math/rand/v2"
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

func TestSummaryReadsVLLMInfRate(t *testing.T) {
	// vLLM writes an infinite request rate (its default) as the string
	// "inf", and with --save-detailed the per-request errors as a list.
	tests := []string{
		`{"request_rate": "inf", "burstiness": 1.0, "max_concurrency": null, "duration": 2, "completed": 10, "median_ttft_ms": 45.5}`,
		`{"request_rate": 4.0, "duration": 2, "completed": 10, "errors": ["", ""], "median_ttft_ms": 45.5}`,
	}
	for _, raw := range tests {
		var s Summary
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if s.Completed != 10 || s.TTFT.Median != 45.5 {
			t.Errorf("%s: read %+v", raw, s)
		}
	}
}

func TestCompare(t *testing.T) {
	mk := func(shift float64) Summary {
		var rs []Record
		for i := range 200 {
			base := float64(i % 20)
			rs = append(rs, rec(i, 0, 0, []float64{50 + base + shift, 60 + base + 2*shift, 70 + base + 3*shift}, []int{1, 1, 1}, 3))
		}
		return Summarize(rs, SummaryOptions{KeepSamples: true, Bootstrap: 100})
	}
	base, same, slower := mk(0), mk(0), mk(10)
	tests := []struct {
		name    string
		new     Summary
		wantSig bool
	}{
		{"identical runs", same, false},
		{"10 ms slower", slower, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := Compare(base, tc.new, newRNG(1, 1), 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 8 {
				t.Fatalf("%d diffs, want 8 (4 metrics × median, p99)", len(ds))
			}
			for _, d := range ds {
				if d.Metric == "ttft" && d.Stat == "median" && d.Significant != tc.wantSig {
					t.Errorf("%+v: significant %v, want %v", d, d.Significant, tc.wantSig)
				}
			}
		})
	}
	t.Run("no samples", func(t *testing.T) {
		if _, err := Compare(Summary{}, base, newRNG(1, 1), 10); err == nil {
			t.Error("want an error without samples")
		}
	})
}

// FuzzSummaryJSON: a result file of any content (bench compare reads
// them) decodes or fails with an error, and comparing a decoded one with
// itself neither panics nor finds a significant change.
func FuzzSummaryJSON(f *testing.F) {
	s := Summarize([]Record{{Index: 0, Send: 0, First: 20e6, Last: 60e6, End: 61e6, OutputTokens: 5, PromptTokens: 3,
		Chunks: []Chunk{{At: 20e6, Tokens: 1}, {At: 40e6, Tokens: 2}, {At: 60e6, Tokens: 2}}}}, SummaryOptions{Seed: 1})
	good, _ := json.Marshal(s)
	f.Add(good)
	f.Add([]byte(`{"completed": 3, "samples": {"ttft_ms": [1, 2, 3]}}`))
	f.Add([]byte(`{"median_ttft_ms": "fast"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got Summary
		if json.Unmarshal(raw, &got) != nil {
			return
		}
		ds, err := Compare(got, got, rand.New(rand.NewPCG(1, 2)), 50)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.Significant {
				t.Fatalf("a summary differs from itself: %+v", d)
			}
		}
	})
}

package measure

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
	for _, k := range []string{"duration", "completed", "failed", "error_counts", "total_input_tokens", "total_output_tokens",
		"request_throughput", "output_throughput", "total_token_throughput", "request_goodput",
		"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "p99.9_ttft_ms",
		"median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_e2el_ms", "median_itl_per_token_ms", "p99_queue_ms",
		"median_ttft_from_sched_ms", "median_ttft_ms_ci", "p99_e2el_ms_ci", "n_ttft", "meta", "samples"} {
		if _, ok := flat[k]; !ok {
			t.Errorf("no key %q", k)
		}
	}
	if errs := flat["error_counts"].(map[string]any); len(errs) != len(ErrorClasses) || errs["connect"].(float64) != 1 {
		t.Errorf("error_counts %v", errs)
	}
	var back Summary
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, s)
	}
}

// vllmKeys are the keys of `vllm bench serve --save-result
// --save-detailed` for a generation backend (vllm/benchmarks/serve.py:
// main_async's result_json, benchmark's result, process_one_metric for
// ttft, tpot, itl and e2el at the percentiles 99 and 99.9) with the JSON
// types vLLM writes: "number" (a float or an int), "int", "string",
// "null", "[int]", "[number]", "[[number]]", "[string]"; alternatives
// separated by |.
var vllmKeys = map[string]string{
	"date": "string", "endpoint_type": "string", "backend": "string", "label": "null|string",
	"model_id": "string", "tokenizer_id": "string|null", "num_prompts": "int",
	"request_rate": "number|inf", "burstiness": "number", "max_concurrency": "int|null",
	"duration": "number", "completed": "int", "failed": "int",
	"total_input_tokens": "int", "total_output_tokens": "int",
	"request_throughput": "number", "request_goodput": "number|null",
	"output_throughput": "number", "total_token_throughput": "number",
	"input_lens": "[int]", "output_lens": "[int]", "ttfts": "[number]", "itls": "[[number]]",
	"latencies": "[number]", "start_times": "[number]", "queue_times": "[number]",
	"generated_texts": "[string]", "errors": "[string]",
	"max_output_tokens_per_s": "number", "max_concurrent_requests": "int", "rtfx": "number",
}

func init() {
	for _, m := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, st := range []string{"mean", "median", "std", "p99", "p99.9"} {
			vllmKeys[st+"_"+m+"_ms"] = "number"
		}
	}
}

// jsonType says whether v, decoded from JSON with UseNumber, has type t.
func jsonType(v any, t string) bool {
	for _, alt := range strings.Split(t, "|") {
		ok := false
		switch alt {
		case "null":
			ok = v == nil
		case "string":
			_, ok = v.(string)
		case "inf":
			ok = v == "inf"
		case "number":
			_, ok = v.(json.Number)
		case "int":
			n, isNum := v.(json.Number)
			_, err := strconv.ParseInt(string(n), 10, 64)
			ok = isNum && err == nil
		default: // a list of the inner type
			l, isList := v.([]any)
			ok = isList && strings.HasPrefix(alt, "[")
			for _, e := range l {
				ok = ok && jsonType(e, alt[1:len(alt)-1])
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSummaryJSONIsVLLMs: a result file has every key of vLLM's with
// vLLM's JSON type, for an infinite rate (written "inf") and a finite one
// with a concurrency cap (vLLM then also writes the client queue time).
func TestSummaryJSONIsVLLMs(t *testing.T) {
	records := []Record{
		rec(0, 0, 0, []float64{50, 60, 70, 80}, []int{1, 1, 1, 1}, 4),
		rec(1, 50, 60, []float64{150, 190, 230}, []int{1, 4, 4}, 9),
		{Index: 2, Send: time2(5), End: time2(9), Error: ErrHTTP5xx, ErrorMsg: "HTTP 503: overloaded", PromptTokens: 7},
	}
	for _, tc := range []struct {
		name string
		rate float64
		conc int
		want map[string]string // keys beyond vllmKeys, or other types
	}{
		{"inf", 0, 0, map[string]string{"request_rate": "inf", "max_concurrency": "null"}},
		{"rate 4, concurrency 8", 4, 8, map[string]string{"request_rate": "number", "max_concurrency": "int",
			"mean_client_queue_time_ms": "number", "p99_client_queue_time_ms": "number",
			"mean_e2el_including_client_queue_ms": "number", "p99_e2el_including_client_queue_ms": "number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(records, SummaryOptions{Seed: 1, Bootstrap: 50, KeepSamples: true})
			s.Date, s.Backend, s.ModelID, s.TokenizerID, s.Burstiness = "20261203-184000", "openai", "m", "m", 1
			s.RequestRate, s.MaxConcurrency = tc.rate, tc.conc
			raw, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var flat map[string]any
			if err := dec.Decode(&flat); err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(vllmKeys)
			maps.Copy(want, tc.want)
			for k, typ := range want {
				v, ok := flat[k]
				if !ok {
					t.Errorf("no key %q", k)
				} else if !jsonType(v, typ) {
					t.Errorf("%s = %v: want %s", k, v, typ)
				}
			}
			if errs := flat["errors"].([]any); len(errs) != 3 || errs[0] != "" || errs[2] != "http_5xx: HTTP 503: overloaded" {
				t.Errorf("errors %v: want one string per request, empty for success", errs)
			}
			if n := flat["num_prompts"].(json.Number); n != "3" {
				t.Errorf("num_prompts %v, want 3", n)
			}
			if c := flat["max_concurrent_requests"].(json.Number); c != "2" {
				t.Errorf("max_concurrent_requests %v, want 2 (both requests streamed at once)", c)
			}
			if lens := flat["input_lens"].([]any); lens[2] != json.Number("7") {
				t.Errorf("input_lens %v: a failed request keeps its prompt length", lens)
			}
			var back Summary
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("round trip differs:\n got %+v\nwant %+v", back, s)
			}
		})
	}
}

// TestSummaryReadsEarlierFiles: servetune's earlier result files, with
// errors as counts by class, p999_ keys and request_rate 0 for inf, still
// read (bench compare reads old files).
func TestSummaryReadsEarlierFiles(t *testing.T) {
	raw := `{"duration": 2, "completed": 10, "failed": 3, "errors": {"connect": 2, "timeout": 1}, "max_concurrency": 8,
		"request_rate": 0, "p999_ttft_ms": 99.5, "median_ttft_ms": 45.5}`
	var s Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	if s.Errors["connect"] != 2 || s.Errors["timeout"] != 1 || s.TTFT.P999 != 99.5 || s.MaxConcurrency != 8 || s.RequestRate != 0 {
		t.Errorf("read %+v", s)
	}
	if err := json.Unmarshal([]byte(`{"request_rate": "fast"}`), &s); err == nil {
		t.Error(`request_rate "fast" read without an error`)
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

// TestCSVRate: the CSV writes an infinite rate as vLLM does, "inf", not
// 0 (a rate of zero requests per second), and names the p99.9 column as
// the JSON does.
func TestCSVRate(t *testing.T) {
	s := Summarize([]Record{rec(0, 0, 0, []float64{50, 60}, []int{1, 1}, 2)}, SummaryOptions{Bootstrap: 10})
	finite := s
	finite.RequestRate = 6.5
	var b bytes.Buffer
	if err := WriteCSV(&b, []Summary{s, finite}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "request_rate")
	if col < 0 || rows[1][col] != "inf" || rows[2][col] != "6.5" {
		t.Errorf("request_rate column %d: %v, %v; want inf, 6.5", col, rows[1], rows[2])
	}
	if !slices.Contains(rows[0], "p99.9_ttft_ms") || len(rows[0]) != len(rows[1]) {
		t.Errorf("header %v", rows[0])
	}
}

// TestCompareReadsVLLMDetailed: a vLLM --save-detailed file has no
// servetune samples; its per-request lists (seconds) stand in, so two of
// vLLM's own runs compare.
func TestCompareReadsVLLMDetailed(t *testing.T) {
	file := func(ttft float64) Summary {
		var b strings.Builder
		b.WriteString(`{"request_rate": "inf", "completed": 30, "errors": [`)
		for i := range 31 {
			if i > 0 {
				b.WriteString(",")
			}
			if i == 30 {
				b.WriteString(`"Bad Request"`)
			} else {
				b.WriteString(`""`)
			}
		}
		b.WriteString(`], "output_lens": [` + strings.Repeat("3,", 30) + `0], "ttfts": [`)
		for i := range 31 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%g", ttft+float64(i%3)/1000)
		}
		b.WriteString(`], "latencies": [` + strings.Repeat("0.5,", 30) + `0], "itls": [` + strings.Repeat("[0.1, 0.1],", 30) + `[]]}`)
		var s Summary
		if err := json.Unmarshal([]byte(b.String()), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	base, slower := file(0.040), file(0.080)
	if base.Samples == nil || len(base.Samples.TTFT) != 30 || base.Samples.TTFT[0] != 40 || len(base.Samples.ITL) != 60 {
		t.Fatalf("samples %+v", base.Samples)
	}
	ds, err := Compare(base, slower, newRNG(1, 1), 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Metric == "ttft" && d.Stat == "median" && (!d.Significant || d.Delta != 40) {
			t.Errorf("%+v: want +40 ms, significant", d)
		}
	}
}

package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// statFields lists the latency series of a Summary under their JSON
// names (latencySeries, the metric table's).
func (s *Summary) statFields() []struct {
	name string
	st   *Stats
} {
	out := make([]struct {
		name string
		st   *Stats
	}, len(latencySeries))
	for i, sr := range latencySeries {
		out[i].name, out[i].st = sr.name, sr.stats(s)
	}
	return out
}

// statKeys are the statistics written per metric, by key prefix. vLLM
// names a percentile p{str(p)} with p an int when whole: p99, p99.9
// (vllm/benchmarks/serve.py, process_one_metric).
func statKeys(st *Stats) []struct {
	k string
	v *float64
} {
	return []struct {
		k string
		v *float64
	}{
		{"mean", &st.Mean}, {"median", &st.Median}, {"std", &st.Std}, {"p50", &st.P50},
		{"p90", &st.P90}, {"p95", &st.P95}, {"p99", &st.P99}, {"p99.9", &st.P999},
	}
}

// summaryPlain has Summary's plain fields; the json:"-" fields are
// written by MarshalJSON.
type summaryPlain Summary

// MarshalJSON writes the summary with the keys and JSON types of vLLM's
// result file (`vllm bench serve --save-result --save-detailed`,
// vllm/benchmarks/serve.py): request_rate a number or "inf",
// max_concurrency null when unset, the per-request
// lists (Detail) and errors as one string per request; then servetune's
// extras: error_counts by class, n_m, median_m_ms_ci and p99_m_ms_ci
// ([low, high] bootstrap 95% intervals), p50/p90/p95 and more metrics.
func (s Summary) MarshalJSON() ([]byte, error) {
	// Every class present, on a copy: marshalling must not write to the
	// caller's map.
	errs := make(map[string]int, len(ErrorClasses)+len(s.Errors))
	for _, c := range ErrorClasses {
		errs[string(c)] = 0
	}
	for k, v := range s.Errors {
		errs[k] = v
	}
	s.Errors = errs
	plain, err := json.Marshal(summaryPlain(s))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(plain[:len(plain)-1]) // drop '}'
	put := func(k string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		fmt.Fprintf(&b, ",%q:%s", k, raw)
		return nil
	}
	var rate, conc any = "inf", nil
	if s.RequestRate > 0 {
		rate = json.RawMessage(num(s.RequestRate))
	}
	if s.MaxConcurrency > 0 {
		conc = s.MaxConcurrency
	}
	// Always a number (vLLM writes null without --goodput): without SLOs
	// every completed request is good, and stored studies rank on it.
	goodput := json.RawMessage(num(s.RequestGoodput))
	for _, kv := range []struct {
		k string
		v any
	}{
		{"endpoint_type", s.Backend}, {"label", nil}, {"request_rate", rate},
		{"max_concurrency", conc}, {"request_goodput", goodput}, {"rtfx", 0.0},
	} {
		if err := put(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	if d := s.Detail; d != nil {
		texts := make([]string, len(d.InputLens))
		for _, kv := range []struct {
			k string
			v any
		}{
			{"input_lens", nonNil(d.InputLens)}, {"output_lens", nonNil(d.OutputLens)}, {"ttfts", nonNil(d.TTFTs)},
			{"itls", nonNil(d.ITLs)}, {"latencies", nonNil(d.Latencies)}, {"start_times", nonNil(d.StartTimes)},
			{"queue_times", nonNil(d.QueueTimes)}, {"generated_texts", texts}, {"errors", nonNil(d.Errors)},
		} {
			if err := put(kv.k, kv.v); err != nil {
				return nil, err
			}
		}
	}
	stats := s.statFields()
	if s.MaxConcurrency > 0 {
		// vLLM's name for the wait to be sent, with a concurrency cap.
		stats = append(stats, struct {
			name string
			st   *Stats
		}{clientQueueSeries.name, clientQueueSeries.stats(&s)})
	}
	for _, f := range stats {
		for _, kv := range statKeys(f.st) {
			fmt.Fprintf(&b, ",%q:%s", kv.k+"_"+f.name+"_ms", num(*kv.v))
		}
		if f.name == clientQueueSeries.name {
			continue
		}
		st := f.st
		fmt.Fprintf(&b, ",%q:%d", "n_"+f.name, st.N)
		fmt.Fprintf(&b, ",%q:[%s,%s]", "median_"+f.name+"_ms_ci", num(st.MedianCI[0]), num(st.MedianCI[1]))
		fmt.Fprintf(&b, ",%q:[%s,%s]", "p99_"+f.name+"_ms_ci", num(st.P99CI[0]), num(st.P99CI[1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// nonNil makes a nil list marshal as [], as vLLM writes an empty one.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// num formats a float for JSON; NaN and infinities (not JSON) become 0.
func num(v float64) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "0"
	}
	return string(b)
}

// UnmarshalJSON reads what MarshalJSON writes, vLLM's own result files
// (which lack the CIs and servetune's extra metrics), and servetune's
// earlier files (errors as counts by class, p999_ keys, request_rate 0
// for inf).
func (s *Summary) UnmarshalJSON(data []byte) error {
	var flat map[string]json.RawMessage
	if err := json.Unmarshal(data, &flat); err != nil {
		return err
	}
	var p summaryPlain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*s = Summary(p)
	isNull := func(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
	if raw, ok := flat["request_rate"]; ok && !isNull(raw) {
		var word string
		if json.Unmarshal(raw, &word) == nil {
			if !strings.EqualFold(word, "inf") && !strings.EqualFold(word, "infinity") {
				return fmt.Errorf("request_rate %q: want a number or \"inf\"", word)
			}
		} else if err := json.Unmarshal(raw, &s.RequestRate); err != nil {
			return fmt.Errorf("request_rate: %w", err)
		}
	}
	for k, dst := range map[string]any{"max_concurrency": &s.MaxConcurrency, "request_goodput": &s.RequestGoodput} {
		if raw, ok := flat[k]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if raw, ok := flat["errors"]; ok {
		raw = bytes.TrimSpace(raw)
		switch {
		case bytes.HasPrefix(raw, []byte("{")):
			// servetune's earlier files: counts by class.
			if s.Errors == nil {
				if err := json.Unmarshal(raw, &s.Errors); err != nil {
					return fmt.Errorf("errors: %w", err)
				}
			}
		case bytes.HasPrefix(raw, []byte("[")):
			if err := s.readDetail(flat); err != nil {
				return err
			}
			if s.Samples == nil {
				s.Samples = s.Detail.samples()
			}
		}
	}
	for _, f := range s.statFields() {
		st := f.st
		for _, t := range statKeys(st) {
			keys := []string{t.k + "_" + f.name + "_ms"}
			if t.k == "p99.9" {
				keys = append(keys, "p999_"+f.name+"_ms") // servetune's earlier name
			}
			for _, k := range keys {
				if raw, ok := flat[k]; ok && !isNull(raw) {
					if err := json.Unmarshal(raw, t.v); err != nil {
						return fmt.Errorf("%s: %w", k, err)
					}
					break
				}
			}
		}
		if raw, ok := flat["n_"+f.name]; ok {
			if err := json.Unmarshal(raw, &st.N); err != nil {
				return fmt.Errorf("n_%s: %w", f.name, err)
			}
		}
		for k, dst := range map[string]*[2]float64{"median_" + f.name + "_ms_ci": &st.MedianCI, "p99_" + f.name + "_ms_ci": &st.P99CI} {
			if raw, ok := flat[k]; ok {
				if err := json.Unmarshal(raw, dst); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		}
	}
	return nil
}

// readDetail reads vLLM's per-request lists from a result file's keys.
func (s *Summary) readDetail(flat map[string]json.RawMessage) error {
	d := &Detail{}
	for k, dst := range map[string]any{
		"input_lens": &d.InputLens, "output_lens": &d.OutputLens, "ttfts": &d.TTFTs, "itls": &d.ITLs,
		"latencies": &d.Latencies, "start_times": &d.StartTimes, "queue_times": &d.QueueTimes,
	} {
		if raw, ok := flat[k]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	// vLLM's entries are strings; a null one (no error) reads as "".
	var errs []*string
	if err := json.Unmarshal(flat["errors"], &errs); err != nil {
		return fmt.Errorf("errors: %w", err)
	}
	for _, e := range errs {
		if e == nil {
			d.Errors = append(d.Errors, "")
		} else {
			d.Errors = append(d.Errors, *e)
		}
	}
	s.Detail = d
	return nil
}

// samples rebuilds the per-request samples (ms) from vLLM's detailed
// lists, so that `bench compare` compares vLLM's own result files: TTFT,
// E2EL, ITL per gap and TPOT = (E2EL - TTFT)/(out - 1), of the requests
// without an error. nil when the lists disagree in length.
func (d *Detail) samples() *Samples {
	n := len(d.Errors)
	if len(d.TTFTs) != n || len(d.Latencies) != n || len(d.ITLs) != n || len(d.OutputLens) != n {
		return nil
	}
	sm := &Samples{}
	for i := range n {
		if d.Errors[i] != "" {
			continue
		}
		ttft, e2el := 1000*d.TTFTs[i], 1000*d.Latencies[i]
		sm.TTFT = append(sm.TTFT, ttft)
		sm.E2EL = append(sm.E2EL, e2el)
		if out := d.OutputLens[i]; out > 1 {
			sm.TPOT = append(sm.TPOT, (e2el-ttft)/float64(out-1))
		}
		for _, g := range d.ITLs[i] {
			sm.ITL = append(sm.ITL, 1000*g)
		}
		sm.ITLCounts = append(sm.ITLCounts, len(d.ITLs[i]))
	}
	return sm
}

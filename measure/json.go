package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// statFields lists the latency metrics of a Summary under their JSON
// names: vLLM's ttft, tpot, itl, e2el, then servetune's additions.
func (s *Summary) statFields() []struct {
	name string
	st   *Stats
} {
	return []struct {
		name string
		st   *Stats
	}{
		{"ttft", &s.TTFT}, {"tpot", &s.TPOT}, {"itl", &s.ITL}, {"e2el", &s.E2EL},
		{"itl_per_token", &s.ITLPerToken}, {"queue", &s.Queue}, {"ttft_from_sched", &s.TTFTSched},
	}
}

// summaryPlain has Summary's plain fields; the json:"-" Stats fields are
// written flat by MarshalJSON.
type summaryPlain Summary

// MarshalJSON writes the summary with vLLM's flat keys: for each metric m,
// {mean,median,std,p50,p90,p95,p99,p999}_m_ms, plus n_m, median_m_ms_ci and
// p99_m_ms_ci ([low, high] bootstrap 95% intervals).
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
	for _, f := range s.statFields() {
		st := f.st
		vals := []struct {
			k string
			v float64
		}{
			{"mean", st.Mean}, {"median", st.Median}, {"std", st.Std}, {"p50", st.P50},
			{"p90", st.P90}, {"p95", st.P95}, {"p99", st.P99}, {"p999", st.P999},
		}
		for _, kv := range vals {
			fmt.Fprintf(&b, ",%q:%s", kv.k+"_"+f.name+"_ms", num(kv.v))
		}
		fmt.Fprintf(&b, ",%q:%d", "n_"+f.name, st.N)
		fmt.Fprintf(&b, ",%q:[%s,%s]", "median_"+f.name+"_ms_ci", num(st.MedianCI[0]), num(st.MedianCI[1]))
		fmt.Fprintf(&b, ",%q:[%s,%s]", "p99_"+f.name+"_ms_ci", num(st.P99CI[0]), num(st.P99CI[1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// num formats a float for JSON; NaN and infinities (not JSON) become 0.
func num(v float64) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "0"
	}
	return string(b)
}

// UnmarshalJSON reads what MarshalJSON writes, and vLLM's own result files
// (which lack the CIs and servetune's extra metrics).
func (s *Summary) UnmarshalJSON(data []byte) error {
	var flat map[string]json.RawMessage
	if err := json.Unmarshal(data, &flat); err != nil {
		return err
	}
	// vLLM writes an infinite rate (its default) as "inf", and with
	// --save-detailed its errors as one message per request, not by class.
	vllm := false
	if raw, ok := flat["request_rate"]; ok && bytes.EqualFold(bytes.TrimSpace(raw), []byte(`"inf"`)) {
		flat["request_rate"], vllm = json.RawMessage("0"), true
	}
	if raw, ok := flat["errors"]; ok && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		delete(flat, "errors")
		vllm = true
	}
	if vllm {
		var err error
		if data, err = json.Marshal(flat); err != nil {
			return err
		}
	}
	var p summaryPlain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*s = Summary(p)
	for _, f := range s.statFields() {
		st := f.st
		targets := []struct {
			k string
			v *float64
		}{
			{"mean", &st.Mean}, {"median", &st.Median}, {"std", &st.Std}, {"p50", &st.P50},
			{"p90", &st.P90}, {"p95", &st.P95}, {"p99", &st.P99}, {"p999", &st.P999},
		}
		for _, t := range targets {
			if raw, ok := flat[t.k+"_"+f.name+"_ms"]; ok {
				if err := json.Unmarshal(raw, t.v); err != nil {
					return fmt.Errorf("%s_%s_ms: %w", t.k, f.name, err)
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

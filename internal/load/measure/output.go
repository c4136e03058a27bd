package measure

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
)

// csvColumns are the CSV header, in vLLM's key names.
func csvColumns() []string {
	cols := []string{"max_concurrency", "request_rate", "duration", "completed", "failed"}
	for _, c := range ErrorClasses {
		cols = append(cols, "errors_"+string(c))
	}
	cols = append(cols, "total_input_tokens", "total_output_tokens", "request_throughput",
		"output_throughput", "total_token_throughput", "max_output_tokens_per_s", "request_goodput")
	var s Summary
	for _, f := range s.statFields() {
		for _, st := range statKeys(f.st) {
			cols = append(cols, st.k+"_"+f.name+"_ms")
		}
	}
	return cols
}

// WriteCSV writes one header row and one row per summary (a sweep level).
func WriteCSV(w io.Writer, sums []Summary) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns()); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for i := range sums {
		s := &sums[i]
		rate := "inf" // as vLLM writes an infinite rate
		if s.RequestRate > 0 {
			rate = f(s.RequestRate)
		}
		row := []string{strconv.Itoa(s.MaxConcurrency), rate, f(s.Duration), strconv.Itoa(s.Completed), strconv.Itoa(s.Failed)}
		for _, c := range ErrorClasses {
			row = append(row, strconv.Itoa(s.Errors[string(c)]))
		}
		row = append(row, strconv.Itoa(s.TotalInputTokens), strconv.Itoa(s.TotalOutputTokens), f(s.RequestThroughput),
			f(s.OutputThroughput), f(s.TotalTokenThroughput), f(s.PeakOutputThroughput), f(s.RequestGoodput))
		for _, sf := range s.statFields() {
			for _, st := range statKeys(sf.st) {
				row = append(row, f(*st.v))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// requestLine is one line of a --requests-out file.
type requestLine struct {
	Level int `json:"level"`
	Record
}

// WriteRecordsJSONL writes one JSON object per record with every timestamp
// (nanosecond offsets from the run's start) and the sweep level it belongs to.
func WriteRecordsJSONL(w io.Writer, level int, records []Record) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range records {
		if err := enc.Encode(requestLine{Level: level, Record: records[i]}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ErrNoSamples is returned by Compare for a summary without per-request
// samples.
var ErrNoSamples = errors.New("a summary has no per-request samples (write it with bench --json)")

// Diff is the change of one statistic between two runs.
type Diff struct {
	Metric      string     `json:"metric"` // e.g. ttft
	Stat        string     `json:"stat"`   // median or p99
	Base        float64    `json:"base"`
	New         float64    `json:"new"`
	Delta       float64    `json:"delta"`       // New - Base
	RelPct      float64    `json:"rel_pct"`     // 100·Delta/Base
	CI          [2]float64 `json:"ci95"`        // bootstrap 95% interval of Delta
	Significant bool       `json:"significant"` // CI excludes 0
}

// Compare computes, for TTFT, TPOT, ITL and E2EL, the change of the median
// and the p99 from base to new with a bootstrap 95% confidence interval of
// the difference (both runs resampled independently, b resamples). It needs
// the per-request samples of both summaries (SummaryOptions.KeepSamples;
// `servetune bench --json` writes them under "samples").
func Compare(base, new Summary, rng *rand.Rand, b int) ([]Diff, error) {
	if base.Samples == nil || new.Samples == nil {
		return nil, ErrNoSamples
	}
	if b <= 0 {
		b = DefaultBootstrap
	}
	var pairs []struct {
		name   string
		bs, ns []float64
		gaps   bool // ITL: clustered by request (Samples.ITLCounts)
	}
	var probe Summary
	for _, sr := range latencySeries {
		if sr.samples != nil {
			pairs = append(pairs, struct {
				name   string
				bs, ns []float64
				gaps   bool
			}{sr.name, sr.samples(base.Samples), sr.samples(new.Samples), sr.stats(&probe) == &probe.ITL})
		}
	}
	var out []Diff
	for _, p := range pairs {
		if len(p.bs) == 0 || len(p.ns) == 0 {
			continue
		}
		bs, ns := slices.Sorted(slices.Values(p.bs)), slices.Sorted(slices.Values(p.ns))
		for _, q := range []struct {
			stat string
			pct  float64
		}{{"median", 50}, {"p99", 99}} {
			d := Diff{Metric: p.name, Stat: q.stat, Base: Percentile(bs, q.pct), New: Percentile(ns, q.pct)}
			d.Delta = d.New - d.Base
			if d.Base != 0 {
				d.RelPct = 100 * d.Delta / d.Base
			}
			if p.gaps && base.Samples.ITLCounts != nil && new.Samples.ITLCounts != nil {
				// Whole requests are resampled; the per-chunk bootstrap
				// below (files without counts) is too narrow. Each resample
				// copies every gap, so at most 1,000 of them: ~2 s for
				// 10^5 gaps a side.
				d.CI = ClusterBootstrapDiffCI(base.Samples.ITL, base.Samples.ITLCounts, new.Samples.ITL, new.Samples.ITLCounts, q.pct, rng, min(b, 1000))
			} else {
				d.CI = BootstrapDiffCI(bs, ns, q.pct, rng, b)
			}
			d.Significant = d.CI[0] > 0 || d.CI[1] < 0
			out = append(out, d)
		}
	}
	return out, nil
}

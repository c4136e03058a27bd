package measure

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestMissWatch: fed a phase's requests in any order, the watch says a
// bound is missed only when the summary's percentile over all of them is
// past it, and by the end says so exactly when the value at the
// percentile's lower rank is.
func TestMissWatch(t *testing.T) {
	var metrics []Metric
	for _, sr := range latencySeries {
		for _, st := range latencyStats {
			m, ok := LookupMetric(sr.name + "_" + st.name)
			if _, bound := m.Bound(0); ok && bound {
				metrics = append(metrics, m)
			}
		}
	}
	if len(metrics) != 12 {
		t.Fatalf("%d metrics are bounds, want the 4 percentiles of 3 series", len(metrics))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 3000 {
		n := 1 + rng.IntN(300)
		m := metrics[trial%len(metrics)]
		recs := make([]Record, n)
		for i := range recs {
			send := time.Duration(rng.IntN(1e9))
			first := send + time.Duration(rng.ExpFloat64()*float64(time.Second))
			out := 1 + rng.IntN(64)
			last := first + time.Duration(out-1)*time.Duration(rng.ExpFloat64()*float64(50*time.Millisecond))
			recs[i] = Record{Send: send, First: first, Last: last, End: last, OutputTokens: out}
		}
		got, ok := m.Read(Subject{Level: Level{Summary: Summarize(recs, SummaryOptions{Bootstrap: 1})}})
		if !ok {
			continue // no request had two tokens
		}
		b, _ := m.Bound(got * (0.9 + 0.2*rng.Float64())) // near the percentile, either side
		w := NewMissWatch([]Bound{b}, n)
		missed := false
		for _, i := range rng.Perm(n) {
			r := recs[i]
			missed = w.First(&r) || missed
			missed = w.End(&r) || missed
			if missed && !(got > b.Max) {
				t.Fatalf("%s over %d: the watch says %v is missed, the summary has %v", m.Name, n, b.Max, got)
			}
		}
		var vals []float64
		for _, r := range recs {
			if v := seriesNamed(b.Series).request(r.Metrics()); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		sortFloats(vals)
		lo := int(math.Floor(b.P / 100 * float64(len(vals)-1)))
		if len(vals) == n && missed != (vals[lo] > b.Max) {
			t.Fatalf("%s over %d: missed %v, the value at rank %d is %v against %v", m.Name, n, missed, lo, vals[lo], b.Max)
		}
	}
}

// TestBoundOf: percentiles of the series with a value per request are
// bounds; means, ITL and the rates are not.
func TestBoundOf(t *testing.T) {
	for name, want := range map[string]bool{"ttft_p99": true, "tpot_p90": true, "e2el_median": true,
		"ttft_mean": false, "itl_p99": false, "request_rate": false} {
		m, ok := LookupMetric(name)
		if !ok {
			t.Fatalf("%s: no metric", name)
		}
		if _, ok := m.Bound(1); ok != want {
			t.Errorf("%s: bound %v, want %v", name, ok, want)
		}
	}
}

package measure

import "math"

// Bound is an upper limit on one percentile of a per-request latency over
// a level's completed requests, as an SLO limit such as ttft_p99 <= 2000
// sets it.
type Bound struct {
	Series string  // a latency series of one value per request: ttft, tpot, e2el
	P      float64 // the percentile, as Percentile takes it
	Max    float64 // ms
}

// Bound is the limit max on m as a Bound; ok is false unless m is a
// percentile of a series with one value per request.
func (m Metric) Bound(max float64) (b Bound, ok bool) {
	if sr := seriesNamed(m.Series); sr == nil || sr.request == nil || m.pct <= 0 {
		return Bound{}, false // a mean moves with every value
	}
	return Bound{Series: m.Series, P: m.pct, Max: max}, true
}

// PerRequest reports whether m is a statistic of a series with one
// value per request (TTFT, TPOT, E2EL): what a level of records without
// their chunk times still measures (Phase.LatenciesOnly).
func (m Metric) PerRequest() bool {
	sr := seriesNamed(m.Series)
	return sr != nil && sr.request != nil
}

// seriesNamed is the latency series of that name, nil when none.
func seriesNamed(name string) *series {
	for i := range latencySeries {
		if latencySeries[i].name == name {
			return &latencySeries[i]
		}
	}
	return nil
}

// MissWatch follows a count-bound phase's requests as they are answered
// and says when one of its bounds is missed whatever the requests still
// unanswered do. Percentile interpolates between the values at ranks lo
// and lo+1 of the n sorted values (lo = floor(p/100 x (n-1))), so once
// n-lo of them are past Max, the percentile is too. n is the phase's
// count: every request completes, or one failed, which a level whose SLO
// allows no failed request misses anyway; fewer values (a TPOT needs two
// tokens) need no more of them past Max. A value counts once it is
// final: TTFT at the first token, TPOT and E2EL at the end. Not safe for
// concurrent use.
type MissWatch struct {
	bounds     []Bound
	series     []*series
	need, past []int
}

// NewMissWatch watches bounds over a phase of count requests; a bound on
// a series without one value per request is not watched.
func NewMissWatch(bounds []Bound, count int) *MissWatch {
	w := &MissWatch{bounds: bounds, series: make([]*series, len(bounds)), need: make([]int, len(bounds)), past: make([]int, len(bounds))}
	for i, b := range bounds {
		w.series[i] = seriesNamed(b.Series)
		lo := int(math.Floor(b.P / 100 * float64(count-1))) // as Percentile ranks
		w.need[i] = count - min(max(lo, 0), count-1)
	}
	return w
}

// First takes r once its first token is in; it reports whether a bound
// is missed.
func (w *MissWatch) First(r *Record) bool { return w.take(r, true) }

// End takes r once it ended; it reports whether a bound is missed.
func (w *MissWatch) End(r *Record) bool { return w.take(r, false) }

// take counts r's values that are final now (at its first token, or at
// its end) and past their bounds.
func (w *MissWatch) take(r *Record, first bool) bool {
	if r.Warmup || r.Error != ErrNone {
		return false
	}
	m := r.Metrics()
	missed := false
	for i, b := range w.bounds {
		sr := w.series[i]
		if sr != nil && sr.request != nil && sr.atFirst == first && sr.request(m) > b.Max { // NaN: no value
			w.past[i]++
		}
		missed = missed || w.past[i] >= w.need[i]
	}
	return missed
}

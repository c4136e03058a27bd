package measure

import "time"

// ScaleSummary converts a summary measured against an engine running k
// times faster than real time into the engine's time: durations and
// latencies grow by k, rates shrink by k.
func ScaleSummary(s *Summary, k float64) {
	s.Duration *= k
	s.RequestThroughput /= k
	s.OutputThroughput /= k
	s.TotalTokenThroughput /= k
	s.PeakOutputThroughput /= k
	s.RequestGoodput /= k
	s.RequestRate /= k
	for _, st := range []*Stats{&s.TTFT, &s.TTFTSched, &s.Queue, &s.TPOT, &s.ITL, &s.ITLPerToken, &s.E2EL} {
		for _, v := range []*float64{&st.Mean, &st.Median, &st.Std, &st.P50, &st.P90, &st.P95, &st.P99, &st.P999,
			&st.MedianCI[0], &st.MedianCI[1], &st.P99CI[0], &st.P99CI[1]} {
			*v *= k
		}
	}
}

// ScaleRecords converts per-request instants into the engine's time.
func ScaleRecords(recs []Record, k float64) {
	sc := func(d *time.Duration) { *d = time.Duration(float64(*d) * k) }
	for i := range recs {
		r := &recs[i]
		sc(&r.Sched)
		sc(&r.Send)
		sc(&r.First)
		sc(&r.Last)
		sc(&r.End)
		for j := range r.Chunks {
			sc(&r.Chunks[j].At)
		}
	}
}

package scrape

import (
	"math"
	"slices"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// Aggregate turns the snapshots of one load level (in time order, the
// first taken as the level began, the last as it ended) into its engine
// metrics: peak and mean of the gauges over the snapshots, and the change
// of the counters and histograms from the first to the last. interval is
// the scrape period, recorded. It returns nil for no snapshot.
func Aggregate(snaps []Snapshot, interval time.Duration) *measure.EngineMetrics {
	if len(snaps) == 0 {
		return nil
	}
	a, z := snaps[0], snaps[len(snaps)-1]
	m := &measure.EngineMetrics{Engine: string(z.Engine), Source: "scrape", Samples: len(snaps), IntervalS: interval.Seconds()}
	var missing []string
	gauge := func(name string, get func(Snapshot) Value, peak, mean *float64) {
		n := 0
		for _, s := range snaps {
			v := get(s)
			if !v.OK {
				continue
			}
			*peak = max(*peak, v.V)
			*mean += v.V
			n++
		}
		if n == 0 {
			missing = append(missing, name)
			return
		}
		*mean /= float64(n)
	}
	gauge("num_requests_running", func(s Snapshot) Value { return s.Running }, &m.NumRequestsRunningPeak, &m.NumRequestsRunningMean)
	gauge("num_requests_waiting", func(s Snapshot) Value { return s.Waiting }, &m.NumRequestsWaitingPeak, &m.NumRequestsWaitingMean)
	gauge("kv_cache_usage", func(s Snapshot) Value { return s.KVUsage }, &m.KVCacheUsagePeak, &m.KVCacheUsageMean)
	var whenWaiting []float64
	both := 0
	for _, s := range snaps {
		if s.Waiting.OK && s.Running.OK {
			both++
			if s.Waiting.V > 0 {
				whenWaiting = append(whenWaiting, s.Running.V)
			}
		}
	}
	if len(whenWaiting) > 0 {
		slices.Sort(whenWaiting)
		m.NumRequestsRunningWhenWaiting = measure.Percentile(whenWaiting, 50)
		m.WaitingShare = float64(len(whenWaiting)) / float64(both)
	}

	counter := func(name string, get func(Snapshot) Value) (float64, bool) {
		first, last := get(a), get(z)
		if !first.OK || !last.OK {
			missing = append(missing, name)
			return 0, false
		}
		if last.V < first.V { // the engine restarted: its counters began again
			return last.V, true
		}
		return last.V - first.V, true
	}
	m.Preemptions, _ = counter("preemptions", func(s Snapshot) Value { return s.Preemptions })
	m.PromptTokens, _ = counter("prompt_tokens", func(s Snapshot) Value { return s.PromptTokens })
	m.GenerationTokens, _ = counter("generation_tokens", func(s Snapshot) Value { return s.OutTokens })
	q, okQ := counter("prefix_cache_queries", func(s Snapshot) Value { return s.PrefixQueries })
	h, okH := counter("prefix_cache_hits", func(s Snapshot) Value { return s.PrefixHits })
	switch {
	case okQ && okH && q > 0:
		r := h / q
		m.PrefixCacheHitRate = &r
	case okQ && okH && m.PromptTokens > 0:
		// Prompts processed and none looked up (the cache is off): no
		// prompt token came from a cache.
		r := 0.0
		m.PrefixCacheHitRate = &r
	case !okQ || !okH:
		// No counters (an older engine): the engine's own hit-rate gauge.
		var peak, mean float64
		n := len(missing)
		gauge("prefix_cache_hit_rate", func(s Snapshot) Value { return s.HitRate }, &peak, &mean)
		if len(missing) == n {
			m.PrefixCacheHitRate = &mean
		}
	}

	latency := func(name string, get func(Snapshot) *Histogram) *measure.ServerLatency {
		d := get(z).Sub(get(a))
		if d == nil {
			missing = append(missing, name)
			return nil
		}
		if d.Count <= 0 {
			return nil
		}
		return &measure.ServerLatency{Count: d.Count, MeanMs: 1000 * d.Sum / d.Count,
			P50Ms: ms(d.Quantile(0.5)), P90Ms: ms(d.Quantile(0.9)), P99Ms: ms(d.Quantile(0.99)),
			P50Bucket: bucket(d, 0.5), P90Bucket: bucket(d, 0.9), P99Bucket: bucket(d, 0.99)}
	}
	m.TTFT = latency("server_ttft", func(s Snapshot) *Histogram { return s.TTFT })
	m.QueueTime = latency("server_queue_time", func(s Snapshot) *Histogram { return s.QueueTime })
	m.ITL = latency("server_itl", func(s Snapshot) *Histogram { return s.ITL })
	m.E2E = latency("server_e2el", func(s Snapshot) *Histogram { return s.E2E })
	m.Missing = missing
	return m
}

// bucket is the histogram bucket (ms) that holds the q-quantile.
func bucket(h *Histogram, q float64) *measure.Bucket {
	lo, hi, ok := h.Bucket(q)
	if !ok {
		return nil
	}
	if math.IsInf(hi, 1) {
		return &measure.Bucket{LoMs: ms(lo), Open: true}
	}
	return &measure.Bucket{LoMs: ms(lo), HiMs: ms(hi)}
}

func ms(sec float64) float64 {
	if math.IsNaN(sec) {
		return 0
	}
	return 1000 * sec
}

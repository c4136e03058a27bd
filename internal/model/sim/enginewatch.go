package sim

import (
	"math"
	"slices"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// engineWatch is what the virtual engine reports of one measured phase:
// the figures a scrape of its /metrics would give (measure.EngineMetrics),
// read from its own state, exactly: gauges are averaged over virtual time
// (not sampled), counters and latencies are the phase's own.
type engineWatch struct {
	eng   engine.Engine
	start float64 // virtual clock at the phase's start
	last  float64 // the instant the gauges were last integrated to

	running, waiting, kv      float64             // the current gauges
	runArea, waitArea, kvArea float64             // their integrals over time
	waitTime                  float64             // time with requests waiting
	runWhileWaiting           map[float64]float64 // running requests -> time spent so while requests waited
	runPeak, waitPeak, kvPeak float64
	c0                        counters // at the phase's start
	ttft, queue, e2e          []float64
	itl                       logHist
	itlSum                    float64
}

// counters are the engine's cumulative counters, summed over its ranks.
type counters struct {
	preemptions, prefixQueries, prefixHits, promptTokens, genTokens int64
}

func sumCounters(cores []*core) counters {
	var c counters
	for _, k := range cores {
		c.preemptions += k.preemptions
		c.prefixQueries += k.prefixQueries
		c.prefixHits += k.prefixHits
		c.promptTokens += k.promptTokens
		c.genTokens += k.genTokens
	}
	return c
}

func newEngineWatch(v *Virtual) *engineWatch {
	w := &engineWatch{eng: v.cfg.Engine, start: v.now, last: v.now, c0: sumCounters(v.cores),
		runWhileWaiting: map[float64]float64{}}
	w.sample(v.cores)
	return w
}

// advance integrates the gauges up to the virtual instant t.
func (w *engineWatch) advance(t float64) {
	if dt := t - w.last; dt > 0 {
		w.runArea += w.running * dt
		w.waitArea += w.waiting * dt
		w.kvArea += w.kv * dt
		if w.waiting > 0 {
			w.waitTime += dt
			w.runWhileWaiting[w.running] += dt
		}
		w.last = t
	}
}

// sample reads the gauges after an event (an arrival, a step): requests
// summed over data-parallel ranks, KV usage averaged, as /metrics has them.
func (w *engineWatch) sample(cores []*core) {
	w.running, w.waiting, w.kv = 0, 0, 0
	for _, c := range cores {
		w.running += float64(c.active())
		w.waiting += float64(c.waitingCount())
		w.kv += c.kvUsage() / float64(len(cores))
	}
	w.runPeak = max(w.runPeak, w.running)
	w.waitPeak = max(w.waitPeak, w.waiting)
	w.kvPeak = max(w.kvPeak, w.kv)
}

// token records the latencies of a sampled token of s at now.
func (w *engineWatch) token(s *seq, now float64, last bool) {
	if s.generated == 1 {
		w.ttft = append(w.ttft, now-s.arrival)
		w.queue = append(w.queue, s.queuedFor)
	} else if s.watch == w {
		w.itl.add(now - s.watchPrev)
		w.itlSum += now - s.watchPrev
	}
	if last {
		s.watch = nil
		w.e2e = append(w.e2e, now-s.arrival)
		return
	}
	s.watch, s.watchPrev = w, now
}

// metrics ends the watch at the virtual instant end.
func (w *engineWatch) metrics(cores []*core, end float64) *measure.EngineMetrics {
	w.advance(end)
	c := sumCounters(cores)
	m := &measure.EngineMetrics{Engine: string(w.eng), Source: "simulator", Samples: 1,
		NumRequestsRunningPeak: w.runPeak, NumRequestsWaitingPeak: w.waitPeak, KVCacheUsagePeak: w.kvPeak,
		Preemptions:      float64(c.preemptions - w.c0.preemptions),
		PromptTokens:     float64(c.promptTokens - w.c0.promptTokens),
		GenerationTokens: float64(c.genTokens - w.c0.genTokens),
	}
	if d := end - w.start; d > 0 {
		m.NumRequestsRunningMean, m.NumRequestsWaitingMean, m.KVCacheUsageMean = w.runArea/d, w.waitArea/d, w.kvArea/d
		m.WaitingShare = w.waitTime / d
	}
	if w.waitTime > 0 {
		m.NumRequestsRunningWhenWaiting = measure.WeightedMedian(w.runWhileWaiting)
	}
	if q := c.prefixQueries - w.c0.prefixQueries; q > 0 {
		r := float64(c.prefixHits-w.c0.prefixHits) / float64(q)
		m.PrefixCacheHitRate = &r
	} else if m.PromptTokens > 0 {
		r := 0.0 // prompts processed, none looked up: the cache is off
		m.PrefixCacheHitRate = &r
	}
	m.TTFT, m.QueueTime, m.E2E = exactLatency(w.ttft), exactLatency(w.queue), exactLatency(w.e2e)
	if n := w.itl.n; n > 0 {
		m.ITL = &measure.ServerLatency{Count: float64(n), MeanMs: 1000 * w.itlSum / float64(n),
			P50Ms: 1000 * w.itl.quantile(0.5), P90Ms: 1000 * w.itl.quantile(0.9), P99Ms: 1000 * w.itl.quantile(0.99)}
	}
	return m
}

// exactLatency summarises seconds values in ms; nil when there are none.
func exactLatency(v []float64) *measure.ServerLatency {
	if len(v) == 0 {
		return nil
	}
	s := slices.Sorted(slices.Values(v))
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return &measure.ServerLatency{Count: float64(len(s)), MeanMs: 1000 * sum / float64(len(s)), Exact: true,
		P50Ms: 1000 * measure.Percentile(s, 50), P90Ms: 1000 * measure.Percentile(s, 90), P99Ms: 1000 * measure.Percentile(s, 99)}
}

// logHist counts positive values in bins 1% wide (from 1 us), so the
// inter-token latencies of a long phase (millions of them) cost a few
// kilobytes and their quantiles are within 1%.
type logHist struct {
	bins []int64 // by bin
	n    int64
	// last and lastBin are the value added last and its bin: a step's
	// tokens share one gap, which then costs no logarithm.
	last    float64
	lastBin int
}

const (
	logHistMin   = 1e-6
	logHistRatio = 1.01
)

func (h *logHist) add(v float64) {
	i := 0
	switch {
	case h.n > 0 && v == h.last:
		i = h.lastBin
	case v > logHistMin:
		i = int(math.Log(v/logHistMin) / math.Log(logHistRatio))
	}
	h.last, h.lastBin = v, i
	if i >= len(h.bins) {
		h.bins = append(h.bins, make([]int64, i+1-len(h.bins))...)
	}
	h.bins[i]++
	h.n++
}

// quantile returns the upper edge of the bin holding the q-quantile.
func (h *logHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var cum int64
	top := 0
	for k, n := range h.bins {
		if n == 0 {
			continue
		}
		top = k
		cum += n
		if cum >= rank {
			return logHistMin * math.Pow(logHistRatio, float64(k+1))
		}
	}
	return logHistMin * math.Pow(logHistRatio, float64(top+1))
}

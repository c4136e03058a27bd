package scrape

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/servetune/servetune/internal/serving/engine"
)

// ErrNoEngineMetrics is returned by Parse for an exposition that holds
// neither vLLM's nor SGLang's families (another server, or metrics
// turned off: SGLang serves them only when asked).
var ErrNoEngineMetrics = errors.New("no vLLM or SGLang metrics (SGLang needs " + engine.Flag(engine.SGLang, "enable_metrics") + ")")

// Value is one reading that may be absent.
type Value struct {
	V  float64
	OK bool
}

// Histogram is a Prometheus histogram summed over its series: cumulative
// counts at each upper bound (the last bound is +Inf).
type Histogram struct {
	Bounds []float64
	Counts []float64
	Sum    float64
	Count  float64
}

// Snapshot is one reading of an engine's /metrics, by what it measures
// (engine.MetricNames). Gauges of requests and counters are summed over
// the series (data-parallel ranks report one each); KV usage and hit rate
// are averaged over them.
type Snapshot struct {
	Time   time.Time
	Engine engine.Engine

	Running, Waiting, KVUsage, HitRate                              Value
	Preemptions, PrefixQueries, PrefixHits, PromptTokens, OutTokens Value

	TTFT, QueueTime, ITL, E2E *Histogram
}

// Parse reads Prometheus text exposition (format 0.0.4, as vLLM and SGLang
// serve it) with expfmt and picks the families servetune reads. It fails
// with ErrNoEngineMetrics when neither engine's families are present.
func Parse(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	var s Snapshot
	for _, e := range engine.Engines {
		for name := range fams {
			if len(name) > len(engine.MetricPrefix(e)) && name[:len(engine.MetricPrefix(e))] == engine.MetricPrefix(e) {
				s.Engine = e
				break
			}
		}
		if s.Engine != "" {
			break
		}
	}
	if s.Engine == "" {
		return Snapshot{}, ErrNoEngineMetrics
	}
	n := engine.Metrics(s.Engine)
	s.Running = scalar(fams, n.Running, false)
	s.Waiting = scalar(fams, n.Waiting, false)
	s.KVUsage = scalar(fams, n.KVUsage, true)
	s.HitRate = scalar(fams, n.HitRate, true)
	s.Preemptions = scalar(fams, n.Preemptions, false)
	s.PrefixQueries = scalar(fams, n.PrefixQueries, false)
	s.PrefixHits = scalar(fams, n.PrefixHits, false)
	s.PromptTokens = scalar(fams, n.PromptTokens, false)
	s.OutTokens = scalar(fams, n.OutputTokens, false)
	s.TTFT = histogram(fams, n.TTFT)
	s.QueueTime = histogram(fams, n.QueueTime)
	s.ITL = histogram(fams, n.ITL)
	s.E2E = histogram(fams, n.E2E)
	return s, nil
}

// first returns the first of names present in fams.
func first(fams map[string]*dto.MetricFamily, names []string) *dto.MetricFamily {
	for _, name := range names {
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			return f
		}
	}
	return nil
}

// scalar reads a gauge or counter family: the sum of its series, or their
// mean when mean is set. Untyped samples (an exposition without TYPE
// lines) count too.
func scalar(fams map[string]*dto.MetricFamily, names []string, mean bool) Value {
	f := first(fams, names)
	if f == nil {
		return Value{}
	}
	sum, n := 0.0, 0
	for _, m := range f.GetMetric() {
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Untyped != nil:
			v = m.GetUntyped().GetValue()
		default:
			continue
		}
		if math.IsNaN(v) {
			continue
		}
		sum += v
		n++
	}
	if n == 0 {
		return Value{}
	}
	if mean {
		sum /= float64(n)
	}
	return Value{V: sum, OK: true}
}

// histogram sums a histogram family's series bucket by bucket.
func histogram(fams map[string]*dto.MetricFamily, names []string) *Histogram {
	f := first(fams, names)
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		return nil
	}
	byBound := map[float64]float64{}
	h := &Histogram{}
	for _, m := range f.GetMetric() {
		mh := m.GetHistogram()
		if mh == nil {
			continue
		}
		h.Sum += mh.GetSampleSum()
		h.Count += float64(mh.GetSampleCount())
		if mh.SampleCountFloat != nil {
			h.Count += mh.GetSampleCountFloat()
		}
		for _, b := range mh.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c += b.GetCumulativeCountFloat()
			}
			byBound[b.GetUpperBound()] += c
		}
	}
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	slices.Sort(h.Bounds)
	if len(h.Bounds) == 0 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		h.Bounds = append(h.Bounds, math.Inf(1))
		byBound[math.Inf(1)] = h.Count
	}
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h
}

// Sub returns h minus an earlier reading of the same histogram: what was
// observed between the two. A histogram whose count went down (the engine
// restarted) or whose buckets changed is returned whole.
func (h *Histogram) Sub(earlier *Histogram) *Histogram {
	if h == nil {
		return nil
	}
	if earlier == nil || earlier.Count > h.Count || !slices.Equal(earlier.Bounds, h.Bounds) {
		return h
	}
	d := &Histogram{Bounds: h.Bounds, Sum: h.Sum - earlier.Sum, Count: h.Count - earlier.Count, Counts: make([]float64, len(h.Counts))}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - earlier.Counts[i]
	}
	return d
}

// Bucket returns the bounds (lo, hi] of the bucket that holds the
// q-quantile (0..1), in the histogram's unit; hi is +Inf for the last
// bucket. ok is false when the histogram is empty.
func (h *Histogram) Bucket(q float64) (lo, hi float64, ok bool) {
	if h == nil || h.Count <= 0 || len(h.Bounds) == 0 {
		return 0, 0, false
	}
	i := h.bucketOf(q * h.Count)
	if i > 0 {
		lo = h.Bounds[i-1]
	}
	return lo, h.Bounds[i], true
}

// bucketOf is the index of the first bucket whose cumulative count
// reaches rank.
func (h *Histogram) bucketOf(rank float64) int {
	i, _ := slices.BinarySearchFunc(h.Counts, rank, func(c, r float64) int {
		switch {
		case c < r:
			return -1
		case c > r:
			return 1
		}
		return 0
	})
	return min(i, len(h.Bounds)-1)
}

// Quantile interpolates the q-quantile (0..1) linearly inside the bucket
// that holds it, as Prometheus' histogram_quantile does: a value in the
// +Inf bucket is reported as the highest finite bound. NaN when empty.
func (h *Histogram) Quantile(q float64) float64 {
	if h == nil || h.Count <= 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	i := h.bucketOf(rank)
	if math.IsInf(h.Bounds[i], 1) {
		if i == 0 {
			return math.NaN()
		}
		return h.Bounds[i-1]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	in := h.Counts[i] - below
	if in <= 0 {
		return h.Bounds[i]
	}
	return lo + (h.Bounds[i]-lo)*(rank-below)/in
}

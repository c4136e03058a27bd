package measure

import (
	"math"
	"slices"
	"strings"
)

// This file is the metric table: every metric a level can be ranked,
// bounded or compared by, with its unit, the direction in which it
// improves and how it is read, and every latency series of a Summary under
// its result-file name. Other packages look names up here
// (docs/architecture.md, "Metrics"); internal/archtest's rule
// metric-names-once keeps other lists of them out.

// Better is the direction in which a metric improves.
type Better int

// Directions.
const (
	Lower  Better = iota + 1 // latencies, cost
	Higher                   // throughputs, efficiency
)

func (b Better) String() string {
	switch b {
	case Lower:
		return "lower"
	case Higher:
		return "higher"
	}
	return "unknown"
}

// Subject is what a metric is read from: one measured level and the GPUs
// that served it.
type Subject struct {
	Level
	GPUs  int     // GPUs serving the level; counted as at least 1
	Price float64 // $ per GPU-hour; 0 when unknown
}

// Metric is one row of the metric table.
type Metric struct {
	Name   string // the name objectives, SLOs and outputs use: "ttft_p99"
	Unit   string // "ms", "tok/s/GPU", "req/s", "$/Mtok", "tok/J", ...
	Better Better
	// Title is the name for a reader ("output tokens/s per GPU", "p99
	// TTFT"); Heading a table column's, with the unit (Title (Unit)
	// unless set).
	Title, Heading string
	// Series is the latency series a latency metric reads
	// ("ttft" for ttft_p99), "" for the others.
	Series string
	read   func(Subject) (float64, bool)
	pct    float64 // the percentile a latency metric is (99 for ttft_p99); 0 for a mean and the others
}

// Read returns the metric of s; ok is false when s has no value for it (no
// completed request, no price, no energy measured).
func (m Metric) Read(s Subject) (v float64, ok bool) { return m.read(s) }

// series is a latency series of a Summary: its Stats under the name the
// result file writes it (the keys {stat}_{name}_ms).
type series struct {
	name    string
	stats   func(*Summary) *Stats
	samples func(*Samples) []float64 // the raw values Samples keeps; nil when none
	ranked  bool                     // metrics {name}_{mean,p50,p90,p95,p99} rank by it
	// request is a completed request's value, for a series of one value
	// per request (NaN: none), nil for the others; atFirst says it is
	// final at the request's first token (MissWatch).
	request func(RequestMetrics) float64
	atFirst bool
}

// latencySeries are vLLM's ttft, tpot, itl, e2el and
// e2el_including_client_queue, then servetune's additions.
var latencySeries = []series{
	{"ttft", func(s *Summary) *Stats { return &s.TTFT }, func(x *Samples) []float64 { return x.TTFT }, true,
		func(m RequestMetrics) float64 { return m.TTFT }, true},
	{"tpot", func(s *Summary) *Stats { return &s.TPOT }, func(x *Samples) []float64 { return x.TPOT }, true,
		func(m RequestMetrics) float64 { return m.TPOT }, false},
	{"itl", func(s *Summary) *Stats { return &s.ITL }, func(x *Samples) []float64 { return x.ITL }, true, nil, false},
	{"e2el", func(s *Summary) *Stats { return &s.E2EL }, func(x *Samples) []float64 { return x.E2EL }, true,
		func(m RequestMetrics) float64 { return m.E2EL }, false},
	{"e2el_including_client_queue", func(s *Summary) *Stats { return &s.E2ELSched }, nil, false, nil, false},
	{"itl_per_token", func(s *Summary) *Stats { return &s.ITLPerToken }, nil, false, nil, false},
	{"queue", func(s *Summary) *Stats { return &s.Queue }, nil, false, nil, false},
	{"ttft_from_sched", func(s *Summary) *Stats { return &s.TTFTSched }, nil, false, nil, false},
}

// clientQueueSeries is vLLM's name for the wait to be sent (Queue), which
// it writes only with a concurrency cap.
var clientQueueSeries = series{name: "client_queue_time", stats: func(s *Summary) *Stats { return &s.Queue }}

// latencyStats are the statistics a latency metric ranks by, and the
// alias each also answers to.
var latencyStats = []struct {
	name, alias string
	of          func(Stats) float64
	pct         float64 // the percentile NewStats takes (Percentile's p); 0 for the mean
}{
	{"mean", "", func(s Stats) float64 { return s.Mean }, 0},
	{"p50", "median", func(s Stats) float64 { return s.P50 }, 50},
	{"p90", "", func(s Stats) float64 { return s.P90 }, 90},
	{"p95", "", func(s Stats) float64 { return s.P95 }, 95},
	{"p99", "", func(s Stats) float64 { return s.P99 }, 99},
}

// gpus is the subject's GPU count, at least 1.
func (s Subject) gpus() float64 { return float64(max(s.GPUs, 1)) }

// rate is the offered load of an open-loop level: what a capacity search
// over the rate maximises; none for a closed loop.
func (s Subject) rate() (float64, bool) {
	if s.Load.Unlimited() {
		return 0, false
	}
	return s.Load.Rate, true
}

// rateMetrics are the metrics that are not latency statistics.
var rateMetrics = []Metric{
	{Name: "output_throughput", Unit: "tok/s", Better: Higher, Title: "output tokens/s",
		read: func(s Subject) (float64, bool) { return s.Summary.OutputThroughput, true }},
	{Name: "output_throughput_per_gpu", Unit: "tok/s/GPU", Better: Higher, Title: "output tokens/s per GPU", Heading: "tok/s/GPU",
		read: func(s Subject) (float64, bool) { return s.Summary.OutputThroughput / s.gpus(), true }},
	{Name: "total_token_throughput", Unit: "tok/s", Better: Higher, Title: "tokens/s (input and output)",
		read: func(s Subject) (float64, bool) { return s.Summary.TotalTokenThroughput, true }},
	{Name: "total_token_throughput_per_gpu", Unit: "tok/s/GPU", Better: Higher, Title: "tokens/s (input and output) per GPU",
		read: func(s Subject) (float64, bool) { return s.Summary.TotalTokenThroughput / s.gpus(), true }},
	{Name: "request_throughput", Unit: "req/s", Better: Higher, Title: "requests/s",
		read: func(s Subject) (float64, bool) { return s.Summary.RequestThroughput, true }},
	{Name: "request_goodput", Unit: "req/s", Better: Higher, Title: "goodput",
		read: func(s Subject) (float64, bool) { return s.Summary.RequestGoodput, true }},
	{Name: "goodput_per_gpu", Unit: "req/s/GPU", Better: Higher, Title: "goodput per GPU", Heading: "goodput (req/s/GPU)",
		read: func(s Subject) (float64, bool) { return s.Summary.RequestGoodput / s.gpus(), true }},
	{Name: "request_rate", Unit: "req/s", Better: Higher, Title: "offered requests/s", read: Subject.rate},
	{Name: "request_rate_per_gpu", Unit: "req/s/GPU", Better: Higher, Title: "offered requests/s per GPU",
		read: func(s Subject) (float64, bool) {
			r, ok := s.rate()
			return r / s.gpus(), ok
		}},
	// Interactivity: the decode speed one user sees.
	{Name: "tokens_per_user", Unit: "tok/s", Better: Higher, Title: "tokens/s per user", Heading: "tok/s per user",
		read: func(s Subject) (float64, bool) {
			t := s.Summary.TPOT
			if t.N == 0 || t.Median <= 0 {
				return 0, false
			}
			return 1000 / t.Median, true
		}},
	{Name: "cost_per_mtok", Unit: "$/Mtok", Better: Lower, Title: "cost per million output tokens", Heading: "$/Mtok",
		read: func(s Subject) (float64, bool) {
			if s.Price <= 0 {
				return 0, false
			}
			return CostPerMTok(s.Price, max(s.GPUs, 1), s.Summary.OutputThroughput), true
		}},
	// Only where NVML measured the level's energy.
	{Name: "output_tokens_per_joule", Unit: "tok/J", Better: Higher, Title: "output tokens per joule",
		read: func(s Subject) (float64, bool) {
			g := s.Summary.GPU
			if g == nil || g.EnergyJ <= 0 {
				return 0, false
			}
			return g.OutputTokensPerJoule, true
		}},
}

// table is every metric: rateMetrics, then each ranked latency series
// with each of latencyStats.
var table, aliases = func() ([]Metric, map[string]string) {
	out := slices.Clone(rateMetrics)
	al := map[string]string{}
	for _, sr := range latencySeries {
		if !sr.ranked {
			continue
		}
		for _, st := range latencyStats {
			name := sr.name + "_" + st.name
			if st.alias != "" {
				al[sr.name+"_"+st.alias] = name
			}
			out = append(out, Metric{Name: name, Unit: "ms", Better: Lower, Series: sr.name, pct: st.pct,
				Title: st.name + " " + strings.ToUpper(sr.name),
				read: func(s Subject) (float64, bool) {
					x := *sr.stats(&s.Summary)
					if x.N == 0 {
						return 0, false
					}
					return st.of(x), true
				}})
		}
	}
	for i, m := range out {
		if m.Heading == "" {
			out[i].Heading = m.Title + " (" + m.Unit + ")"
		}
	}
	return out, al
}()

// Metrics returns the metric table, in its order: rates, then latencies.
func Metrics() []Metric { return slices.Clone(table) }

// MetricNames are the table's names, in its order.
func MetricNames() []string {
	out := make([]string, len(table))
	for i, m := range table {
		out[i] = m.Name
	}
	return out
}

// Vocabulary is every name the table answers to: its metrics' names and
// their aliases (ttft_median), and the latency series' names (ttft,
// queue, client_queue_time): what internal/archtest's rule
// metric-names-once keeps out of switches and lists elsewhere.
func Vocabulary() (metrics, series []string) {
	metrics = MetricNames()
	for a := range aliases {
		metrics = append(metrics, a)
	}
	slices.Sort(metrics[len(table):])
	for _, sr := range append(slices.Clone(latencySeries), clientQueueSeries) {
		series = append(series, sr.name)
	}
	return metrics, series
}

// LookupMetric finds a metric by its name, or by an alias
// (ttft_median for ttft_p50).
func LookupMetric(name string) (Metric, bool) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, m := range table {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// LatencyMetrics says which names Summary.Latency reads, for messages:
// "ttft, tpot, itl or e2el with _mean, _p50, _p90, _p95 or _p99".
func LatencyMetrics() string {
	var sr, st []string
	for _, s := range latencySeries {
		if s.ranked {
			sr = append(sr, s.name)
		}
	}
	for _, s := range latencyStats {
		st = append(st, "_"+s.name)
	}
	or := func(xs []string) string {
		return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
	}
	return or(sr) + " with " + or(st)
}

// IsLatencySeries reports whether name is one of the Summary's latency
// series (ttft, tpot, itl, e2el): the names vLLM's --percentile-metrics takes.
func IsLatencySeries(name string) bool {
	for _, s := range latencySeries {
		if s.name == name {
			return true
		}
	}
	return false
}

// Latency is a latency metric of the table by name (ttft_p99, or an alias
// such as ttft_median), in ms; ok is false for another name or a series
// with no sample.
func (s *Summary) Latency(name string) (ms float64, ok bool) {
	m, found := LookupMetric(name)
	if !found || m.Series == "" {
		return 0, false
	}
	return m.Read(Subject{Level: Level{Summary: *s}})
}

// CostPerMTok is the $ per million output tokens of gpus GPUs at price $ per
// GPU-hour producing outputPerSec output tokens per second. It is +Inf when
// nothing was produced and 0 when the price is unknown.
func CostPerMTok(price float64, gpus int, outputPerSec float64) float64 {
	if price <= 0 {
		return 0
	}
	if outputPerSec <= 0 {
		return math.Inf(1)
	}
	return price * float64(gpus) / (outputPerSec * 3600) * 1e6
}

// Limit is the field of slo that bounds a latency series: vLLM's
// --goodput keys ttft, tpot and e2el; nil for another series.
func (slo *SLO) Limit(series string) *float64 {
	switch series {
	case "ttft":
		return &slo.TTFTms
	case "tpot":
		return &slo.TPOTms
	case "e2el":
		return &slo.E2ELms
	}
	return nil
}

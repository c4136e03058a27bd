package recommend

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
)

// ErrUnknownMetric is returned for a metric name Metric does not know.
var ErrUnknownMetric = errors.New("unknown metric")

// Point is one measured (trial, load level) point: the unit of the Pareto
// front and of recommendations.
type Point struct {
	Trial         int            // trial number
	Index         int            // index of the load level in the trial
	Settings      space.Settings // the trial's launch settings
	GPUs          int            // GPUs the trial used
	Price         float64        // $ per GPU-hour; 0 when unknown
	measure.Level                // the load as run (Load) and what was measured (Summary)
}

// Metrics are the names a Point can be ranked by: the metric table's
// (internal/load/measure/metric.go), with its units.
var Metrics = measure.MetricNames()

// Unit is how a metric is measured, for output: "tok/s/GPU", "ms", ...
func Unit(metric string) string {
	if m, ok := measure.LookupMetric(metric); ok {
		return m.Unit
	}
	return "ms"
}

// Format writes a value of metric with its unit: "12.3 req/s/GPU".
func Format(metric string, v float64) string {
	if metric == "cost_per_mtok" {
		return measure.DollarsPer(v, "Mtok")
	}
	return fmt.Sprintf("%.4g %s", v, Unit(metric))
}

// KnownMetric reports whether name is one of Metrics.
func KnownMetric(name string) bool { return slices.Contains(Metrics, name) }

// CostPerMTok is measure.CostPerMTok: $ per million output tokens.
func CostPerMTok(price float64, gpus int, outputPerSec float64) float64 {
	return measure.CostPerMTok(price, gpus, outputPerSec)
}

// Metric returns the named metric of p (the metric table's reading); ok
// is false for a metric the point has no value for (no completed
// request) or an unknown name.
func (p Point) Metric(name string) (v float64, ok bool) {
	m, found := measure.LookupMetric(name)
	if !found {
		return 0, false
	}
	return m.Read(measure.Subject{Level: p.Level, GPUs: p.GPUs, Price: p.Price})
}

// Objective is one direction of interest, e.g. "max output_throughput_per_gpu".
type Objective struct {
	Metric   string
	Maximize bool
}

func (o Objective) String() string {
	if o.Maximize {
		return "max " + o.Metric
	}
	return "min " + o.Metric
}

// ParseObjective parses "max METRIC" or "min METRIC".
func ParseObjective(s string) (Objective, error) {
	dir, metric, ok := strings.Cut(strings.TrimSpace(s), " ")
	metric = strings.TrimSpace(metric)
	if !ok || metric == "" {
		return Objective{}, fmt.Errorf("objective %q: want \"max METRIC\" or \"min METRIC\"", s)
	}
	var o Objective
	switch dir {
	case "max":
		o.Maximize = true
	case "min":
	default:
		return Objective{}, fmt.Errorf("objective %q: direction %q is not max or min", s, dir)
	}
	if !KnownMetric(metric) {
		return Objective{}, fmt.Errorf("objective %q: %w %q", s, ErrUnknownMetric, metric)
	}
	o.Metric = metric
	return o, nil
}

// score maps a value of o's metric to the sampler's "higher is better"
// scale: the value itself when maximising, its negation when minimising.
func (o Objective) Score(v float64) float64 {
	if o.Maximize {
		return v
	}
	return -v
}

// better reports whether a is strictly better than b under o.
func (o Objective) Better(a, b float64) bool {
	if o.Maximize {
		return a > b
	}
	return a < b
}

// Limit is one SLO: Metric must not exceed Max (milliseconds; a fraction
// for ErrorRate).
type Limit struct {
	Metric string
	Max    float64
}

// ErrorRate is the SLO's bound on the share of a level's requests that
// failed (slo.error_rate: 0.01 accepts 1%). Without it no failure is
// accepted.
const ErrorRate = "error_rate"

// SLO is a set of limits a point must meet: latency limits, and at most
// one ErrorRate bound.
type SLO []Limit

// Latency is the SLO without its ErrorRate bound: the latency limits only.
func (slo SLO) Latency() SLO {
	out := make(SLO, 0, len(slo))
	for _, l := range slo {
		if l.Metric != ErrorRate {
			out = append(out, l)
		}
	}
	return out
}

// MaxErrorRate is the share of failed requests a level may have and meet
// the SLO: the ErrorRate bound, 0 without one.
func (slo SLO) MaxErrorRate() float64 {
	for _, l := range slo {
		if l.Metric == ErrorRate {
			return l.Max
		}
	}
	return 0
}

// FailedShare is the share of a level's measured requests that failed.
func FailedShare(s measure.Summary) float64 {
	if n := s.Completed + s.Failed; n > 0 {
		return float64(s.Failed) / float64(n)
	}
	return 0
}

// Met reports whether p meets every limit. A point without the metric (no
// completed request) or with more failed requests than the ErrorRate bound
// allows (by default, any) does not meet it.
func (slo SLO) Met(p Point) bool { return slo.Miss(p) == "" }

// Miss says why p does not meet the SLO, "" when it does: "2 of 4
// requests failed (50%; the SLO allows none: slo.error_rate)", "ttft_p99
// 912 ms > 800".
func (slo SLO) Miss(p Point) string {
	s := p.Summary
	// Latency percentiles cover completed requests only, so a level that
	// dropped requests could look fast: past the bound, it does not meet
	// the SLOs.
	if s.Completed == 0 {
		if s.Failed > 0 {
			return fmt.Sprintf("all %d requests failed", s.Failed)
		}
		return "no request completed"
	}
	var why []string
	if share, bound := FailedShare(s), slo.MaxErrorRate(); s.Failed > 0 && share > bound {
		allows := "none: set slo.error_rate to accept some"
		if bound > 0 {
			allows = fmt.Sprintf("%s (slo.error_rate)", percent(bound))
		}
		why = append(why, fmt.Sprintf("%d of %d requests failed (%s; the SLO allows %s)", s.Failed, s.Completed+s.Failed, percent(share), allows))
	}
	if s.Unsustained {
		why = append(why, "the rate was not sustained (the queue kept growing)")
	}
	for _, l := range slo {
		if l.Metric == ErrorRate {
			continue
		}
		v, ok := p.Metric(l.Metric)
		switch {
		case !ok:
			why = append(why, l.Metric+" not measured")
		case v > l.Max:
			why = append(why, fmt.Sprintf("%s %.4g ms > %g", l.Metric, v, l.Max))
		}
	}
	return strings.Join(why, ", ")
}

// once refuses an SLO that bounds the error rate twice.
func (slo SLO) once() error {
	n := 0
	for _, l := range slo {
		if l.Metric == ErrorRate {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%s given %d times", ErrorRate, n)
	}
	return nil
}

// percent writes a share as a percentage: "50%", "0.1%".
func percent(f float64) string { return fmt.Sprintf("%.3g%%", 100*f) }

// Goodput returns the per-request limits bench uses to count goodput: the
// tightest limit given for each of TTFT, TPOT and E2EL.
func (slo SLO) Goodput() measure.SLO {
	var g measure.SLO
	tight := func(cur *float64, v float64) {
		if *cur == 0 || v < *cur {
			*cur = v
		}
	}
	for _, l := range slo.Latency() {
		if m, ok := measure.LookupMetric(l.Metric); ok {
			if p := g.Limit(m.Series); p != nil {
				tight(p, l.Max)
			}
		}
	}
	return g
}

func (slo SLO) String() string {
	if len(slo) == 0 {
		return "none"
	}
	parts := make([]string, len(slo))
	for i, l := range slo {
		if l.Metric == ErrorRate {
			parts[i] = fmt.Sprintf("%s<=%s", l.Metric, percent(l.Max))
			continue
		}
		parts[i] = fmt.Sprintf("%s<=%gms", l.Metric, l.Max)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// TrialValue is the scalar the sampler optimises for one trial: the best
// value of obj over the trial's load levels that meet the SLOs (Met), the
// one definition the live best, `pareto` and `recommend` share. A level
// that misses the SLOs counts for nothing, even its goodput (the requests
// in it that met the limits were served by a configuration that does not).
// ok is false when no level qualifies.
func TrialValue(points []Point, obj Objective, slo SLO) (v float64, ok bool) {
	_, v, ok = BestPoint(points, obj, slo)
	return v, ok
}

// BestPoint is the point of points that gives TrialValue, and its value.
func BestPoint(points []Point, obj Objective, slo SLO) (best int, v float64, ok bool) {
	for i, p := range points {
		if !slo.Met(p) {
			continue
		}
		m, has := p.Metric(obj.Metric)
		if !has {
			continue
		}
		if !ok || obj.Better(m, v) {
			best, v, ok = i, m, true
		}
	}
	return best, v, ok
}

// RequestFailures says how many of the levels' measured requests failed,
// and how, "" when none did: "4 of 8 requests failed (50%; http_5xx 4:
// HTTP 500: overloaded)". A trial can be ok with failures in its levels;
// every view of it says so.
func RequestFailures(levels []measure.Level) string {
	failed, total := 0, 0
	classes := map[string]int{}
	first := map[string]string{}
	for _, lv := range levels {
		s := lv.Summary
		failed += s.Failed
		total += s.Completed + s.Failed
		for c, n := range s.Errors {
			if n > 0 {
				classes[c] += n
				if first[c] == "" {
					first[c] = s.ErrorMessages[c]
				}
			}
		}
	}
	if failed == 0 {
		return ""
	}
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool {
		if classes[names[i]] != classes[names[j]] {
			return classes[names[i]] > classes[names[j]]
		}
		return names[i] < names[j]
	})
	var how []string
	for _, c := range names {
		h := fmt.Sprintf("%s %d", c, classes[c])
		if m := first[c]; m != "" {
			if r := []rune(m); len(r) > 120 {
				m = string(r[:117]) + "..."
			}
			h += ": " + m
		}
		how = append(how, h)
	}
	out := fmt.Sprintf("%d of %d requests failed (%s", failed, total, percent(float64(failed)/float64(total)))
	if len(how) > 0 {
		out += "; " + strings.Join(how, "; ")
	}
	return out + ")"
}

package recommend

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
)

// Front returns the points of pts that no other point dominates under objs,
// in input order. A point dominates another when it is at least as good on
// every objective and strictly better on one. Points lacking a value for an
// objective are left out. Duplicated metric vectors are all kept.
func Front(pts []Point, objs []Objective) []Point {
	type row struct {
		p Point
		v []float64
	}
	rows := make([]row, 0, len(pts))
	for _, p := range pts {
		v := make([]float64, len(objs))
		ok := true
		for i, o := range objs {
			m, has := p.Metric(o.Metric)
			if !has {
				ok = false
				break
			}
			v[i] = m
		}
		if ok {
			rows = append(rows, row{p, v})
		}
	}
	dominates := func(a, b []float64) bool {
		strict := false
		for i, o := range objs {
			if o.Better(b[i], a[i]) {
				return false
			}
			if o.Better(a[i], b[i]) {
				strict = true
			}
		}
		return strict
	}
	var front []Point
	for i, r := range rows {
		dominated := false
		for j, q := range rows {
			if i != j && dominates(q.v, r.v) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, r.p)
		}
	}
	return front
}

// Preference says what Recommend optimises among the points that meet the
// SLOs: a named preference (throughput, cost, latency), the study's own
// objective (PreferObjective, resolved with Preference.For), or any
// objective written as the spec writes one ("max goodput_per_gpu").
type Preference string

// Preferences Recommend knows by name.
const (
	PreferThroughput Preference = "throughput" // max output tokens/s per GPU
	PreferCost       Preference = "cost"       // min $ per million output tokens
	PreferLatency    Preference = "latency"    // min p99 TTFT
	// PreferObjective is the study's tuner.objective: what its sampler
	// optimised, and what recommend, report, diagnose and the dashboard
	// rank by unless told otherwise.
	PreferObjective Preference = "objective"
)

// ParsePreference checks a --prefer value: throughput, cost, latency,
// objective (the study's tuner.objective), a metric name (its direction
// from the metric table: goodput_per_gpu is maximised, ttft_p99
// minimised) or "max METRIC" / "min METRIC".
func ParsePreference(s string) (Preference, error) {
	s = strings.TrimSpace(s)
	switch p := Preference(s); p {
	case PreferThroughput, PreferCost, PreferLatency, PreferObjective:
		return p, nil
	}
	if m, ok := measure.LookupMetric(s); ok {
		return Preference(Objective{Metric: m.Name, Maximize: m.Better == measure.Higher}.String()), nil
	}
	if o, err := ParseObjective(s); err == nil {
		return Preference(o.String()), nil
	}
	return "", fmt.Errorf("preference %q: want throughput, cost, latency, objective (the study's tuner.objective), a metric (e.g. goodput_per_gpu) or \"max METRIC\" / \"min METRIC\"; metrics: %s",
		s, strings.Join(Metrics, ", "))
}

// For resolves PreferObjective to the study's objective obj (spelled as
// an objective, "max goodput_per_gpu"); other preferences are returned as
// they are. Without an objective (obj.Metric empty) it is throughput.
func (p Preference) For(obj Objective) Preference {
	if p != PreferObjective && p != "" {
		return p
	}
	if obj.Metric == "" {
		return PreferThroughput
	}
	return Preference(obj.String())
}

// Describe names what p ranks by for a reader: "throughput", "max
// goodput_per_gpu (the study's objective)" when p resolved from the
// study's objective obj.
func (p Preference) Describe(obj Objective) string {
	if obj.Metric != "" && string(p) == obj.String() {
		return string(p) + " (the study's objective)"
	}
	return string(p)
}

// Primary is the objective p ranks by first.
func (p Preference) Primary() Objective { return p.objectives()[0] }

// objectives returns the ranking of a preference: the primary objective then
// tie-breakers.
func (p Preference) objectives() []Objective {
	switch p {
	case PreferCost:
		return []Objective{{"cost_per_mtok", false}, {"output_throughput_per_gpu", true}, {"ttft_p99", false}}
	case PreferLatency:
		return []Objective{{"ttft_p99", false}, {"e2el_p99", false}, {"output_throughput_per_gpu", true}}
	case PreferThroughput, PreferObjective, "":
		return []Objective{{"output_throughput_per_gpu", true}, {"ttft_p99", false}}
	}
	o, err := ParseObjective(string(p))
	if err != nil {
		return PreferThroughput.objectives()
	}
	rank := []Objective{o}
	for _, tie := range []Objective{{"output_throughput_per_gpu", true}, {"ttft_p99", false}} {
		if tie.Metric != o.Metric {
			rank = append(rank, tie)
		}
	}
	return rank
}

// ErrNoFeasible is returned by Recommend when no measured point meets the SLOs.
var ErrNoFeasible = errors.New("no measured point meets the SLOs")

// Recommend picks the best point for pref among the points that meet slo,
// from the Pareto front over objs plus pref's own objective (so the pick is
// both on the front and the best for pref). Ties go to the lower trial number.
func Recommend(pts []Point, objs []Objective, slo SLO, pref Preference) (Point, error) {
	var ok []Point
	for _, p := range pts {
		if slo.Met(p) {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return Point{}, ErrNoFeasible
	}
	rank := pref.objectives()
	if rank[0].Metric == "cost_per_mtok" {
		// Without a price, cost ranks like throughput per GPU.
		if _, has := ok[0].Metric("cost_per_mtok"); !has {
			rank = PreferThroughput.objectives()
		}
	}
	front := Front(ok, append(append([]Objective(nil), objs...), rank[0]))
	if len(front) == 0 {
		// The objectives lack values (e.g. no TPOT); rank all feasible points.
		front = ok
	}
	sort.SliceStable(front, func(i, j int) bool {
		for _, o := range rank {
			a, ha := front[i].Metric(o.Metric)
			b, hb := front[j].Metric(o.Metric)
			if ha != hb {
				return ha
			}
			if a != b {
				return o.Better(a, b)
			}
		}
		if front[i].Trial != front[j].Trial {
			return front[i].Trial < front[j].Trial
		}
		return front[i].Index < front[j].Index
	})
	return front[0], nil
}

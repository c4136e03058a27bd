package recommend

import (
	"errors"
	"fmt"
	"sort"
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
// SLOs.
type Preference string

// Preferences Recommend knows.
const (
	PreferThroughput Preference = "throughput" // max output tokens/s per GPU
	PreferCost       Preference = "cost"       // min $ per million output tokens
	PreferLatency    Preference = "latency"    // min p99 TTFT
)

// ParsePreference checks a --prefer value.
func ParsePreference(s string) (Preference, error) {
	switch p := Preference(s); p {
	case PreferThroughput, PreferCost, PreferLatency:
		return p, nil
	}
	return "", fmt.Errorf("preference %q: want throughput, cost or latency", s)
}

// objectives returns the ranking of a preference: the primary objective then
// tie-breakers.
func (p Preference) objectives() []Objective {
	switch p {
	case PreferCost:
		return []Objective{{"cost_per_mtok", false}, {"output_throughput_per_gpu", true}, {"ttft_p99", false}}
	case PreferLatency:
		return []Objective{{"ttft_p99", false}, {"e2el_p99", false}, {"output_throughput_per_gpu", true}}
	}
	return []Objective{{"output_throughput_per_gpu", true}, {"ttft_p99", false}}
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
	if pref == PreferCost {
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

package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Effect is how much of the objective's spread across trials one
// parameter accounts for.
type Effect struct {
	Param  string
	Eta2   float64 // correlation ratio η², 0..1
	Groups int     // groups the trials were split into
	N      int     // trials counted
}

// Importance estimates each parameter's effect on the objective as the
// correlation ratio η² = between-group sum of squares / total sum of
// squares, grouping the trials by the parameter's value (a numeric
// parameter with more than four distinct values in four bins of equal
// count). It is a rough, one-parameter-at-a-time reading: interactions
// and the sampler's bias towards good regions are not separated out, and
// with few trials per group η² is biased upwards. values[i] is the
// objective of trial i and params[name][i] its value of the parameter.
// Parameters come back most important first.
func Importance(values []float64, params map[string][]any) []Effect {
	var out []Effect
	mean, total := meanSS(values)
	for name, col := range params {
		if len(col) != len(values) || len(values) < 2 {
			continue
		}
		keys := groupKeys(col)
		groups := map[string][]float64{}
		for i, k := range keys {
			groups[k] = append(groups[k], values[i])
		}
		e := Effect{Param: name, Groups: len(groups), N: len(values)}
		if total > 0 && len(groups) > 1 {
			between := 0.0
			for _, g := range groups {
				m, _ := meanSS(g)
				between += float64(len(g)) * (m - mean) * (m - mean)
			}
			e.Eta2 = math.Min(between/total, 1)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Eta2 != out[j].Eta2 {
			return out[i].Eta2 > out[j].Eta2
		}
		return out[i].Param < out[j].Param
	})
	return out
}

func meanSS(xs []float64) (mean, ss float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, ss
}

// groupKeys names each value's group: the value itself, or for numbers
// with more than four distinct values, the quartile bin it falls in.
func groupKeys(col []any) []string {
	keys := make([]string, len(col))
	nums := make([]float64, 0, len(col))
	distinct := map[float64]bool{}
	numeric := true
	for _, v := range col {
		f, ok := engine.Number(v)
		if !ok {
			numeric = false
			break
		}
		nums = append(nums, f)
		distinct[f] = true
	}
	if !numeric || len(distinct) <= 4 {
		for i, v := range col {
			keys[i] = fmt.Sprint(v)
		}
		return keys
	}
	sorted := append([]float64(nil), nums...)
	sort.Float64s(sorted)
	// Bin edges at the quartiles, each one of the values: equal values
	// share a bin.
	q := measure.Quartiles(sorted)
	edges := q[:]
	for i, f := range nums {
		b := sort.SearchFloat64s(edges, f)
		if b < len(edges) && edges[b] == f {
			b++ // a value on an edge belongs to the bin above it
		}
		keys[i] = fmt.Sprintf("bin %d", b)
	}
	return keys
}

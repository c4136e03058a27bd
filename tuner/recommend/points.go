package recommend

import (
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
)

// Terms are what ranking a study's measurements reads of its spec: the
// Pareto objectives, the SLOs, the price of a GPU-hour (0 without one) and
// the space (a configuration it no longer holds is not recommended), and
// the study's tuner.objective (what PreferObjective ranks by).
type Terms struct {
	Objectives []Objective
	Objective  Objective
	SLO        SLO
	Price      float64
	Space      space.Space
}

// Noise is how much a repeated run of one configuration moves its
// throughput: about 2%. The guided sampler stops within it, and
// confirmation runs are told apart by a multiple of it (runsApart).
const Noise = 0.02

// PointsOf turns a trial's measured levels into Pareto points.
func PointsOf(number int, settings space.Settings, price float64, levels []measure.Level) []Point {
	pts := make([]Point, 0, len(levels))
	for i, lv := range levels {
		pts = append(pts, Point{Trial: number, Index: i, Settings: settings, GPUs: settings.GPUs(),
			Price: price, Level: lv})
	}
	return pts
}

// StoredPoints returns the (trial, load level) points of stored search
// trials with status ok, in trial and level order (confirmation runs
// measure the same configurations again: RecommendStudy reads them).
func StoredPoints(trials []store.Trial, price float64) []Point {
	var pts []Point
	for _, t := range trials {
		if t.Status == measure.StatusOK && t.Confirms == nil && t.Unreadable == "" {
			pts = append(pts, PointsOf(t.Number, t.Settings, price, t.LoadPoints)...)
		}
	}
	return pts
}

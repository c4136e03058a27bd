package quality

import (
	"github.com/servetune/servetune/internal/load/measure"
)

// SimulatedReason is the gate's verdict on the simulated engine's answers.
const SimulatedReason = "the server is servetune's simulated engine, whose answers are placeholder text, not a model's: there is nothing to score"

// Agreement is the share of items, in percent, whose answers a and b gave
// alike (after Normalize); an item either left unanswered disagrees.
func Agreement(a, b []string) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return 0
	}
	same := 0
	for i := range a {
		if a[i] != "" && Normalize(a[i]) == Normalize(b[i]) {
			same++
		}
	}
	return 100 * float64(same) / float64(len(a))
}

// Judge compares a configuration's result with the baseline's on the same
// task set: it passes when its accuracy is at most maxDropPct percentage
// points below the baseline's. A simulated server, or results of different
// task sets, are not scored (Quality.Scored false, with the reason), never
// passed.
func Judge(cand, base Result, maxDropPct float64) measure.Quality {
	q := measure.Quality{Items: cand.Items, Errors: cand.Errors, AccuracyPct: cand.AccuracyPct, ByKindPct: cand.ByKindPct,
		BaselineAccuracyPct: base.AccuracyPct, MaxDropPct: maxDropPct}
	switch {
	case cand.Simulated || base.Simulated:
		q.Reason = SimulatedReason
		return q
	case cand.Items != base.Items || len(cand.Outputs) != len(base.Outputs):
		q.Reason = "the configuration and the baseline were asked different task sets"
		return q
	}
	q.Scored = true
	q.DropPct = base.AccuracyPct - cand.AccuracyPct
	q.AgreementPct = Agreement(cand.Outputs, base.Outputs)
	q.Pass = q.DropPct <= maxDropPct
	return q
}

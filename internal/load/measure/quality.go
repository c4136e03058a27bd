package measure

import (
	"fmt"
	"sort"
	"strings"
)

// Quality is a configuration's answer quality measured by the quality gate:
// exact-match accuracy on a seeded task set with greedy decoding, against
// the same measurement of the study's baseline configuration.
type Quality struct {
	// Scored is false when the gate could not score the answers (the
	// simulated engine's are not a model's); Reason then says why, and
	// nothing passed.
	Scored bool   `json:"scored"`
	Pass   bool   `json:"pass"`
	Reason string `json:"reason,omitempty"`

	Items       int     `json:"items"`
	Errors      int     `json:"errors,omitempty"` // items the server failed to answer (counted wrong)
	AccuracyPct float64 `json:"accuracy_pct"`
	// ByKindPct is the accuracy of each kind of task (arithmetic, copy,
	// count, date).
	ByKindPct map[string]float64 `json:"by_kind_pct,omitempty"`

	BaselineAccuracyPct float64 `json:"baseline_accuracy_pct"`
	// DropPct is the baseline's accuracy minus this one, in percentage
	// points; the gate fails a configuration whose drop exceeds MaxDropPct.
	DropPct    float64 `json:"drop_pct"`
	MaxDropPct float64 `json:"max_drop_pct"`
	// AgreementPct is the share of items whose greedy answer is the
	// baseline's, character for character.
	AgreementPct float64 `json:"agreement_pct"`
}

// String is the verdict in one line, with both scores.
func (q Quality) String() string {
	if !q.Scored {
		return "quality not scored: " + q.Reason
	}
	verdict := "passes"
	if !q.Pass {
		verdict = "fails"
	}
	s := fmt.Sprintf("quality %s: accuracy %.1f%% vs baseline %.1f%% (drop %.1f points, at most %.1f allowed), agreement with the baseline %.1f%% over %d items",
		verdict, q.AccuracyPct, q.BaselineAccuracyPct, q.DropPct, q.MaxDropPct, q.AgreementPct, q.Items)
	if q.Errors > 0 {
		s += fmt.Sprintf(", %d unanswered", q.Errors)
	}
	if len(q.ByKindPct) > 0 {
		kinds := make([]string, 0, len(q.ByKindPct))
		for k := range q.ByKindPct {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", k, q.ByKindPct[k]))
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

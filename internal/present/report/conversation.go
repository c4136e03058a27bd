package report

import (
	"fmt"
	"sort"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
)

// convView is a conversation study's evidence (measure.Conversation): how
// much of the prompts was history, how much of it the engine's prefix
// cache served, and each turn's median TTFT, for the recommended
// configuration, the runner-up and, when the space searches
// prefix_caching and neither has it the other way, the best trial that
// does, each at the recommended level where it was measured there.
type convView struct {
	Intro string
	Rows  []convRow
	Turns []turnRow // a row per turn, a column per convRow
	Note  string
}

// turnRow is one turn's median TTFT under each configuration shown.
type turnRow struct {
	Turn   int
	Tokens string // the turn's mean prompt length
	TTFT   []string
}

type convRow struct {
	Role     string // "recommended", "runner-up", "best with prefix_caching=false"
	Trial    int
	Level    string
	Settings string
	HitRate  string
	Turns    []string
	Session  string
}

// conversation fills v.Conv for a study whose levels ran conversations.
func (s *StudyReport) conversation(v *view) {
	rec, err := recommend.RecommendStudy(s.Trials, s.Spec.Terms(), recommend.PreferObjective)
	if err != nil {
		return
	}
	level := rec.Best.Point.Label
	byNum := map[int]store.Trial{}
	for _, t := range s.Trials {
		byNum[t.Number] = t
	}
	// at is trial n's level: the recommended one when it was measured
	// there (equal load), else its own best.
	at := func(n int, own string) *measure.Level {
		t := byNum[n]
		var fallback *measure.Level
		for i := range t.LoadPoints {
			lp := &t.LoadPoints[i]
			if lp.Summary.Conversation == nil {
				continue
			}
			if lp.Label == level {
				return lp
			}
			if lp.Label == own {
				fallback = lp
			}
		}
		return fallback
	}
	type pick struct {
		role string
		n    int
		own  string
	}
	picks := []pick{{"recommended", rec.Best.Trial, level}}
	if ru := rec.RunnerUp; ru != nil {
		picks = append(picks, pick{"runner-up", ru.Trial, ru.Point.Label})
	}
	if other, ok := otherCaching(s.Trials, s.Spec.Tuner.Objective, picks[0].n, &rec); ok {
		picks = append(picks, pick{fmt.Sprintf("best with prefix_caching=%v", other.Settings["prefix_caching"]), other.Number, ""})
	}
	c := &convView{}
	turns := 0
	for _, p := range picks {
		lp := at(p.n, p.own)
		if lp == nil {
			continue
		}
		cv := lp.Summary.Conversation
		row := convRow{Role: p.role, Trial: p.n, Level: lp.Label, Settings: SettingsLine(byNum[p.n].Settings),
			HitRate: "not read", Session: fmtMS(cv.MedianSessionMS)}
		if p.role != "recommended" {
			row.Settings = differs(byNum[rec.Best.Trial].Settings, byNum[p.n].Settings)
		}
		if r := cv.PrefixCacheHitRate; r != nil {
			row.HitRate = fmt.Sprintf("%.0f%%", 100**r)
		}
		for _, tr := range cv.Turns {
			row.Turns = append(row.Turns, fmtMS(tr.MedianTTFTMS))
		}
		if len(c.Rows) == 0 {
			turns = len(cv.Turns)
			for _, tr := range cv.Turns {
				c.Turns = append(c.Turns, turnRow{Turn: tr.Turn, Tokens: fmt.Sprintf("%.0f", tr.MeanInputTokens)})
			}
			c.Intro = fmt.Sprintf("Each turn resends the conversation so far: %.0f%% of the prompt tokens sent at %s were history (%d new, %d reused: the same conversations for every configuration), which the engine's prefix cache can serve instead of computing again.",
				100*cv.ReusedShare, lp.Label, cv.NewInputTokens, cv.ReusedInputTokens)
		}
		for len(row.Turns) < turns {
			row.Turns = append(row.Turns, "–")
		}
		for k := range c.Turns {
			c.Turns[k].TTFT = append(c.Turns[k].TTFT, row.Turns[k])
		}
		c.Rows = append(c.Rows, row)
	}
	if len(c.Rows) == 0 {
		return
	}
	c.Note = "Hit rate: the share of prompt tokens the engine served from its prefix cache (its own counters, read over the level). Session: the median from a session's first send to its last answer, think times included. Per turn: the median TTFT over the sessions, with the turn's mean prompt length (its history included)."
	v.Conv = c
}

// otherCaching is the best search trial (by the study's objective, the
// value stored with each trial) whose
// prefix_caching differs from the recommended trial's, when the space
// searches it and neither the recommendation nor the runner-up shows the
// other value.
func otherCaching(trials []store.Trial, obj recommend.Objective, best int, rec *recommend.Recommendation) (store.Trial, bool) {
	var bestSet space.Settings
	for _, t := range trials {
		if t.Number == best {
			bestSet = t.Settings
		}
	}
	mine, ok := bestSet["prefix_caching"]
	if !ok {
		return store.Trial{}, false
	}
	if ru := rec.RunnerUp; ru != nil && fmt.Sprint(ru.Settings["prefix_caching"]) != fmt.Sprint(mine) {
		return store.Trial{}, false
	}
	var cands []store.Trial
	for _, t := range trials {
		if t.Confirms == nil && t.Status == measure.StatusOK && t.Objective != nil && fmt.Sprint(t.Settings["prefix_caching"]) != fmt.Sprint(mine) {
			cands = append(cands, t)
		}
	}
	if len(cands) == 0 {
		return store.Trial{}, false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if obj.Maximize {
			return *cands[i].Objective > *cands[j].Objective
		}
		return *cands[i].Objective < *cands[j].Objective
	})
	return cands[0], true
}

func fmtMS(ms float64) string {
	if ms <= 0 {
		return "–"
	}
	if ms < 100 {
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

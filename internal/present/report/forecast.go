package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
)

// maxAxisValues is the most values of a numeric parameter whose chart
// has a column per value (a stepped range's own ticks, paramScatter):
// only those have a column that can stand empty.
const maxAxisValues = 8

// axisValue is one value of a parameter as its chart's x axis places it.
type axisValue struct {
	name string  // as the axis labels it
	key  string  // valueKey of the value
	x    float64 // its place on the axis
}

// axisValues are the values of p that its chart gives a column each:
// every choice of a categorical or boolean parameter (at its index), the
// values of a numeric one with at most maxAxisValues; none for a range.
func axisValues(p space.Param) []axisValue {
	switch p.Kind {
	case space.KindCategorical, space.KindBool:
		names := choiceNames(p)
		out := make([]axisValue, len(names))
		for i, n := range names {
			out[i] = axisValue{name: n, key: n, x: float64(i)}
		}
		return out
	}
	vals, err := p.Values()
	if err != nil || len(vals) > maxAxisValues {
		return nil
	}
	var out []axisValue
	for _, v := range vals {
		if f, ok := engine.Number(v); ok {
			out = append(out, axisValue{name: fmt.Sprint(normalize(v)), key: valueKey(p, v), x: f})
		}
	}
	return out
}

// valueKey is how a setting's value is matched to an axis value: numbers
// to ten digits (a stepped range's 0.85 may be stored as 0.8500000000000001),
// anything else as it prints.
func valueKey(p space.Param, v any) string {
	if p.Kind != space.KindCategorical && p.Kind != space.KindBool {
		if f, ok := engine.Number(v); ok {
			return strconv.FormatFloat(f, 'g', 10, 64)
		}
	}
	return fmt.Sprint(normalize(v))
}

// notes are the caption lines of marks: one a value, the values neither
// measured nor forecast together ("max_running_requests=8, 16: not
// measured").
func notes(p space.Param, marks []valueMark) []string {
	var out, untried []string
	for _, m := range marks {
		if m.untried {
			untried = append(untried, m.name)
			continue
		}
		out = append(out, m.text)
	}
	if len(untried) > 0 {
		out = append(out, p.Name+"="+strings.Join(untried, ", ")+": not measured")
	}
	return out
}

// valueMark is what the report says of a value on a parameter's axis that
// no search trial with a value measured, in place of an empty column.
type valueMark struct {
	axisValue
	// figure is the forecast's objective for the value (its best
	// configuration's), drawn at its column; 0 when it has none.
	figure float64
	short  string // in the chart, up its column
	text   string // in the caption: "max_running_requests=8: ruled out by the forecast: ..."
	// untried: neither measured nor forecast; the caption names such
	// values on one line (a long list of choices says nothing more).
	untried bool
}

// unmeasured marks the values on p's axis without a point: measured in
// trials that gave no value (failed, or met the SLO at no level), else
// what the sampler's stored forecast said of the value's configurations,
// else not measured. drawn holds the keys (valueKey) of the values with a
// point; best is the best measured objective (NaN without one).
func (s *StudyReport) unmeasured(p space.Param, drawn map[string]bool, best float64) []valueMark {
	obj := s.Spec.Tuner.Objective
	tried := map[string]int{}
	for _, t := range s.Trials {
		if t.Confirms == nil && (t.Status == measure.StatusOK || t.Status == measure.StatusFailed) {
			tried[valueKey(p, t.Settings[p.Name])]++
		}
	}
	byValue := map[string][]store.Forecast{}
	for _, f := range s.Forecast {
		k := valueKey(p, f.Settings[p.Name])
		byValue[k] = append(byValue[k], f)
	}
	// An early stop rules the rest out; a study that ran its count only
	// did not reach them.
	verdict := "not measured; forecast"
	if s.Stored.Stop.Stopped() {
		verdict = "ruled out by the forecast"
	}
	var out []valueMark
	for _, av := range axisValues(p) {
		k := av.key
		if drawn[k] {
			continue
		}
		m := valueMark{axisValue: av}
		label := p.Name + "=" + av.name + ": "
		switch fcs := byValue[k]; {
		case tried[k] > 0:
			m.short = "measured: no value"
			m.text = label + fmt.Sprintf("measured in %d trial(s), none with a value: each failed or met the SLO at no load level", tried[k])
		case len(fcs) > 0:
			m.figure, m.short, m.text = forecastOf(fcs, obj, best)
			m.text = label + verdict + ": " + m.text
		default:
			m.short, m.untried = "not measured", true
		}
		out = append(out, m)
	}
	return out
}

// forecastOf is what the forecast said of a value from its configurations'
// forecasts: the best figure of one likely to start that meets the SLO,
// else why none does. best is the best measured objective (NaN without
// one).
func forecastOf(fcs []store.Forecast, obj recommend.Objective, best float64) (figure float64, short, text string) {
	var metUnlikely, ran bool
	found, rejected := false, 0
	for _, f := range fcs {
		switch {
		case f.Failure == string(engine.FailInfeasible):
			rejected++
		case f.Failure != "":
		case f.Met && f.PStart >= 0.5:
			if !found || (obj.Maximize && f.Value > figure) || (!obj.Maximize && f.Value < figure) {
				figure, found = f.Value, true
			}
		case f.Met:
			metUnlikely = true
		case f.PStart >= 0.5:
			ran = true
		}
	}
	switch {
	case found:
		text = "predicted " + recommend.Format(obj.Metric, figure)
		switch {
		case math.IsNaN(best):
		case math.Abs(figure/best-1) <= recommend.Noise:
			text += fmt.Sprintf(", within the %.0f%% noise of a measurement of the best measured %s", 100*recommend.Noise, recommend.Format(obj.Metric, best))
		default:
			text += ", best measured " + recommend.Format(obj.Metric, best)
		}
		return figure, "", text
	case metUnlikely:
		return 0, "forecast: won't start", "would meet the SLO but is predicted not to start (memory)"
	case ran:
		return 0, "forecast: misses SLO", "misses the SLO at every load level"
	case rejected == len(fcs):
		return 0, "rejected by the space", "the space's rules reject every configuration with it"
	}
	return 0, "forecast: won't start", "predicted not to start (memory)"
}

package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/recommend"
)

// Chart sizes in points (the SVG scales to the page).
const (
	wideW, wideH   = 430.0, 290.0
	smallW, smallH = 290.0, 210.0
)

// maxLatencyTrials caps the trials drawn in the latency-against-load
// charts: beyond eight lines nobody tells them apart.
const maxLatencyTrials = 8

func (s *StudyReport) charts(v *view, pts []recommend.Point) {
	study := s.Spec
	confirmPts := s.confirmationPoints()
	var chosen *recommend.Point
	if v.Rec != nil {
		for i := range pts {
			if pts[i].Trial == v.Rec.Trial && pts[i].Label == v.Rec.Level {
				chosen = &pts[i]
			}
		}
	}
	v.Pareto = s.frontChart("Throughput against interactivity",
		"tokens/s per user (1000 / median TPOT)", "output tokens/s per GPU",
		pts, confirmPts, chosen, "tokens_per_user", "output_throughput_per_gpu", true)
	if study.Hardware.PricePerGPUHour > 0 {
		v.Cost = s.frontChart("Cost against interactivity",
			"tokens/s per user (1000 / median TPOT)", "$ per million output tokens",
			pts, confirmPts, chosen, "tokens_per_user", "cost_per_mtok", false)
	} else {
		v.Cost = charted{SVG: template.HTML(`<p class="nodata">No price per GPU-hour: no cost view (give hardware.price_per_gpu_hour or a catalog GPU).</p>`)}
	}
	v.TTFT, v.TPOT = s.latencyCharts(pts)
	v.History = s.historyChart()
	v.Effects, v.ParamCharts, v.EffectRows = s.effectCharts()
	v.EffectMethod = "η² (the correlation ratio): the share of the objective's variance across the search trials that grouping the trials by this parameter's value explains; numeric parameters with more than four values are grouped in four bins of equal count. One parameter at a time: interactions are not separated, and the sampler's preference for good regions inflates it for the parameters it settled early."
}

// ParetoChart is the throughput-against-interactivity chart of the
// report, for pages that show it alone (the dashboard).
func (s *StudyReport) ParetoChart() template.HTML {
	pts := recommend.StoredPoints(s.Trials, s.Spec.Hardware.PricePerGPUHour)
	var chosen *recommend.Point
	if rec, err := recommend.RecommendStudy(s.Trials, s.Spec.Terms(), recommend.PreferObjective); err == nil {
		p := rec.Best.Point
		chosen = &p
	}
	return s.frontChart("Throughput against interactivity", "tokens/s per user (1000 / median TPOT)",
		"output tokens/s per GPU", pts, s.confirmationPoints(), chosen, "tokens_per_user", "output_throughput_per_gpu", true).SVG
}

// confirmationPoints are the measured points of the confirmation runs.
func (s *StudyReport) confirmationPoints() []recommend.Point {
	var pts []recommend.Point
	for _, t := range s.Trials {
		if t.Confirms != nil && t.Status == measure.StatusOK {
			pts = append(pts, recommend.PointsOf(t.Number, t.Settings, s.Spec.Hardware.PricePerGPUHour, t.LoadPoints)...)
		}
	}
	return pts
}

func xyOf(p recommend.Point, xm, ym string) (plotter.XY, bool) {
	x, okx := p.Metric(xm)
	y, oky := p.Metric(ym)
	if !okx || !oky || math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return plotter.XY{}, false
	}
	return plotter.XY{X: x, Y: y}, true
}

// frontChart plots every measured point of two metrics (x is maximised;
// y maximised or minimised), SLO misses grey, the front of the points
// that meet the SLOs drawn, the recommended point marked.
func (s *StudyReport) frontChart(title, xl, yl string, pts, confirm []recommend.Point, chosen *recommend.Point, xm, ym string, yMax bool) charted {
	c := newChart(title, xl, yl)
	var met, miss, conf plotter.XYs
	var metPts []recommend.Point
	for _, p := range pts {
		xy, ok := xyOf(p, xm, ym)
		if !ok {
			continue
		}
		if s.Spec.SLO.Met(p) {
			met = append(met, xy)
			metPts = append(metPts, p)
		} else {
			miss = append(miss, xy)
		}
	}
	for _, p := range confirm {
		if xy, ok := xyOf(p, xm, ym); ok {
			conf = append(conf, xy)
		}
	}
	c.scatter(miss, glyph(colMiss, draw.CircleGlyph{}, 2.6), fmt.Sprintf("misses the SLO (%d)", len(miss)))
	c.scatter(met, glyph(colMet, draw.CircleGlyph{}, 2.6), fmt.Sprintf("meets the SLO (%d)", len(met)))
	c.scatter(conf, glyph(colConfirm, draw.RingGlyph{}, 3), fmt.Sprintf("confirmation runs (%d)", len(conf)))
	front := recommend.Front(metPts, []recommend.Objective{{Metric: xm, Maximize: true}, {Metric: ym, Maximize: yMax}})
	var fl plotter.XYs
	for _, p := range front {
		if xy, ok := xyOf(p, xm, ym); ok {
			fl = append(fl, xy)
		}
	}
	sort.Slice(fl, func(i, j int) bool { return fl[i].X < fl[j].X })
	c.line(fl, colFront, 1.6, false, nil, "Pareto front")
	if chosen != nil {
		if xy, ok := xyOf(*chosen, xm, ym); ok {
			c.scatter(plotter.XYs{xy}, glyph(colChosen, draw.RingGlyph{}, 6), fmt.Sprintf("recommended: trial %d", chosen.Trial))
		}
	}
	// The legend goes in the corner no configuration reaches: high
	// interactivity with high throughput, or with low cost.
	c.p.Legend.Top = yMax
	cap := fmt.Sprintf("Every measured (trial, load level) point of the search trials. The front joins the points that meet the SLO and that no other such point beats on both axes%s.",
		map[bool]string{true: " (up and to the right is better)", false: " (down and to the right is better)"}[yMax])
	return charted{SVG: c.svg(wideW, wideH), Caption: cap}
}

// latencyCharts plot the SLO's TTFT and TPOT percentile against the
// offered load for the trials on the study's Pareto front.
func (s *StudyReport) latencyCharts(pts []recommend.Point) (ttft, tpot charted) {
	trials, also, byTrial := s.latencyTrials(pts)
	return s.latencyChart("ttft", "ttft_p99", trials, also, byTrial), s.latencyChart("tpot", "tpot_p99", trials, also, byTrial)
}

// latencyTrials picks the trials the latency charts draw: the
// recommended one, then the Pareto front's by the primary objective, at
// most maxLatencyTrials; trials whose every level measured the same are
// drawn once (also lists them by the drawn trial).
func (s *StudyReport) latencyTrials(pts []recommend.Point) (trials []int, also map[int][]int, byTrial map[int][]recommend.Point) {
	study := s.Spec
	front := s.metFront(pts)
	seen := map[int]bool{}
	if rec, err := recommend.RecommendStudy(s.Trials, study.Terms(), recommend.PreferObjective); err == nil {
		trials = append(trials, rec.Best.Trial)
		seen[rec.Best.Trial] = true
	}
	primary := study.Tuner.Objective
	if len(study.Objectives) > 0 {
		primary = study.Objectives[0]
	}
	sort.SliceStable(front, func(i, j int) bool {
		a, _ := front[i].Metric(primary.Metric)
		b, _ := front[j].Metric(primary.Metric)
		if primary.Maximize {
			return a > b
		}
		return a < b
	})
	// Trials whose every level measured the same (settings that did not
	// matter at these loads) are drawn once, named together.
	signature := func(tn int) string {
		var b strings.Builder
		for _, p := range pts {
			if p.Trial == tn {
				a, _ := p.Metric("ttft_p99")
				c, _ := p.Metric("tpot_p99")
				fmt.Fprintf(&b, "%s:%g:%g;", p.Label, a, c)
			}
		}
		return b.String()
	}
	sigs := map[string]int{} // signature -> index in trials
	also = map[int][]int{}   // drawn trial -> trials with its figures
	for _, tn := range trials {
		sigs[signature(tn)] = tn
	}
	for _, p := range front {
		if seen[p.Trial] {
			continue
		}
		seen[p.Trial] = true
		sig := signature(p.Trial)
		if first, ok := sigs[sig]; ok {
			also[first] = append(also[first], p.Trial)
			continue
		}
		if len(trials) < maxLatencyTrials {
			sigs[sig] = p.Trial
			trials = append(trials, p.Trial)
		}
	}
	seen = map[int]bool{}
	for _, tn := range trials {
		seen[tn] = true
	}
	byTrial = map[int][]recommend.Point{}
	for _, p := range pts {
		if seen[p.Trial] {
			byTrial[p.Trial] = append(byTrial[p.Trial], p)
		}
	}
	return trials, also, byTrial
}

// latencyChart draws one SLO latency (prefix ttft or tpot; fallback when
// the SLO has no such limit) against load for the chosen trials.
func (s *StudyReport) latencyChart(prefix, fallback string, trials []int, also map[int][]int, byTrial map[int][]recommend.Point) charted {
	study := s.Spec
	metric, limit := fallback, 0.0
	for _, l := range study.SLO {
		if strings.HasPrefix(l.Metric, prefix+"_") {
			metric, limit = l.Metric, l.Max
		}
	}
	kind := "concurrency"
	var xs []float64
	for _, tn := range trials {
		for _, p := range byTrial[tn] {
			kind = p.Kind
			xs = append(xs, p.Value)
		}
	}
	xl := "concurrency (requests in flight)"
	if kind == "rate" {
		xl = "offered load (requests/s)"
	}
	c := newChart(metricTitle(metric)+" against load", xl, metricTitle(metric)+" (ms)")
	for i, tn := range trials {
		var xys plotter.XYs
		for _, p := range byTrial[tn] {
			if y, ok := p.Metric(metric); ok {
				xys = append(xys, plotter.XY{X: p.Value, Y: y})
			}
		}
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		label := fmt.Sprintf("trial %d", tn)
		if i == 0 && len(s.recTrialSet()) > 0 {
			label += ", recommended"
		}
		if n := len(also[tn]); n > 0 {
			label += fmt.Sprintf(" (= %s)", intList(also[tn][:min(n, 3)]))
			if n > 3 {
				label = label[:len(label)-1] + ", ...)"
			}
		}
		c.line(xys, series[i%len(series)], 1.4, false, draw.CircleGlyph{}, label)
	}
	c.logX(xs)
	c.ticksAt(xs)
	if limit > 0 {
		c.limit(limit, fmt.Sprintf("SLO %s ≤ %g ms", metric, limit))
	}
	// Latency grows with load: the top left is free for the legend,
	// with head room above the highest line.
	c.p.Legend.Left, c.p.Legend.Top = true, true
	c.headroom = 1.45
	cap := fmt.Sprintf("%s at each load level for the trials on the Pareto front (at most %d, the recommended one first; trials with identical figures are drawn once)", metricTitle(metric), maxLatencyTrials)
	if limit > 0 {
		cap += "; the dashed line is the SLO"
	}
	return charted{SVG: c.svg(wideW, smallH+50), Caption: cap + "."}
}

// recTrialSet is the recommended trial, when there is one.
func (s *StudyReport) recTrialSet() []int {
	if rec, err := recommend.RecommendStudy(s.Trials, s.Spec.Terms(), recommend.PreferObjective); err == nil {
		return []int{rec.Best.Trial}
	}
	return nil
}

// historyChart plots the objective of every trial in order and the best
// so far.
func (s *StudyReport) historyChart() charted {
	obj := s.Spec.Tuner.Objective
	c := newChart("Search history", "trial", fmt.Sprintf("%s (%s)", metricTitle(obj.Metric), recommend.Unit(obj.Metric)))
	var got, conf, best plotter.XYs
	var none []float64
	var cur *float64
	for _, t := range s.Trials {
		x := float64(t.Number)
		if t.Objective == nil || math.IsNaN(*t.Objective) {
			if t.Confirms == nil {
				none = append(none, x)
			}
			continue
		}
		y := *t.Objective
		if t.Confirms != nil {
			conf = append(conf, plotter.XY{X: x, Y: y})
			continue
		}
		got = append(got, plotter.XY{X: x, Y: y})
		if cur == nil || (obj.Maximize && y > *cur) || (!obj.Maximize && y < *cur) {
			v := y
			cur = &v
		}
		best = append(best, plotter.XY{X: x, Y: *cur})
	}
	c.scatter(got, glyph(colMet, draw.CircleGlyph{}, 2.6), "search trial")
	c.scatter(conf, glyph(colConfirm, draw.RingGlyph{}, 3), "confirmation run")
	if len(best) > 0 {
		l, err := plotter.NewLine(best)
		if err == nil {
			l.Color = colFront
			l.Width = vg.Points(1.6)
			l.StepStyle = plotter.PostStep
			c.p.Add(l)
			c.p.Legend.Add("best so far", l)
		}
	}
	if len(none) > 0 {
		// Trials without a value sit on the axis, at the worst end.
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, xy := range append(append(plotter.XYs{}, got...), conf...) {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
		y := 0.0
		if !obj.Maximize && !math.IsInf(hi, 0) {
			y = hi
		}
		var xys plotter.XYs
		for _, x := range none {
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		c.scatter(xys, glyph(colChosen, draw.CrossGlyph{}, 3), fmt.Sprintf("failed or missed the SLO (%d)", len(none)))
	}
	if !obj.Maximize {
		c.p.Legend.Top = true
	} else {
		c.p.Legend.Top = false
	}
	cap := fmt.Sprintf("The sampler's objective (%s) of each trial as the study ran, and the best value so far. Failed trials and trials with no level meeting the SLO have no value: they are drawn as crosses on the axis.", obj)
	return charted{SVG: c.svg(wideW, smallH+50), Caption: cap}
}

// effectCharts estimate each parameter's effect (Importance) and plot
// the objective against every parameter's values.
func (s *StudyReport) effectCharts() (charted, []paramChart, []effectRow) {
	study := s.Spec
	obj := study.Tuner.Objective
	var vals []float64
	var trials []int
	cols := map[string][]any{}
	var params []space.Param
	for _, p := range study.Space.Params {
		if n := paramValues(p); n > 1 {
			params = append(params, p)
		}
	}
	for _, t := range s.Trials {
		if t.Confirms != nil || t.Objective == nil || math.IsNaN(*t.Objective) {
			continue
		}
		vals = append(vals, *t.Objective)
		trials = append(trials, t.Number)
		for _, p := range params {
			cols[p.Name] = append(cols[p.Name], normalize(t.Settings[p.Name]))
		}
	}
	effects := Importance(vals, cols)
	var rows []effectRow
	for _, e := range effects {
		rows = append(rows, effectRow{Param: e.Param, Eta2: fmt.Sprintf("%.2f", e.Eta2), Groups: e.Groups, N: e.N})
	}
	effChart := effectBar(effects, len(vals))
	best := math.NaN()
	for _, v := range vals {
		if math.IsNaN(best) || (obj.Maximize && v > best) || (!obj.Maximize && v < best) {
			best = v
		}
	}
	var scatters []paramChart
	for _, p := range params {
		drawn := map[string]bool{}
		for _, v := range cols[p.Name] {
			drawn[valueKey(p, v)] = true
		}
		scatters = append(scatters, paramScatter(p, obj.Metric, cols[p.Name], vals, trials, s.unmeasured(p, drawn, best)))
	}
	return effChart, scatters, rows
}

// effectBar is the bar chart of the parameters' effects, most important
// at the top, over n trials with a value.
func effectBar(effects []Effect, n int) charted {
	bar := newChart("Parameter effect (η²)", "share of the objective's variance explained", "")
	if len(effects) > 0 && n >= 2 {
		values := make(plotter.Values, len(effects))
		names := make([]string, len(effects))
		// Most important at the top: the bar chart counts upwards.
		for i, e := range effects {
			values[len(effects)-1-i] = e.Eta2
			names[len(effects)-1-i] = e.Param
		}
		b, err := plotter.NewBarChart(values, vg.Points(14))
		if err == nil {
			b.Horizontal = true
			b.Color = colMet
			b.LineStyle.Width = 0
			bar.p.Add(b)
			bar.p.NominalY(names...)
			bar.p.X.Min, bar.p.X.Max = 0, 1
			bar.empty = false
		}
	}
	return charted{SVG: bar.svg(wideW, smallH+50),
		Caption: fmt.Sprintf("Over the %d search trials with a value.", n)}
}

// paramScatter plots the objective (vals, of trials) against one
// parameter's values (col): categories spread with a small jitter,
// numbers on their own axis. A value without a point (marks) says why in
// its column, the forecast's figure drawn there when it has one, and in
// the caption.
func paramScatter(p space.Param, metric string, col []any, vals []float64, trials []int, marks []valueMark) paramChart {
	c := newChart(p.Name, p.Name, fmt.Sprintf("%s (%s)", metricTitle(metric), recommend.Unit(metric)))
	var xys plotter.XYs
	switch p.Kind {
	case space.KindCategorical, space.KindBool:
		names := choiceNames(p)
		idx := map[string]int{}
		for i, n := range names {
			idx[n] = i
		}
		for i, v := range col {
			k, ok := idx[fmt.Sprint(v)]
			if !ok {
				continue
			}
			// A small fixed jitter keeps equal values apart.
			j := (float64(trials[i]%7) - 3) * 0.04
			xys = append(xys, plotter.XY{X: float64(k) + j, Y: vals[i]})
		}
		c.nominalX(names)
	default:
		var xs []float64
		for i, v := range col {
			if f, ok := engine.Number(v); ok {
				xys = append(xys, plotter.XY{X: f, Y: vals[i]})
				xs = append(xs, f)
			}
		}
		for _, m := range marks {
			xs = append(xs, m.x) // the axis spans the values without a point too
		}
		if p.Log {
			c.logX(xs)
			if _, isLog := c.p.X.Scale.(plot.LogScale); isLog {
				c.ticksAt(niceTicks(xs))
			}
		} else if vs, err := p.Values(); err == nil && len(vs) <= 8 {
			// A stepped range's own values (0.80, 0.85, ...), not
			// the default ticks between them (0.81, 0.87, 0.93).
			var at []float64
			for _, v := range vs {
				if f, ok := engine.Number(v); ok {
					at = append(at, f)
				}
			}
			c.ticksAt(at)
		}
	}
	legend := ""
	if len(marks) > 0 {
		legend = "measured" // beside what was not
	}
	c.scatter(xys, glyph(colMet, draw.CircleGlyph{}, 2.4), legend)
	c.marks(marks, xys)
	return paramChart{SVG: c.svg(smallW, smallH), Notes: notes(p, marks)}
}

// marks draws what each value without a point says in its column: the
// forecast's figure as a hollow triangle, else the reason as a short
// text halfway up the measured points' range (pts).
func (c *chart) marks(marks []valueMark, pts plotter.XYs) {
	var figs plotter.XYs
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, xy := range pts {
		lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
	}
	for _, m := range marks {
		if m.figure > 0 {
			figs = append(figs, plotter.XY{X: m.x, Y: m.figure})
			lo, hi = math.Min(lo, m.figure), math.Max(hi, m.figure)
		}
	}
	if len(figs) > 0 {
		c.scatter(figs, glyph(colForecast, draw.TriangleGlyph{}, 3.2), "forecast, not measured")
		// The legend sits above the points, in head room of its own.
		c.p.Legend.Top, c.headroom = true, 1.3
	}
	if math.IsInf(lo, 0) {
		return // nothing drawn: the chart is a note and the caption says it
	}
	// Room below the lowest triangle, which would sit on the axis.
	defer func() { c.p.Y.Min = math.Min(c.p.Y.Min, lo-0.08*(hi-lo)) }()
	var at plotter.XYs
	var texts []string
	for _, m := range marks {
		if m.figure <= 0 {
			at = append(at, plotter.XY{X: m.x, Y: (lo + hi) / 2})
			texts = append(texts, m.short)
		}
	}
	if len(at) == 0 {
		return
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: texts})
	if err != nil {
		return
	}
	for i := range l.TextStyle {
		// Upright, so that neighbouring columns' reasons do not run
		// into each other however many values the axis holds.
		l.TextStyle[i].Font = font.From(sans, 8)
		l.TextStyle[i].Color = colForecast
		l.TextStyle[i].Rotation = math.Pi / 2
		l.TextStyle[i].XAlign = text.XCenter
		l.TextStyle[i].YAlign = text.YCenter
	}
	c.p.Add(l)
}

// niceTicks are 1-2-5 steps within the range of xs, for a log axis.
func niceTicks(xs []float64) []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	var out []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				out = append(out, v)
			}
		}
	}
	return out
}

// paramValues is how many values p can take (2 or more is searched).
func paramValues(p space.Param) int {
	switch p.Kind {
	case space.KindCategorical:
		return len(p.Choices)
	case space.KindBool:
		return 2
	}
	if p.High > p.Low {
		return 2
	}
	return 1
}

func choiceNames(p space.Param) []string {
	if p.Kind == space.KindBool {
		return []string{"false", "true"}
	}
	names := make([]string, len(p.Choices))
	for i, c := range p.Choices {
		names[i] = fmt.Sprint(normalize(c))
	}
	return names
}

// normalize makes a setting read from JSON (float64) and one from the
// spec (int) print and group alike.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return v
}

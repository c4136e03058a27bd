package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"

	"github.com/servetune/servetune/internal/load/measure"
)

// BenchLevel is one measured level of a bench run.
type BenchLevel struct {
	Name    string // "rate inf, max concurrency 16"
	Summary measure.Summary
}

// BenchRun is what a bench report shows: one run, or a sweep's levels.
type BenchRun struct {
	Title  string // what was measured, e.g. the model and the endpoint
	Levels []BenchLevel
}

// maxCDFPoints caps the points of one CDF line: the chart is 400 points
// wide, and a 10,000-request run would otherwise weigh a megabyte.
const maxCDFPoints = 300

// cdf is the empirical distribution of xs (ms), thinned to at most
// maxCDFPoints, with the first and the last point kept.
func cdf(xs []float64) plotter.XYs {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	sort.Float64s(v)
	n := len(v)
	if n == 0 {
		return nil
	}
	step := max(1, n/maxCDFPoints)
	var out plotter.XYs
	for i := 0; i < n; i += step {
		out = append(out, plotter.XY{X: v[i], Y: float64(i+1) / float64(n)})
	}
	if last := (plotter.XY{X: v[n-1], Y: 1}); out[len(out)-1] != last {
		out = append(out, last)
	}
	return out
}

type benchLevelView struct {
	Name                       string
	Completed, Failed          int
	ReqS, OutS, Goodput, PeakS string
	Lat                        []latRow
	Errors                     []errRow
}

type latRow struct {
	Metric                  string
	Median, MedianCI, P99   string
	P99CI, Mean, P90, Count string
}

type errRow struct {
	Class   string
	Count   int
	Message string
}

type benchView struct {
	Title, Tool, Generated string
	CSS                    template.CSS
	Levels                 []benchLevelView
	CDFs                   []charted
	Sweep                  []charted
	Meta                   []fact
	Diffs                  []diffLevel
	NoSamples              bool
	// Warnings head the page: a comparison of runs whose workloads differ.
	Warnings []string
}

func levelView(l BenchLevel) benchLevelView {
	s := l.Summary
	v := benchLevelView{Name: l.Name, Completed: s.Completed, Failed: s.Failed,
		ReqS: fmt.Sprintf("%.2f", s.RequestThroughput), OutS: fmt.Sprintf("%.1f", s.OutputThroughput),
		Goodput: fmt.Sprintf("%.2f", s.RequestGoodput), PeakS: fmt.Sprintf("%.1f", s.PeakOutputThroughput)}
	for _, m := range []struct {
		name string
		st   measure.Stats
	}{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}, {"E2EL", s.E2EL}, {"queue", s.Queue}} {
		st := m.st
		// Lateness against the schedule means something only open loop
		// (as bench's own table has it).
		if st.N == 0 || m.name == "queue" && s.RequestRate <= 0 {
			continue
		}
		v.Lat = append(v.Lat, latRow{Metric: m.name, Count: fmt.Sprint(st.N), Mean: fmt.Sprintf("%.2f", st.Mean),
			Median: fmt.Sprintf("%.2f", st.Median), MedianCI: fmt.Sprintf("[%.2f, %.2f]", st.MedianCI[0], st.MedianCI[1]),
			P90: fmt.Sprintf("%.2f", st.P90), P99: fmt.Sprintf("%.2f", st.P99), P99CI: fmt.Sprintf("[%.2f, %.2f]", st.P99CI[0], st.P99CI[1])})
	}
	for _, c := range measure.ErrorClasses {
		if n := s.Errors[string(c)]; n > 0 {
			v.Errors = append(v.Errors, errRow{Class: string(c), Count: n, Message: s.ErrorMessages[string(c)]})
		}
	}
	return v
}

// cdfCharts draw the TTFT, TPOT, ITL and E2EL distributions, one line per
// run (name, samples); with pairs, runs 2k and 2k+1 share a colour and
// the first of each pair is dashed (base and new of one level).
func cdfCharts(names []string, samples []*measure.Samples, pairs bool) []charted {
	pick := []struct {
		title string
		get   func(*measure.Samples) []float64
	}{
		{"TTFT", func(s *measure.Samples) []float64 { return s.TTFT }},
		{"TPOT", func(s *measure.Samples) []float64 { return s.TPOT }},
		{"ITL (per chunk)", func(s *measure.Samples) []float64 { return s.ITL }},
		{"E2EL", func(s *measure.Samples) []float64 { return s.E2EL }},
	}
	var out []charted
	for _, p := range pick {
		c := newChart(p.title+" distribution", p.title+" (ms)", "fraction of requests")
		var all []float64
		for i, s := range samples {
			if s == nil {
				continue
			}
			xs := p.get(s)
			all = append(all, xs...)
			col, dash := series[i%len(series)], false
			if pairs {
				col, dash = series[(i/2)%len(series)], i%2 == 0
			}
			c.line(cdf(xs), col, 1.5, dash, nil, names[i])
		}
		c.logX(positive(all))
		c.p.Legend.Left, c.p.Legend.Top = false, false
		c.p.Y.Min, c.p.Y.Max = 0, 1.02
		out = append(out, charted{SVG: c.svg(smallW+40, smallH+20)})
	}
	return out
}

func positive(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if x > 0 {
			out = append(out, x)
		}
	}
	return out
}

// sweepCharts plot throughput and p99 latencies against the levels of a
// sweep (their position in the ladder; the table names them).
func sweepCharts(levels []BenchLevel) []charted {
	tp := newChart("Throughput by level", "load level", "tokens/s; requests/s × 100")
	lat := newChart("p99 latency by level", "load level", "ms")
	var out, good, ttft, tpot, itl plotter.XYs
	var names []string
	for i, l := range levels {
		s, x := l.Summary, float64(i)
		names = append(names, shortLoad(s))
		out = append(out, plotter.XY{X: x, Y: s.OutputThroughput})
		good = append(good, plotter.XY{X: x, Y: 100 * s.RequestGoodput})
		if s.TTFT.N > 0 {
			ttft = append(ttft, plotter.XY{X: x, Y: s.TTFT.P99})
		}
		if s.TPOT.N > 0 {
			tpot = append(tpot, plotter.XY{X: x, Y: s.TPOT.P99})
		}
		if s.ITL.N > 0 {
			itl = append(itl, plotter.XY{X: x, Y: s.ITL.P99})
		}
	}
	tp.line(out, series[0], 1.5, false, draw.CircleGlyph{}, "output tokens/s")
	tp.line(good, series[2], 1.5, true, draw.CircleGlyph{}, "goodput (req/s) × 100")
	lat.line(ttft, series[0], 1.5, false, draw.CircleGlyph{}, "p99 TTFT")
	lat.line(tpot, series[1], 1.5, false, draw.CircleGlyph{}, "p99 TPOT")
	lat.line(itl, series[3], 1.5, false, draw.CircleGlyph{}, "p99 ITL")
	tp.nominalX(names)
	lat.nominalX(names)
	tp.p.Legend.Left, lat.p.Legend.Left = true, true
	tp.headroom, lat.headroom = 1.3, 1.3
	return []charted{{SVG: tp.svg(wideW, smallH+40)}, {SVG: lat.svg(wideW, smallH+40)}}
}

// shortLoad names a level on an axis: "c=16", "4 req/s", "4 req/s c=16".
func shortLoad(s measure.Summary) string {
	var parts []string
	if s.RequestRate > 0 {
		parts = append(parts, measure.FormatRate(s.RequestRate)+" req/s")
	}
	if s.MaxConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("c=%d", s.MaxConcurrency))
	}
	if len(parts) == 0 {
		return "inf"
	}
	return strings.Join(parts, " ")
}

func metaFacts(meta map[string]any) []fact {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []fact
	for _, k := range keys {
		var val string
		switch x := meta[k].(type) {
		case string:
			val = x
		default:
			b, _ := json.Marshal(x)
			val = string(b)
		}
		out = append(out, fact{k, val})
	}
	return out
}

// WriteBenchHTML writes one bench run's report: its levels' figures,
// latency distributions, the levels of a sweep, failures and the run's
// meta. Self-contained like the study report.
func WriteBenchHTML(w io.Writer, run BenchRun, tool string) error {
	v := benchView{Title: run.Title, Tool: tool, CSS: CSS()}
	var names []string
	var samples []*measure.Samples
	for _, l := range run.Levels {
		v.Levels = append(v.Levels, levelView(l))
		names = append(names, l.Name)
		samples = append(samples, l.Summary.Samples)
		if l.Summary.Samples == nil {
			v.NoSamples = true
		}
	}
	if !v.NoSamples {
		v.CDFs = cdfCharts(names, samples, false)
	}
	if len(run.Levels) > 1 {
		v.Sweep = sweepCharts(run.Levels)
	}
	if len(run.Levels) > 0 {
		meta := map[string]any{}
		for k, x := range run.Levels[0].Summary.Meta {
			if k != "level" {
				meta[k] = x
			}
		}
		v.Meta = metaFacts(meta)
	}
	return templates.ExecuteTemplate(w, "bench.html.tmpl", v)
}

type diffLevel struct {
	Name string
	Rows []diffRow
}

type diffRow struct {
	Metric, Base, New, Delta, Rel, CI string
	Significant, Better               bool
}

// levelName names a measured level by its load: concurrency=8, rate=14.
func levelName(s measure.Summary) string {
	return measure.Load{Rate: s.RequestRate, MaxConcurrency: s.MaxConcurrency}.Name()
}

// pairName names a compared pair of levels: one name when both ran the
// same load, "rate=8 against rate=14" when not.
func pairName(base, cur measure.Summary) string {
	b, n := levelName(base), levelName(cur)
	if b == n {
		return b
	}
	return n + " against " + b
}

// WriteCompareHTML writes the report of `bench compare`: the two runs'
// distributions overlaid (base dashed) and each statistic's change with
// its bootstrap 95% interval, level by level, each named by its load;
// warnings (the runs' workloads differ) head the page.
func WriteCompareHTML(w io.Writer, baseName, newName string, base, cur []measure.Summary, diffs [][]measure.Diff, warnings []string, tool string) error {
	v := benchView{Title: fmt.Sprintf("%s against %s", newName, baseName), Tool: tool, CSS: CSS(), Warnings: warnings}
	var names []string
	var samples []*measure.Samples
	for i := range base {
		lv := ""
		if len(base) > 1 {
			lv = ", " + pairName(base[i], cur[i])
		}
		names = append(names, "base"+lv, "new"+lv)
		samples = append(samples, base[i].Samples, cur[i].Samples)
	}
	v.CDFs = cdfCharts(names, samples, true)
	for i, ds := range diffs {
		dl := diffLevel{Name: pairName(base[i], cur[i])}
		for _, d := range ds {
			dl.Rows = append(dl.Rows, diffRow{Metric: d.Stat + " " + strings.ToUpper(d.Metric), Base: fmt.Sprintf("%.3f", d.Base),
				New: fmt.Sprintf("%.3f", d.New), Delta: fmt.Sprintf("%+.3f", d.Delta), Rel: fmt.Sprintf("%+.1f%%", d.RelPct),
				CI: fmt.Sprintf("[%+.3f, %+.3f]", d.CI[0], d.CI[1]), Significant: d.Significant, Better: d.Delta < 0})
		}
		v.Diffs = append(v.Diffs, dl)
	}
	for i := range base {
		v.Levels = append(v.Levels, levelView(BenchLevel{Name: "base, " + levelName(base[i]), Summary: base[i]}),
			levelView(BenchLevel{Name: "new, " + levelName(cur[i]), Summary: cur[i]}))
	}
	return templates.ExecuteTemplate(w, "bench.html.tmpl", v)
}

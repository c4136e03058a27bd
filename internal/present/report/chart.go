package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"image/color"
	"math"
	"regexp"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The palette: one meaning per colour across every chart.
var (
	colMet      = color.RGBA{0x2b, 0x6c, 0xb0, 0xff} // a point that meets the SLOs
	colMiss     = color.RGBA{0xb8, 0xbe, 0xc8, 0xff} // a point that misses them
	colFront    = color.RGBA{0xdd, 0x6b, 0x20, 0xff} // the Pareto front
	colChosen   = color.RGBA{0xc5, 0x30, 0x30, 0xff} // the recommendation
	colSLO      = color.RGBA{0xc5, 0x30, 0x30, 0xff} // SLO limits
	colConfirm  = color.RGBA{0x6b, 0x46, 0xc1, 0xff} // confirmation runs
	colForecast = color.RGBA{0x2c, 0x7a, 0x7b, 0xff} // the forecast of what was not measured
	colGrid     = color.RGBA{0xe6, 0xe8, 0xec, 0xff}
	// series: Tableau 10, for one line per trial.
	series = []color.RGBA{
		{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xe1, 0x57, 0x59, 0xff},
		{0x76, 0xb7, 0xb2, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	}
)

// sans is the charts' typeface. Liberation Sans has Arial's metrics, so
// the page's CSS may fall back to Arial or Helvetica where it is missing
// without text overflowing the layout gonum measured.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// chart is one plot being built; svg renders it.
type chart struct {
	p      *plot.Plot
	title  string
	hlines []hline
	empty  bool
	// headroom stretches the y axis above the data (1.3: 30% more) to
	// keep the legend clear of it.
	headroom float64
}

type hline struct {
	y     float64
	label string
}

func newChart(title, x, y string) *chart {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Tick.Marker = distinctTicks{}
		a.Label.TextStyle.Font = font.From(sans, 10.5)
		a.Tick.Label.Font = font.From(sans, 9.5)
		a.Padding = vg.Points(2)
	}
	p.Legend.TextStyle.Font = font.From(sans, 9.5)
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = vg.Points(12)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = colGrid, colGrid
	p.Add(g)
	return &chart{p: p, title: title, empty: true}
}

func glyph(col color.Color, shape draw.GlyphDrawer, r float64) draw.GlyphStyle {
	return draw.GlyphStyle{Color: col, Shape: shape, Radius: vg.Points(r)}
}

// scatter adds points; legend "" keeps them out of the legend.
func (c *chart) scatter(xys plotter.XYs, sty draw.GlyphStyle, legend string) {
	if len(xys) == 0 {
		return
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return // NaN or Inf: the caller filters them; nothing to draw
	}
	s.GlyphStyle = sty
	c.p.Add(s)
	c.empty = false
	if legend != "" {
		c.p.Legend.Add(legend, s)
	}
}

// line adds a polyline, dashed or not, optionally with its points marked.
func (c *chart) line(xys plotter.XYs, col color.Color, width float64, dashed bool, marks draw.GlyphDrawer, legend string) {
	if len(xys) == 0 {
		return
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return
	}
	l.Color = col
	l.Width = vg.Points(width)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	c.p.Add(l)
	c.empty = false
	var thumbs []plot.Thumbnailer
	thumbs = append(thumbs, l)
	if marks != nil {
		s, err := plotter.NewScatter(xys)
		if err == nil {
			s.GlyphStyle = glyph(col, marks, 2.2)
			c.p.Add(s)
			thumbs = append(thumbs, s)
		}
	}
	if legend != "" {
		c.p.Legend.Add(legend, thumbs...)
	}
}

// limit draws a horizontal SLO line at y across the whole plot, and
// stretches the y axis to show it.
func (c *chart) limit(y float64, label string) {
	if y > 0 && !math.IsInf(y, 0) {
		c.hlines = append(c.hlines, hline{y, label})
	}
}

// distinctTicks are gonum's default ticks labelled with as many decimals
// as it takes for neighbouring labels to differ: over a narrow range (an
// objective from 2.60 to 2.64) the default labels read 2.6, 2.6, 2.6.
type distinctTicks struct{}

func (distinctTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []int
	for i, t := range ticks {
		if t.Label != "" {
			major = append(major, i)
		}
	}
	for dec := 0; dec <= 12; dec++ {
		labels := make([]string, len(major))
		distinct := true
		for j, i := range major {
			labels[j] = strconv.FormatFloat(ticks[i].Value, 'f', dec, 64)
			if labels[j] == "-0" {
				labels[j] = "0"
			}
			distinct = distinct && (j == 0 || labels[j] != labels[j-1])
		}
		if distinct {
			for j, i := range major {
				ticks[i].Label = labels[j]
			}
			break
		}
	}
	return ticks
}

// ticksAt puts the x axis's ticks on exactly these values (the measured
// load levels), labelled as numbers.
func (c *chart) ticksAt(vals []float64) {
	vals = append([]float64(nil), vals...)
	sort.Float64s(vals)
	var ticks []plot.Tick
	for i, v := range vals {
		if i > 0 && v == vals[i-1] {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	c.p.X.Tick.Marker = plot.ConstantTicks(ticks)
}

// logX puts the x axis on a log scale when the values span a factor of 8
// or more (load ladders such as 1, 4, 16, 64).
func (c *chart) logX(vals []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if lo > 0 && hi/lo >= 8 {
		c.p.X.Scale = plot.LogScale{}
		c.ticksAt(niceTicks(vals))
	}
}

// nominalX labels integer x positions 0..n-1 with names (categorical
// parameters).
func (c *chart) nominalX(names []string) {
	ticks := make([]plot.Tick, len(names))
	for i, n := range names {
		ticks[i] = plot.Tick{Value: float64(i), Label: n}
	}
	c.p.X.Tick.Marker = plot.ConstantTicks(ticks)
	c.p.X.Min, c.p.X.Max = -0.5, float64(len(names))-0.5
}

var svgHead = regexp.MustCompile(`(?s)^.*?<svg width="[^"]*" height="[^"]*"`)

// svg renders the chart w×h points as an inline <svg> element that scales
// to its container; a chart without data is a one-line note instead.
func (c *chart) svg(w, h float64) template.HTML {
	if c.empty {
		return template.HTML(`<p class="nodata">` + html.EscapeString(c.title) + `: nothing measured to draw.</p>`)
	}
	if len(c.hlines) > 0 {
		xmin, xmax := c.p.X.Min, c.p.X.Max
		for _, hl := range c.hlines {
			c.p.Y.Max = math.Max(c.p.Y.Max, hl.y*1.08)
			c.p.Y.Min = math.Min(c.p.Y.Min, 0)
			l, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: hl.y}, {X: xmax, Y: hl.y}})
			if err != nil {
				continue
			}
			l.Color = colSLO
			l.Width = vg.Points(1.2)
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			c.p.Add(l)
			c.p.Legend.Add(hl.label, l)
		}
	}
	if c.headroom > 1 {
		lo, hi := c.p.Y.Min, c.p.Y.Max
		c.p.Y.Max = lo + (hi-lo)*c.headroom
	}
	canvas := vgsvg.New(vg.Points(w), vg.Points(h))
	c.p.Draw(draw.New(canvas))
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return template.HTML(`<p class="nodata">` + html.EscapeString(fmt.Sprintf("%s: %v", c.title, err)) + `</p>`)
	}
	out := svgHead.ReplaceAllLiteralString(b.String(), `<svg class="chart" role="img" aria-label="`+html.EscapeString(c.title)+`"`)
	return template.HTML(out)
}

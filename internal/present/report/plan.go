package report

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

// PlanRun is a fleet plan as its page draws it: the traffic, and each
// policy's replicas over time, SLO attainment by hour and totals. It is
// plain data so that the page links no simulator.
type PlanRun struct {
	Title, Tool string
	// Facts are the plan's inputs and the replica's capacity, in order.
	Facts [][2]string
	// Rate is the traffic's arrival rate (req/s) in bins of BinSeconds
	// from the first request.
	Rate       []float64
	BinSeconds float64
	// Goal is the SLO attainment a replica's capacity was measured at.
	Goal     float64
	Policies []PlanPolicy
}

// PlanPolicy is one router and scaling rule's run over the traffic.
type PlanPolicy struct {
	Router, Scaling                                               string
	Attainment, MeanReplicas, GPUHours, CostPerDay, PrefixHitRate float64
	PeakReplicas                                                  int
	// Hours are the policy's hours from the first request.
	Hours []PlanHour
}

// PlanHour is one hour of a policy's run.
type PlanHour struct {
	// Attainment is the share of the hour's requests (by arrival) that
	// met the SLO; NaN for an hour without any.
	Attainment float64
	// Replicas is the time-weighted mean of the replicas paid for.
	Replicas float64
}

// staticColor draws static provisioning, apart from the autoscaled
// policies' series colours (and from red, the SLO's).
var staticColor = color.RGBA{0x4a, 0x55, 0x68, 0xff}

// policyColor is policy i's colour: a series colour, skipping red.
func policyColor(p PlanPolicy, i int) color.Color {
	if p.Scaling == "static (peak)" {
		return staticColor
	}
	pal := []color.RGBA{series[0], series[1], series[2], series[4], series[6], series[7]}
	return pal[i%len(pal)]
}

type planView struct {
	Title, Tool string
	CSS         template.CSS
	Facts       []fact
	Rows        []planRow
	Charts      []charted
}

type planRow struct {
	Router, Scaling, Attainment, Worst, Peak, Mean, GPUHours, Cost, Hits string
}

// WritePlanHTML writes the plan as one self-contained page: the policies'
// table, the traffic, the replicas each provisions over time and its SLO
// attainment hour by hour.
func WritePlanHTML(w io.Writer, run PlanRun) error {
	v := planView{Title: run.Title, Tool: run.Tool, CSS: CSS()}
	for _, f := range run.Facts {
		v.Facts = append(v.Facts, fact{f[0], f[1]})
	}
	for _, p := range run.Policies {
		worst, wh := math.Inf(1), 0
		for h, hr := range p.Hours {
			if hr.Attainment < worst {
				worst, wh = hr.Attainment, h
			}
		}
		ws := "—"
		if !math.IsInf(worst, 1) {
			ws = fmt.Sprintf("%.1f%% (hour %d)", 100*worst, wh)
		}
		v.Rows = append(v.Rows, planRow{Router: p.Router, Scaling: p.Scaling, Attainment: fmt.Sprintf("%.2f%%", 100*p.Attainment), Worst: ws,
			Peak: fmt.Sprint(p.PeakReplicas), Mean: fmt.Sprintf("%.1f", p.MeanReplicas), GPUHours: fmt.Sprintf("%.1f", p.GPUHours),
			Cost: fmt.Sprintf("%.0f", p.CostPerDay), Hits: fmt.Sprintf("%.1f%%", 100*p.PrefixHitRate)})
	}
	v.Charts = []charted{trafficChart(run), replicasChart(run), attainmentChart(run)}
	return templates.ExecuteTemplate(w, "plan.html.tmpl", v)
}

func trafficChart(run PlanRun) charted {
	c := newChart("Traffic", "hours", "requests per second")
	xys := make(plotter.XYs, 0, 2*len(run.Rate))
	for i, r := range run.Rate {
		t0, t1 := float64(i)*run.BinSeconds/3600, float64(i+1)*run.BinSeconds/3600
		xys = append(xys, plotter.XY{X: t0, Y: r}, plotter.XY{X: t1, Y: r})
	}
	c.line(xys, colMet, 1.2, false, nil, "")
	c.p.Y.Min = 0
	return charted{c.svg(520, 260), fmt.Sprintf("Arrivals per second, in bins of %.0f s.", run.BinSeconds)}
}

func replicasChart(run PlanRun) charted {
	c := newChart("Replicas provisioned", "hours", "mean replicas in the hour")
	c.headroom = 1.45
	for i, p := range run.Policies {
		var xys plotter.XYs
		for h, hr := range p.Hours {
			xys = append(xys, plotter.XY{X: float64(h), Y: hr.Replicas}, plotter.XY{X: float64(h + 1), Y: hr.Replicas})
		}
		c.line(xys, policyColor(p, i), 1.4, p.Scaling == "static (peak)", nil, p.Router+", "+p.Scaling)
	}
	c.p.Y.Min = 0
	return charted{c.svg(520, 260), "Replicas starting, serving or draining (each one paid for), hour by hour, by policy."}
}

func attainmentChart(run PlanRun) charted {
	c := newChart("SLO attainment by hour", "hour", "requests within the SLO (%)")
	lo := 100 * run.Goal
	for i, p := range run.Policies {
		var xys plotter.XYs
		for h, hr := range p.Hours {
			if !math.IsNaN(hr.Attainment) {
				xys = append(xys, plotter.XY{X: float64(h) + 0.5, Y: 100 * hr.Attainment})
				lo = math.Min(lo, 100*hr.Attainment)
			}
		}
		c.line(xys, policyColor(p, i), 1.4, p.Scaling == "static (peak)", draw.CircleGlyph{}, p.Router+", "+p.Scaling)
	}
	hours := 0
	for _, p := range run.Policies {
		hours = max(hours, len(p.Hours))
	}
	if run.Goal > 0 {
		c.line(plotter.XYs{{X: 0, Y: 100 * run.Goal}, {X: float64(hours), Y: 100 * run.Goal}}, colSLO, 1.2, true, nil, fmt.Sprintf("goal %.0f%%", 100*run.Goal))
	}
	// From just under the worst hour to 100%, the legend below the lines:
	// a scale from 0 flattens every line onto the top edge.
	span := math.Max(100-lo, 0.5)
	c.p.Y.Min, c.p.Y.Max = math.Max(lo-1.5*span, 0), 100+0.2*span
	c.p.X.Min, c.p.X.Max = 0, float64(hours)
	c.p.Legend.Top = false
	return charted{c.svg(520, 260), "The share of each hour's requests (by arrival) that met every SLO limit, at the hour's middle."}
}

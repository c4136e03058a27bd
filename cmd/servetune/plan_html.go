package main

import (
	"fmt"
	"io"
	"math"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/present/report"
)

// planBinSeconds is the width of the traffic chart's bins: five minutes,
// the window static provisioning's peak is read over.
const planBinSeconds = 300

// writePlanHTML writes the plan's page (report.WritePlanHTML) to path
// (writeOutput: - is stdout).
func writePlanHTML(stdout io.Writer, path string, rep planReport, reqs []fleet.Request, results []fleet.Result, goal float64) error {
	run := report.PlanRun{Title: rep.Model + " over " + rep.Traffic, Tool: "servetune " + version, BinSeconds: planBinSeconds, Goal: goal}
	c := rep.Capacity
	run.Facts = [][2]string{
		{"traffic", fmt.Sprintf("%s: %d requests over %.1f h, peak %.1f req/s (5 min)", rep.Traffic, rep.Requests, rep.Hours, rep.PeakRate)},
		{"replica", fmt.Sprintf("%s on %d x %s at $%.2f per GPU-hour", rep.Model, rep.GPUs, rep.GPU, rep.Price)},
		{"capacity", fmt.Sprintf("%.2f req/s with %.0f%% of requests within the SLO; at %.0f%% of it: running %.1f, waiting %.2f, KV usage %.0f%%",
			c.Rate, 100*c.Goal, 100*c.Headroom, c.Running, c.Waiting, 100*c.KV)},
		{"scale-up delay", fmt.Sprintf("%.0f s", rep.UpDelay)},
	}
	if len(reqs) > 0 {
		first := reqs[0].At
		run.Rate = make([]float64, int((reqs[len(reqs)-1].At-first)/planBinSeconds)+1)
		for _, r := range reqs {
			run.Rate[int((r.At-first)/planBinSeconds)] += 1.0 / planBinSeconds
		}
	}
	for i, r := range results {
		l := rep.Policies[i]
		p := report.PlanPolicy{Router: l.Router, Scaling: "static (peak)", Attainment: l.Attainment, MeanReplicas: l.MeanReplicas,
			GPUHours: l.GPUHours, CostPerDay: l.CostPerDay, PrefixHitRate: l.PrefixHitRate, PeakReplicas: l.PeakReplicas}
		if s := r.Policy.Scale; s != nil {
			p.Scaling = s.String()
		}
		for _, h := range r.Hours {
			a := math.NaN()
			if h.Requests > 0 {
				a = h.Attainment
			}
			p.Hours = append(p.Hours, report.PlanHour{Attainment: a, Replicas: h.MeanReplicas})
		}
		run.Policies = append(run.Policies, p)
	}
	return writeOutput(stdout, path, func(w io.Writer) error { return report.WritePlanHTML(w, run) })
}

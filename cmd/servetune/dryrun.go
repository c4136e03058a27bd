package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/servetune/servetune/tuner/guided"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// dryRunTop is how many forecasts `tune --dry-run` lists.
const dryRunTop = 10

// runDryRun prints the simulator's ranking of study's space: what a guided
// study would measure first. Nothing is launched and no database opened.
func runDryRun(ctx context.Context, study *spec.Spec, w io.Writer) error {
	if err := spec.Forecastable(study); err != nil {
		return usageErrorf("--dry-run: the simulator cannot forecast this study: %v", err)
	}
	start := time.Now()
	d, err := guided.ForecastSpace(ctx, study)
	if err != nil {
		return err
	}
	size := "a sample of a continuous space"
	if d.SpaceSize > 0 {
		size = fmt.Sprintf("%d configurations in the space", d.SpaceSize)
	}
	fmt.Fprintf(w, "dry run of %s: %d configurations forecast (%s) in virtual time on %s in %s (%d simulated requests); nothing launched\n",
		study.Name, d.Configs, size, study.Hardware.GPU, time.Since(start).Round(100*time.Millisecond), d.Requests)
	pct := func(n int) float64 { return 100 * float64(n) / float64(max(d.Configs, 1)) }
	fmt.Fprintf(w, "predicted infeasible (do not start, or the space rejects them): %d (%.1f%%); start but meet the SLOs at no level: %d (%.1f%%)\n",
		d.Infeasible, pct(d.Infeasible), d.MissSLO, pct(d.MissSLO))
	fmt.Fprintln(w, "ranked by expected value: the forecast times its chances to start and to meet the SLOs (the forecast taken as ±30% off)")
	obj := study.Tuner.Objective
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "#\tFORECAST %s\tLOAD\tTTFT p99\tTPOT p99\tP(START)\tSETTINGS\n", obj)
	for i, f := range d.Ranked {
		if i == dryRunTop {
			break
		}
		val, load, ttft, tpot := "misses SLOs", "-", "-", "-"
		if f.Met {
			val = recommend.Format(obj.Metric, f.Value)
		}
		if f.Failure != "" {
			val = "fails: " + f.Failure
		}
		if b := f.Best; b != nil {
			_, kind, v := b.Load.Label()
			load = fmt.Sprintf("%s=%.4g", kind, v)
			ttft = fmt.Sprintf("%.0f ms", b.Summary.TTFT.P99)
			tpot = fmt.Sprintf("%.1f ms", b.Summary.TPOT.P99)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.2f\t%s\n", i+1, val, load, ttft, tpot, f.PStart, strings.TrimSpace(settingsLine(f.Settings)))
	}
	return tw.Flush()
}

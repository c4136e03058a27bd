package fidelity

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
)

// Stall is where a closed loop's prefills meet a request in one cycle of
// it. Each of the loop's requests waits, once a cycle, for every
// request's prefill step: for some before its first token (in TTFT), for
// the others between its tokens. A request's whole time is then E2E =
// Total + (out - 1) x D, D the decode step, so two output lengths at one
// point give the stall as the intercept, and Total - TTFT is the prefill
// time that falls between a request's tokens.
type Stall struct {
	TTFT  float64 // mean TTFT, ms
	Total float64 // the prefill stall a request meets a cycle, ms
}

// Between is the stall that falls between a request's tokens.
func (s Stall) Between() float64 { return s.Total - s.TTFT }

// BeforeFirst is how many requests' prefills, in units of the mean one
// (Total / concurrency), a request waits for before its first token, its
// own among them.
func (s Stall) BeforeFirst(concurrency int) float64 {
	if s.Total <= 0 {
		return 0
	}
	return s.TTFT / (s.Total / float64(concurrency))
}

// StallPoint is one closed-loop point (engine, release, GPU, model, TP,
// flags, prompt length and concurrency) measured at two output lengths or
// more: its stall from the shortest and the longest, measured and
// simulated.
type StallPoint struct {
	Source, Engine, Version, GPU, Model string
	TP, In, Concurrency                 int
	Outs                                [2]int
	Measured, Simulated                 Stall
}

// StallPoints are the scored closed-loop runs' points with two output
// lengths or more, by source, engine and point. A run counts when every
// request has the same lengths (no range, no length table) and it states
// the mean TTFT and TPOT; a point counts unless it is queued (queued).
func StallPoints(results []Result) []StallPoint {
	type rows struct{ short, long *Result }
	byPoint := map[string]*rows{}
	var keys []string
	for i := range results {
		r := &results[i]
		run, w := r.Run, r.Run.Workload
		if run.Unscored != "" || run.Disaggregated != nil || run.Stat != "mean" || w.Concurrency <= 0 ||
			len(w.Stages) > 0 || w.RangeRatio != nil || w.Lengths != "" || w.Out < 2 ||
			run.Measured.TTFT <= 0 || run.Measured.ITL <= 0 || r.Predicted.TTFT <= 0 || r.Predicted.ITL <= 0 {
			continue
		}
		k := strings.Join([]string{run.Source, run.Engine, run.Version, run.GPU, run.Model, fmt.Sprint(run.TP, w.In, w.Concurrency, w.Prompts),
			strings.Join(run.Flags, " "), strings.Join(run.VersionFlags, " ")}, "\x00")
		p := byPoint[k]
		if p == nil {
			p = &rows{short: r, long: r}
			byPoint[k] = p
			keys = append(keys, k)
		}
		if w.Out < p.short.Run.Workload.Out {
			p.short = r
		}
		if w.Out > p.long.Run.Workload.Out {
			p.long = r
		}
	}
	var out []StallPoint
	for _, k := range keys {
		p := byPoint[k]
		o1, o2 := p.short.Run.Workload.Out, p.long.Run.Workload.Out
		if o1 == o2 || queued(p.short.Run.Measured.TTFT, p.long.Run.Measured.TTFT) || queued(p.short.Predicted.TTFT, p.long.Predicted.TTFT) {
			continue
		}
		// E2E = TTFT + (out - 1) x TPOT at each length; the line
		// through both is Total + (out - 1) x D.
		stall := func(ttft1, ttft2, tpot1, tpot2 float64) Stall {
			e1, e2 := ttft1+float64(o1-1)*tpot1, ttft2+float64(o2-1)*tpot2
			d := (e2 - e1) / float64(o2-o1)
			return Stall{TTFT: (ttft1 + ttft2) / 2, Total: e1 - float64(o1-1)*d}
		}
		run := p.short.Run
		out = append(out, StallPoint{
			Source: run.Source, Engine: run.Engine, Version: run.Version, GPU: run.GPU, Model: run.Model,
			TP: run.TP, In: run.Workload.In, Concurrency: run.Workload.Concurrency, Outs: [2]int{o1, o2},
			Measured:  stall(run.Measured.TTFT, p.long.Run.Measured.TTFT, run.Measured.ITL, p.long.Run.Measured.ITL),
			Simulated: stall(p.short.Predicted.TTFT, p.long.Predicted.TTFT, p.short.Predicted.ITL, p.long.Predicted.ITL),
		})
	}
	slices.SortStableFunc(out, func(a, b StallPoint) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Engine, b.Engine), strings.Compare(a.Model, b.Model),
			cmp.Compare(a.In, b.In), cmp.Compare(a.Concurrency, b.Concurrency), cmp.Compare(a.TP, b.TP))
	})
	return out
}

// queuedGrowth is how much a point's TTFT may grow from its shortest
// output to its longest before the point counts as queued: requests that
// wait for others to finish (the KV cache or the running limit full) wait
// longer the longer the others' outputs, where a loop whose requests all
// run meets the same prefills whatever the output length.
const queuedGrowth = 1.5

// queued says whether a TTFT grew past queuedGrowth from the short output
// to the long one.
func queued(short, long float64) bool { return long > queuedGrowth*short }

// StallSummary is one source and engine's points: the median absolute
// error of the simulated stall and of the TTFT, and the median
// share of the loop's prefills a request waits for before its first
// token (BeforeFirst over concurrency), measured and simulated.
type StallSummary struct {
	Source, Engine                            string
	Points                                    int
	TotalErr, TTFTErr                         float64
	MeasuredBeforeFirst, SimulatedBeforeFirst float64
}

// SummarizeStalls gathers points by source and engine.
func SummarizeStalls(points []StallPoint) []StallSummary {
	var out []StallSummary
	for _, g := range groupStalls(points) {
		var total, ttft, mb, sb []float64
		for _, p := range g {
			total = append(total, math.Abs(p.Simulated.Total/p.Measured.Total-1))
			ttft = append(ttft, math.Abs(p.Simulated.TTFT/p.Measured.TTFT-1))
			mb = append(mb, p.Measured.BeforeFirst(p.Concurrency)/float64(p.Concurrency))
			sb = append(sb, p.Simulated.BeforeFirst(p.Concurrency)/float64(p.Concurrency))
		}
		out = append(out, StallSummary{Source: g[0].Source, Engine: g[0].Engine, Points: len(g),
			TotalErr: measure.Median(total), TTFTErr: measure.Median(ttft), MeasuredBeforeFirst: measure.Median(mb), SimulatedBeforeFirst: measure.Median(sb)})
	}
	return out
}

// groupStalls splits sorted points into runs of one source and engine.
func groupStalls(points []StallPoint) [][]StallPoint {
	var out [][]StallPoint
	for i := 0; i < len(points); {
		j := i + 1
		for j < len(points) && points[j].Source == points[i].Source && points[j].Engine == points[i].Engine {
			j++
		}
		out = append(out, points[i:j])
		i = j
	}
	return out
}

// writeStalls prints, for make fidelity, each source and engine's stall
// summary.
func writeStalls(w io.Writer, points []StallPoint) {
	for _, s := range SummarizeStalls(points) {
		fmt.Fprintf(w, "fidelity: %s %s, %d closed-loop points at two output lengths: prefill stall a cycle median |error| %s, TTFT %s; prefills before the first token %.0f%% of the loop's measured, %.0f%% simulated\n",
			s.Source, s.Engine, s.Points, pct(s.TotalErr), pct(s.TTFTErr), 100*s.MeasuredBeforeFirst, 100*s.SimulatedBeforeFirst)
	}
}

// writeStallTable writes the points to the whole table.
func writeStallTable(w io.Writer, points []StallPoint) {
	if len(points) == 0 {
		return
	}
	fmt.Fprintln(w, "Where the prefill stall falls: closed-loop points measured at two output lengths or more. Each request meets every request's prefill once a cycle, before its first token or between its tokens, so E2E = stall + (out - 1) x decode step: the shortest and longest output give the stall as the line's intercept. \"Before the first token\" is TTFT / (stall / concurrency): how many requests' prefills a request waits for first, its own among them; the rest of the stall falls between its tokens. A point whose TTFT grows by half or more from the shorter output to the longer is left out: its requests queued for others to finish.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| source | engine | model | in | concurrency | TP | outputs | stall ms: measured / simulated (error) | TTFT ms: measured / simulated | before the first token: measured / simulated |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, p := range points {
		m, s := p.Measured, p.Simulated
		fmt.Fprintf(w, "| %s | %s %s | %s | %d | %d | %d | %d, %d | %.0f / %.0f (%+.1f%%) | %.0f / %.0f | %.1f / %.1f |\n",
			mdEscape(p.Source), p.Engine, mdEscape(p.Version), mdEscape(p.Model), p.In, p.Concurrency, p.TP, p.Outs[0], p.Outs[1],
			m.Total, s.Total, 100*(s.Total/m.Total-1), m.TTFT, s.TTFT, m.BeforeFirst(p.Concurrency), s.BeforeFirst(p.Concurrency))
	}
	fmt.Fprintln(w)
}

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
)

// simBand is a simulated level's expected error on one metric: the
// fidelity suite's p90 over the real runs of the level's load, engine and
// context (sim.ErrorBand), or none where the suite has too few.
type simBand struct {
	Metric string  `json:"metric"`         // the suite's name (sim.MetricOfLimit)
	Name   string  `json:"name"`           // the table's: TTFT, TPOT, E2EL
	Band   float64 `json:"band,omitempty"` // 0.25 is ±25%
	Basis  string  `json:"basis"`
}

// simBandMetric is a fidelity-suite metric (ttft, itl, e2e) and the name
// of the first latency series of the metric table that maps to it.
type simBandMetric struct{ metric, name string }

// simBandMetrics are the suite's metrics that the metric table's latency
// series map to (sim.MetricOfLimit), in the table's order.
func simBandMetrics() []simBandMetric {
	var out []simBandMetric
	for _, m := range measure.Metrics() {
		mt := sim.MetricOfLimit(m.Series)
		if mt == "" || slices.ContainsFunc(out, func(b simBandMetric) bool { return b.metric == mt }) {
			continue
		}
		out = append(out, simBandMetric{mt, strings.ToUpper(m.Series)})
	}
	return out
}

// simSituation is where a simulated level sits for its error bands: at a
// rate, the load regime of the requests in flight by Little's law (rate x
// mean E2E), as a what-if row's; a trace or conversations, whose requests
// go at times of their own, the same with the rate they completed at;
// sent all at once under a concurrency cap, a closed loop (the suite's
// concurrency runs); all at once with no cap, offline. Long context by
// the requests' mean lengths (sim.LongContextOf).
func simSituation(load measure.Load, s measure.Summary, cfg sim.Config, dataset string) sim.Situation {
	sit := sim.Situation{TP: cfg.TP, MoE: cfg.Model.MoE(), Engine: string(cfg.Engine),
		Speculative: cfg.SpecMethod != "" && cfg.SpecMethod != "none"}
	switch {
	case load.Rate > 0 && !math.IsInf(load.Rate, 1):
		sit.Regime = sim.RegimeAt(load.Rate, s)
	case dataset == bench.DatasetTrace || dataset == bench.DatasetConversation:
		sit.Regime = sim.RegimeAt(s.RequestThroughput, s)
	case load.MaxConcurrency > 0:
		sit.Regime = sim.RegimeConcurrency
	default:
		sit.Regime = sim.RegimeOffline
	}
	sit.LongContext = sim.LongContextOf(s)
	return sit
}

// simBands are a level's bands, one per latency metric.
func simBands(sit sim.Situation) []simBand {
	var out []simBand
	for _, m := range simBandMetrics() {
		s := sit
		s.Metrics = []string{m.metric}
		band, basis := sim.ErrorBand(s)
		if basis == "" { // band is 0 too
			basis = fmt.Sprintf("none: the fidelity suite has too few real runs of %s at %s load to say", m.name, sit.Regime)
		}
		out = append(out, simBand{Metric: m.metric, Name: m.name, Band: band, Basis: basis})
	}
	return out
}

// printSimBands prints a level's bands under its table.
func printSimBands(w io.Writer, sit sim.Situation, bands []simBand) {
	fmt.Fprintf(w, "Expected error (the simulator against real runs like this level: %s, %s):\n", describeRegimes(sit), sit.Engine)
	for _, b := range bands {
		cell := "-"
		if b.Band != 0 {
			cell = fmt.Sprintf("±%.0f%%", 100*b.Band)
		}
		fmt.Fprintf(w, "  %-5s %-6s %s\n", b.Name, cell, b.Basis)
	}
}

// describeRegimes names a situation's regimes as the fidelity suite does.
func describeRegimes(sit sim.Situation) string {
	r := sit.Regimes()
	r[0] += " load"
	return strings.Join(r, ", ")
}

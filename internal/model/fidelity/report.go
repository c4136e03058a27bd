package fidelity

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Slack is how far, in absolute points of relative error, a regime's
// median may rise above the recorded one before Check fails.
const Slack = 0.02

// Recorded is medians.json: the suite's errors by regime and metric over
// every scored run, as last measured, and each structural regime's within
// each load regime (sim reads the same file for the what-if error bands).
type Recorded struct {
	About    string                     `json:"about"`
	Runs     int                        `json:"runs"`     // the scored runs
	Unscored int                        `json:"unscored"` // runs left out of every figure (Run.Unscored)
	Regimes  map[string]map[string]Stat `json:"regimes"`
	// ByLoad is TabulateByLoad's: structural regime, load regime,
	// metric. Check does not read it; the what-if bands do.
	ByLoad ByLoad `json:"by_load,omitempty"`
	// Bands is TabulateBands': load/engine/context, metric. Check does
	// not read it; the what-if bands of rows with an engine do.
	Bands Table `json:"bands,omitempty"`
}

// ReadRecorded reads a medians file.
func ReadRecorded(path string) (Recorded, error) {
	var r Recorded
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Record turns the tables of every scored run into the medians file's
// content.
func Record(t Table, byLoad ByLoad, bands Table, runs, unscored int) Recorded {
	return Recorded{
		About: "The fidelity suite's errors (internal/model/sim/testdata/fidelity/runs.json) by regime and metric over every scored run " +
			"(runs marked unscored count nowhere; docs/fidelity.md says why), " +
			"as `make fidelity FIDELITY_ARGS=-update` last recorded them: median, p90 and worst absolute relative error. " +
			"make fidelity fails when a median in regimes rises more than 2 points above its figure here. " +
			"by_load gives each structural regime (tp>1, moe, long-context, speculative, disaggregated) within each load regime; " +
			"bands gives the runs by load regime, engine and context (poisson: light, moderate and saturation together). " +
			"The what-if rows take their error band from the p90s (sim.ErrorBand): a structural regime's within the row's load " +
			"where that has at least 20 runs of the metric (sim.MinBandRuns), else under every Poisson load (light, moderate, saturation; " +
			"never the bursts' nor the closed loops'), else nothing.",
		Runs: runs, Unscored: unscored, Regimes: t, ByLoad: byLoad, Bands: bands,
	}
}

// Check compares t with the recorded medians: one line per regime and
// metric whose median rose by more than Slack, or that the recording has
// and t lacks.
func Check(t Table, rec Recorded) []string {
	var bad []string
	for _, g := range Table(rec.Regimes).Regimes() {
		for _, m := range metricNames {
			was, ok := rec.Regimes[g][m]
			if !ok {
				continue
			}
			now, ok := t[g][m]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s %s: recorded (%d runs) but no longer measured", g, m, was.N))
			case now.Median > was.Median+Slack+1e-9:
				bad = append(bad, fmt.Sprintf("%s %s: median error %.1f%%, recorded %.1f%% (more than %.0f points worse; worst run %q)",
					g, m, 100*now.Median, 100*was.Median, 100*Slack, now.Run))
			}
		}
	}
	return bad
}

// Main is make fidelity: simulate every run, print the per-regime table,
// write the whole table to out, and check (or, with update, record) the
// medians. It returns the exit status: 0, 1 when a median got worse, 2 for
// a bad suite.
func Main(stdout, stderr io.Writer, suitePath, mediansPath, out string, update bool) int {
	s, err := Load(suitePath)
	if err != nil {
		fmt.Fprintln(stderr, "fidelity:", err)
		return 2
	}
	results, err := s.SimulateAll()
	if err != nil {
		fmt.Fprintln(stderr, "fidelity:", err)
		return 2
	}
	all := Tabulate(results, "")
	unscored := 0
	for _, r := range results {
		if r.Run.Unscored != "" {
			unscored++
		}
	}
	fmt.Fprintf(stdout, "fidelity: %d runs from %d sources, %d scored and %d unscored (left out of every figure; their reasons are in the whole table)\n",
		len(results), len(s.Sources), len(results)-unscored, unscored)
	fmt.Fprintln(stdout, "fidelity: median and worst absolute error by regime and metric (scored runs; fit | held-out medians)")
	WriteSummary(stdout, all, Tabulate(results, "fit"), Tabulate(results, "held-out"))
	writeSilicon(stdout, s, results)
	writeStalls(stdout, StallPoints(results))
	if out != "" {
		if err := writeFile(out, func(w io.Writer) { WriteMarkdown(w, s, results, all) }); err != nil {
			fmt.Fprintln(stderr, "fidelity:", err)
			return 2
		}
		fmt.Fprintln(stdout, "fidelity: the whole table is in", out)
	}
	if update {
		b, _ := json.MarshalIndent(Record(round(all), roundByLoad(TabulateByLoad(results)), round(TabulateBands(results)), len(results)-unscored, unscored), "", " ")
		if err := os.WriteFile(mediansPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "fidelity:", err)
			return 2
		}
		fmt.Fprintln(stdout, "fidelity: medians recorded in", mediansPath)
		return 0
	}
	rec, err := ReadRecorded(mediansPath)
	if err != nil {
		fmt.Fprintln(stderr, "fidelity:", err)
		return 2
	}
	if bad := Check(all, rec); len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stderr, "fidelity: worse:", b)
		}
		return 1
	}
	fmt.Fprintf(stdout, "fidelity: no regime's median is more than %.0f points above %s\n", 100*Slack, mediansPath)
	return 0
}

// round keeps four decimals of each error, so the recorded file reads.
func round(t Table) Table {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	out := Table{}
	for g, byMetric := range t {
		out[g] = map[string]Stat{}
		for m, s := range byMetric {
			out[g][m] = Stat{N: s.N, Median: r(s.Median), Bias: r(s.Bias), Worst: r(s.Worst), P90: r(s.P90), Run: s.Run}
		}
	}
	return out
}

func roundByLoad(b ByLoad) ByLoad {
	out := ByLoad{}
	for g, t := range b {
		out[g] = round(t)
	}
	return out
}

func writeFile(path string, f func(io.Writer)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	f(&b)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// WriteSummary prints the per-regime table: for each metric the number of
// runs, the median and worst absolute error over all runs, and the
// medians of the fit and held-out runs.
func WriteSummary(w io.Writer, all, fit, held Table) {
	fmt.Fprintf(w, "%-13s %-10s %4s %8s %8s %8s  %8s %8s\n", "regime", "metric", "n", "median", "worst", "bias", "fit", "held-out")
	for _, g := range all.Regimes() {
		for _, m := range metricNames {
			st, ok := all[g][m]
			if !ok {
				continue
			}
			cell := func(t Table) string {
				if s, ok := t[g][m]; ok {
					return pct(s.Median)
				}
				return "-"
			}
			fmt.Fprintf(w, "%-13s %-10s %4d %8s %8s %+7.1f%%  %8s %8s\n", g, m, st.N, pct(st.Median), pct(st.Worst), 100*st.Bias, cell(fit), cell(held))
		}
	}
}

// WriteMarkdown writes the whole table: the summary and every run's
// measured and predicted figures.
func WriteMarkdown(w io.Writer, s *Suite, results []Result, all Table) {
	fmt.Fprintln(w, "# Fidelity suite: every run")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The figures are over the scored runs; an unscored run is listed below with its reason and counts in none of them.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| regime | metric | n | median abs | p90 abs | worst abs | median signed | worst run |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, g := range all.Regimes() {
		for _, m := range metricNames {
			if st, ok := all[g][m]; ok {
				fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %+.1f%% | %s |\n", g, m, st.N, pct(st.Median), pct(st.P90), pct(st.Worst), 100*st.Bias, mdEscape(st.Run))
			}
		}
	}
	fmt.Fprintln(w)
	writeBySource(w, results)
	fmt.Fprintln(w)
	writeStallTable(w, StallPoints(results))
	writeUnrunnable(w, s)
	fmt.Fprintln(w, "| run | source (split) | engine | GPU | model | TP | regimes | metric: measured / simulated (error) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		var cells []string
		for _, m := range metricNames {
			if e, ok := r.Err[m]; ok {
				cells = append(cells, fmt.Sprintf("%s %.4g / %.4g (%+.1f%%)", m, r.Run.Measured.get(m), r.Predicted.get(m), 100*e))
			}
		}
		regimes := strings.Join(r.Regimes, ", ")
		if r.Run.Unscored != "" {
			regimes += "; unscored: " + mdEscape(r.Run.Unscored)
		}
		fmt.Fprintf(w, "| %s | %s (%s) | %s %s | %s | %s | %d | %s | %s |\n", mdEscape(r.Run.ID), mdEscape(r.Run.Source), r.Split,
			r.Run.Engine, mdEscape(r.Run.Version), r.Run.GPU, mdEscape(r.Run.Model), r.Run.TP, regimes, strings.Join(cells, "; "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Sources:")
	fmt.Fprintln(w)
	for _, n := range slices.Sorted(maps.Keys(s.Sources)) {
		src := s.Sources[n]
		where := src.URL
		if where == "" {
			where = src.Repo + " " + src.Path + " @ " + src.Commit
		}
		fmt.Fprintf(w, "- %s (%s): %s; %s\n", mdEscape(n), src.Split, mdEscape(where), mdEscape(src.What))
	}
}

// writeBySource writes each source's median absolute error per metric
// over its scored runs (TabulateBySource): where the error sits.
func writeBySource(w io.Writer, results []Result) {
	by := TabulateBySource(results)
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "By source: median absolute error (runs) over each source's scored runs, whatever their regimes.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| source | scored runs (fit / held-out) | ttft | itl | e2e | throughput |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, n := range names {
		st := by[n]
		cells := make([]string, 0, len(metricNames))
		for _, m := range metricNames {
			if x, ok := st.Metrics[m]; ok {
				cells = append(cells, fmt.Sprintf("%s (%d)", pct(x.Median), x.N))
			} else {
				cells = append(cells, "-")
			}
		}
		fmt.Fprintf(w, "| %s | %d (%d / %d) | %s |\n", mdEscape(n), st.Fit+st.HeldOut, st.Fit, st.HeldOut, strings.Join(cells, " | "))
	}
}

// mdEscape keeps a cell's text from breaking the Markdown table.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "\\", `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

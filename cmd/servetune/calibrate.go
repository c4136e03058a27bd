package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/model/calibrate"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/guided"
)

type calibrateOptions struct {
	db, out, engineVersion, start string
	jsonOut                       string
	fit, metrics                  []string
	maxEvals                      int
	noProgress                    bool
}

func newCalibrateCmd() *cobra.Command {
	var o calibrateOptions
	cmd := &cobra.Command{
		Use:   "calibrate STUDY -o PROFILE.json",
		Short: "Fit the simulator's efficiency constants to a stored study's measurements",
		Long: `Fit the simulated engine's efficiency constants (memory-bandwidth and GEMM
efficiencies, attention, the GPU link, host and kernel overheads) to the measured
load points of a stored study: every trial with status ok is replayed in virtual
time with the exact workload it was measured with, and the constants are fitted
(gonum Nelder-Mead, from the stock constants or --start) to its p50/p99 TTFT and
TPOT. Only the constants the measurements tell apart are fitted; the others stay
and the output says why. The profile names the GPU (the study's hardware.gpu) and
engine (and --engine-version) it was measured on; whatif --calibration, sim
--calibration and a virtual launcher's calibration: refuse it elsewhere unless
forced.`,
		Example: `  servetune calibrate mystudy --db studies.db -o h100-vllm.json --engine-version v0.11.0
  servetune whatif --model meta-llama/Llama-3.1-8B-Instruct --gpus H100-SXM --calibration h100-vllm.json ...
  servetune sim run meta-llama/Llama-3.1-8B-Instruct --gpu H100-SXM --calibration h100-vllm.json --request-rate 8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCalibrate(cmd, args[0], &o)
		},
	}
	fl := cmd.Flags()
	addDBFlag(cmd, &o.db)
	addOutputFlag(fl, &o.out, "output", "o", "write the profile (JSON) to this file (required)")
	fl.StringVar(&o.engineVersion, "engine-version", "", "the engine version measured, e.g. v0.11.0 (default: the study's image tag, when it has one)")
	fl.StringVar(&o.start, "start", "", "start from this profile's constants instead of the stock ones")
	fl.StringSliceVar(&o.fit, "fit", nil, "constants to fit (default: those the measurements tell apart): "+strings.Join(sim.ConstantNames(), ", "))
	fl.StringSliceVar(&o.metrics, "metrics", nil, "metrics compared (default "+strings.Join(calibrate.DefaultMetrics, ",")+")")
	fl.IntVar(&o.maxEvals, "max-evals", 600, "most simulations of the whole study")
	addJSONFlag(fl, &o.jsonOut, "the profile (as -o does)")
	fl.BoolVar(&o.noProgress, "no-progress", false, "no progress on stderr")
	return cmd
}

func runCalibrate(cmd *cobra.Command, name string, o *calibrateOptions) error {
	if o.out == "" {
		return usageErrorf("calibrate: -o PROFILE.json is required")
	}
	if o.out == stdoutPath && o.jsonOut == stdoutPath {
		return usageErrorf("-o - and --json - both write the profile to standard output: give one")
	}
	if o.maxEvals < 1 {
		return usageErrorf("--max-evals %d: must be >= 1", o.maxEvals)
	}
	ctx := cmd.Context()
	st, err := loadStudy(ctx, o.db, name)
	if err != nil {
		return err
	}
	study := st.spec
	if study.Hardware.GPU == "" {
		return usageErrorf("study %s: %v", name, guided.ErrNoGPU)
	}
	gpu, err := catalog.LookupGPU(study.Hardware.GPU)
	if err != nil {
		return usageErrorf("study %s: %v", name, err)
	}
	if study.ModelConfigText == "" {
		// The model's files are gone (the stored spec then names no
		// config): replay the config.json the study stored, so the
		// simulator models the engine that was measured.
		study.ModelConfigText = st.study.ModelConfig
	}
	runs, skipped, err := guided.CalibrationRuns(study, st.trials)
	if errors.Is(err, calibrate.ErrNoPoints) {
		return usageErrorf("study %s has no trial with measured load points to calibrate from", name)
	}
	if err != nil {
		return usageError(err)
	}
	start, err := calibrationStart(o, gpu.ID, study.Engine)
	if err != nil {
		return err
	}
	res, err := fitWithProgress(ctx, cmd.ErrOrStderr(), name, runs, start, o)
	if err != nil {
		return failedError(err)
	}
	version := o.engineVersion
	if version == "" {
		version = imageVersion(study.Text)
	}
	prof := sim.Profile{Version: sim.ProfileVersion, GPU: gpu.ID, Engine: study.Engine, EngineVersion: version,
		Model: study.Model, Source: fmt.Sprintf("study %s (%s)", name, o.db), Created: time.Now().UTC().Format(time.RFC3339),
		Points: res.Points, Constants: res.Constants, Fitted: res.Fitted, Errors: res.Errors}
	for _, path := range []string{o.out, o.jsonOut} {
		if path != "" {
			if err := writeJSONOutput(cmd.OutOrStdout(), path, prof); err != nil {
				return err
			}
		}
	}
	w := tableOut(cmd, o.jsonOut)
	if o.out == stdoutPath {
		w = io.Discard // the profile is standard output's
	}
	printCalibration(w, name, len(runs), skipped, res, prof)
	fmt.Fprintf(w, "wrote %s (measured on %s); use it with whatif --calibration %s, or sim run|estimate|serve ... --calibration %s\n",
		o.out, prof.What(), o.out, o.out)
	if version == "" {
		fmt.Fprintln(w, "the engine version is unknown: give --engine-version so the profile says what it was measured on")
	}
	return nil
}

// calibrationStart is the fit's start: the stock constants, or those of
// the --start profile (which must be for gpu and e); it also checks
// --metrics and --fit against what the fit knows.
func calibrationStart(o *calibrateOptions, gpu string, e engine.Engine) (sim.Constants, error) {
	start := sim.StockConstants(e)
	if o.start != "" {
		p, err := sim.LoadProfile(o.start)
		if err != nil {
			return start, usageError(err)
		}
		if err := p.Check(gpu, e, false); err != nil {
			return start, usageErrorf("--start %s: %v", o.start, err)
		}
		start = p.Constants.WithDefaults(e)
	}
	for _, m := range o.metrics {
		if err := calibrate.ValidMetric(m); err != nil {
			return start, usageErrorf("--metrics: %v", err)
		}
	}
	for _, c := range o.fit {
		if _, ok := start.Get(c); !ok {
			return start, usageErrorf("--fit %q: unknown simulator constant (known: %s)", c, strings.Join(sim.ConstantNames(), ", "))
		}
	}
	return start, nil
}

// fitWithProgress runs the fit, showing its simulations and loss on
// stderr (unless --no-progress).
func fitWithProgress(ctx context.Context, stderr io.Writer, name string, runs []calibrate.Run, start sim.Constants, o *calibrateOptions) (calibrate.Result, error) {
	opts := calibrate.Options{Fit: o.fit, Metrics: o.metrics, MaxEvals: o.maxEvals}
	tty := isTerminal(stderr)
	var drew bool
	if !o.noProgress {
		opts.Progress = calibrateProgress(stderr, tty, name, len(runs), o.maxEvals, &drew)
	}
	res, err := calibrate.Fit(ctx, runs, start, opts)
	if tty && drew {
		fmt.Fprintln(stderr)
	}
	return res, err
}

// calibrateProgress reports the fit on w. On a terminal it is one line
// redrawn in place at most five times a second; on anything else (a file,
// a pipe, a CI log) a plain line at the fit's first evaluation and at every
// tenth of --max-evals, with no terminal escape codes (as whatif's). drew
// is set once it has written.
func calibrateProgress(w io.Writer, tty bool, name string, runs, maxEvals int, drew *bool) func(evals int, loss float64) {
	began := time.Now()
	var last time.Time
	step := max(maxEvals/10, 1)
	calls := 0 // the fit's evaluations (evals counts simulations, several per evaluation)
	return func(evals int, loss float64) {
		calls++
		now := time.Now()
		line := fmt.Sprintf("calibrate %s: %d simulations of %d runs, loss %.4g, %s", name, evals, runs, loss, now.Sub(began).Truncate(time.Second))
		switch {
		case tty:
			if now.Sub(last) > 200*time.Millisecond {
				last = now
				fmt.Fprintf(w, "\r\033[K%s", line)
				*drew = true
			}
		case calls == 1 || calls%step == 0:
			fmt.Fprintln(w, line)
			*drew = true
		}
	}
}

// printCalibration writes the fit: constants before and after, the ones
// held and why, and the error of each metric before and after.
func printCalibration(w io.Writer, name string, runs, skipped int, res calibrate.Result, p sim.Profile) {
	fmt.Fprintf(w, "calibrated %s on %s: %d load points of %d trials", p.Engine, p.GPU, res.Points, runs)
	if skipped > 0 {
		fmt.Fprintf(w, " (%d trials the simulator cannot model left out)", skipped)
	}
	fmt.Fprintf(w, ", %d simulations\n\n", res.Evals)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "constant\tstart\tfitted\tchange")
	for _, c := range res.Fitted {
		a, _ := res.Start.Get(c)
		b, _ := res.Constants.Get(c)
		fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%+.1f%%\n", c, a, b, 100*(b/a-1))
	}
	tw.Flush()
	if len(res.Held) > 0 {
		fmt.Fprintf(w, "held at the start value: %s\n", strings.Join(res.Held, ", "))
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tpoints\tmedian error before\tafter\tlargest after")
	for _, e := range res.Errors {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.1f%%\t%.1f%%\n", e.Metric, e.Points, 100*e.Before, 100*e.After, 100*e.MaxAfter)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// imageVersion is the tag of the study's launcher.image (e.g. v0.11.0 of
// vllm/vllm-openai:v0.11.0), or "" when it names none or "latest".
func imageVersion(specText string) string {
	var doc struct {
		Launcher struct {
			Image string `yaml:"image"`
			Kind  string `yaml:"kind"`
		} `yaml:"launcher"`
	}
	if err := yaml.Unmarshal([]byte(specText), &doc); err != nil {
		return ""
	}
	switch doc.Launcher.Kind {
	case "virtual", "sim":
		return "servetune-sim " + version
	}
	ref := doc.Launcher.Image
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		ref = ref[i+1:]
	}
	_, tag, ok := strings.Cut(ref, ":")
	if !ok || tag == "latest" {
		return ""
	}
	return tag
}

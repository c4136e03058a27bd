package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/trace"
	"github.com/servetune/servetune/internal/registry"
)

// traceFlags are the flags only --dataset trace reads (datasetFlags).
var traceFlags = []string{"trace-format", "trace-speed", "trace-start", "trace-duration"}

// traceFormats names the trace formats for help and errors.
func traceFormats() string {
	return strings.Join(registry.Strings(trace.Formats), ", ")
}

// traceWindow is the part of a trace file a command reads: the file's
// format and the window --trace-speed, --trace-start and --trace-duration
// pick. bench (with sim run and whatif) and plan take it with the same
// flags, defaults and checks.
type traceWindow struct {
	format          string
	speed           float64
	start, duration time.Duration
}

// addFlags registers the window's flags; verb is what the command does
// with the trace's requests ("replay", "plan").
func (w *traceWindow) addFlags(fs *pflag.FlagSet, verb string) {
	fs.StringVar(&w.format, "trace-format", "", "trace: the file's format ("+traceFormats()+")")
	fs.Float64Var(&w.speed, "trace-speed", 1, "trace: time compression (2 sends twice as fast)")
	fs.DurationVar(&w.start, "trace-start", 0, "trace: "+verb+" from this far into the trace (its own time)")
	fs.DurationVar(&w.duration, "trace-duration", 0, "trace: "+verb+" this much of the trace (its own time; 0 = to the end)")
}

// options checks the window's flags and returns the trace's format and
// the options that load at most max of its requests.
func (w traceWindow) options(max int) (trace.Format, trace.Options, error) {
	if w.format == "" {
		return "", trace.Options{}, fmt.Errorf("--trace-format: missing; the trace's format is one of %s", traceFormats())
	}
	format, err := trace.ParseFormat(w.format)
	if err != nil {
		return "", trace.Options{}, fmt.Errorf("--trace-format: %w", err)
	}
	if !(w.speed > 0) || math.IsInf(w.speed, 0) {
		return "", trace.Options{}, fmt.Errorf("--trace-speed %g: want a number > 0", w.speed)
	}
	if w.start < 0 {
		return "", trace.Options{}, fmt.Errorf("--trace-start %v: must be >= 0", w.start)
	}
	if w.duration < 0 {
		return "", trace.Options{}, fmt.Errorf("--trace-duration %v: must be >= 0", w.duration)
	}
	return format, trace.Options{Speed: w.speed, Start: w.start, Duration: w.duration, Max: max}, nil
}

// traceDataset reads the --trace-* flags into ds and the window's first
// request, so that an empty window or a bad header is a usage error here;
// a bad later line is bench.Run's ErrBadDataset (a usage error too), raised
// while it builds the requests, before any is sent.
func traceDataset(f *benchFlags, ds *bench.DatasetSpec) error {
	if f.datasetPath == "" {
		return fmt.Errorf("--dataset trace needs --dataset-path")
	}
	if f.trace.format == "" {
		return fmt.Errorf("--dataset trace needs --trace-format (%s)", traceFormats())
	}
	format, opts, err := f.trace.options(1)
	if err != nil {
		return err
	}
	if _, err := os.Stat(f.datasetPath); err != nil {
		return fmt.Errorf("--dataset-path: %w", err)
	}
	ds.Trace = &bench.Trace{Format: f.trace.format, Speed: opts.Speed, Start: opts.Start, Duration: opts.Duration}
	ds.Input, ds.Output = bench.Dist{}, bench.Dist{} // the trace's own
	reqs, err := trace.Load(f.datasetPath, format, opts)
	if err != nil {
		return fmt.Errorf("--dataset-path: %w", err)
	}
	if len(reqs) == 0 {
		return fmt.Errorf("--trace-start %v, --trace-duration %v: no request of %s in that window", opts.Start, opts.Duration, f.datasetPath)
	}
	return nil
}

// traceLoad makes cfg replay the trace: its window's requests (at most
// --num-requests when given), at the trace's times; a request rate,
// burstiness or rate sweep would contradict them. --max-concurrency still
// caps the requests in flight.
func traceLoad(f *benchFlags, cfg *bench.Config, levels []level) error {
	for _, name := range []string{"request-rate", "burstiness"} {
		if f.fs.Changed(name) {
			return fmt.Errorf("--%s: a trace sends each request at its own time (use --trace-speed)", name)
		}
	}
	if strings.HasPrefix(f.sweep, "rate") {
		return fmt.Errorf("--sweep %s: a trace sends each request at its own time (use --trace-speed)", f.sweep)
	}
	if !f.fs.Changed("num-requests") {
		cfg.NumRequests = 0
	}
	for i := range levels {
		if levels[i].load.MaxConcurrency > 0 {
			levels[i].name = "trace," + loadName(levels[i].load)
		} else {
			levels[i].name = "trace"
		}
	}
	return nil
}

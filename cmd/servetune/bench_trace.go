package main

import (
	"fmt"
	"math"
	"os"
	"strings"

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

// traceDataset reads the --trace-* flags into ds and the window's first
// request, so that an empty window or a bad header is a usage error here;
// a bad later line is bench.Run's ErrBadDataset (a usage error too), raised
// while it builds the requests, before any is sent.
func traceDataset(f *benchFlags, ds *bench.DatasetSpec) error {
	if f.datasetPath == "" {
		return fmt.Errorf("--dataset trace needs --dataset-path")
	}
	if f.traceFormat == "" {
		return fmt.Errorf("--dataset trace needs --trace-format (%s)", traceFormats())
	}
	if _, err := trace.ParseFormat(f.traceFormat); err != nil {
		return fmt.Errorf("--trace-format: %w", err)
	}
	if f.traceSpeed <= 0 || math.IsNaN(f.traceSpeed) || math.IsInf(f.traceSpeed, 0) {
		return fmt.Errorf("--trace-speed %g: want a number > 0", f.traceSpeed)
	}
	if f.traceStart < 0 {
		return fmt.Errorf("--trace-start %v: must be >= 0", f.traceStart)
	}
	if f.traceDuration < 0 {
		return fmt.Errorf("--trace-duration %v: must be >= 0", f.traceDuration)
	}
	if _, err := os.Stat(f.datasetPath); err != nil {
		return fmt.Errorf("--dataset-path: %w", err)
	}
	ds.Trace = &bench.Trace{Format: f.traceFormat, Speed: f.traceSpeed, Start: f.traceStart, Duration: f.traceDuration}
	ds.Input, ds.Output = bench.Dist{}, bench.Dist{} // the trace's own
	reqs, err := trace.Load(f.datasetPath, trace.Format(f.traceFormat), trace.Options{Speed: f.traceSpeed, Start: f.traceStart, Duration: f.traceDuration, Max: 1})
	if err != nil {
		return fmt.Errorf("--dataset-path: %w", err)
	}
	if len(reqs) == 0 {
		return fmt.Errorf("--trace-start %v, --trace-duration %v: no request of %s in that window", f.traceStart, f.traceDuration, f.datasetPath)
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

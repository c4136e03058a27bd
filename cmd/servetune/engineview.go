package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/term"
)

// printEngine writes what the engine reported during a level (its
// /metrics or the simulator's state) beside the client's figures, so that
// the two views of TTFT and ITL can be compared.
func printEngine(w io.Writer, s measure.Summary) {
	e := s.Engine
	if e == nil {
		if msg, ok := s.Meta["engine_metrics_error"].(string); ok {
			fmt.Fprintf(w, "Engine metrics: none (%s)\n", term.Line(msg))
		}
		return
	}
	how := "the simulator's own state"
	if e.Source == "scrape" {
		how = fmt.Sprintf("/metrics every %gs, %d readings", e.IntervalS, e.Samples)
	}
	fmt.Fprintf(w, "---------- Engine (%s, %s) ----------\n", e.Engine, how)
	fmt.Fprintf(w, "%-34s %g / %.1f\n", "Running requests (peak / mean):", e.NumRequestsRunningPeak, e.NumRequestsRunningMean)
	fmt.Fprintf(w, "%-34s %g / %.1f\n", "Waiting requests (peak / mean):", e.NumRequestsWaitingPeak, e.NumRequestsWaitingMean)
	if e.WaitingShare > 0 {
		fmt.Fprintf(w, "%-34s %.0f%% of the level, %.1f running meanwhile\n", "Requests waiting:", 100*e.WaitingShare, e.NumRequestsRunningWhenWaiting)
	}
	fmt.Fprintf(w, "%-34s %.1f%% / %.1f%%\n", "KV cache usage (peak / mean):", 100*e.KVCacheUsagePeak, 100*e.KVCacheUsageMean)
	fmt.Fprintf(w, "%-34s %g\n", "Preemptions:", e.Preemptions)
	if e.PrefixCacheHitRate != nil {
		fmt.Fprintf(w, "%-34s %.1f%%\n", "Prefix cache hit rate:", 100**e.PrefixCacheHitRate)
	}
	rows := []struct {
		name   string
		client *measure.Stats
		server *measure.ServerLatency
	}{
		{"TTFT", &s.TTFT, e.TTFT}, {"queue (server)", nil, e.QueueTime}, {"ITL", &s.ITL, e.ITL}, {"E2EL", &s.E2EL, e.E2E},
	}
	// A scraped histogram knows a percentile only to its bucket: the
	// columns say so and show the bucket, never an interpolated figure.
	p50h, p99h := "server p50", "server p99"
	if e.Source == "scrape" {
		p50h, p99h = "server p50 (histogram bucket)", "server p99 (histogram bucket)"
	}
	fmt.Fprintf(w, "%-16s %12s %19s %30s %30s\n", "latency (ms)", "client mean", "server mean (exact)", p50h, p99h)
	for _, r := range rows {
		if r.server == nil {
			continue
		}
		client := "-"
		if r.client != nil {
			client = fmt.Sprintf("%.2f", r.client.Mean)
		}
		fmt.Fprintf(w, "%-16s %12s %19.2f %s %s\n", r.name, client, r.server.MeanMs,
			padLeft(serverPct(r.server.P50Ms, r.server.P50Bucket, r.server.Exact), 30), padLeft(serverPct(r.server.P99Ms, r.server.P99Bucket, r.server.Exact), 30))
	}
	if e.Source == "scrape" {
		fmt.Fprintln(w, "(the client's figures and the server's means are exact; the server's percentiles are only the histogram bucket that holds them)")
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(w, "%-34s %s\n", "Not exposed by the engine:", strings.Join(e.Missing, ", "))
	}
}

// serverPct writes a server-side percentile at its resolution: the value
// when exact (the simulator's), else the histogram bucket that holds it
// ("≤ 300"), or "~150" from a file that kept no bucket.
func serverPct(v float64, b *measure.Bucket, exact bool) string {
	switch {
	case exact:
		return fmt.Sprintf("%.2f", v)
	case b != nil:
		return b.String()
	}
	return fmt.Sprintf("~%.0f", v)
}

// padLeft right-aligns s in n columns, counting runes ("≤" is one).
func padLeft(s string, n int) string {
	return strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s))) + s
}

// printGPU writes a level's GPU telemetry in one line.
func printGPU(w io.Writer, u *measure.GPUUsage) {
	if u == nil {
		return
	}
	fmt.Fprintf(w, "GPU (%d, %d samples): energy %.0f J (sum of GPUs), %.2f output tok/J, power %.0f W (sum of GPUs' means), mean util %.0f%%, peak memory %.1f GiB (fullest GPU), SM %.0f MHz, peak %.0f C\n",
		u.GPUs, u.Samples, u.EnergyJ, u.OutputTokensPerJoule, u.MeanPowerW, u.MeanUtilPct,
		float64(u.PeakMemUsedBytes)/(1<<30), u.MeanSMClockMHz, u.PeakTempC)
}

// benchGPUs resolves `bench --gpus`: "none", "auto" (every GPU NVML sees,
// when the server is on this machine) or a list of indices. It returns the
// GPUs to sample and their reader, or a note saying why there is no GPU
// telemetry (never an error: the benchmark goes on without it).
func benchGPUs(spec, baseURL string) (gpu.Reader, []int, func(), string, error) {
	none := func() {}
	switch spec {
	case "", "none":
		return nil, nil, none, "", nil
	}
	var ids []int
	if spec != "auto" {
		for _, f := range strings.Split(spec, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return nil, nil, none, "", fmt.Errorf("--gpus %q: want auto, none or GPU indices like 0,1", spec)
			}
			ids = append(ids, n)
		}
	} else if !localURL(baseURL) {
		return nil, nil, none, "", nil // the GPUs are not this machine's
	}
	n, err := gpu.Open()
	if err != nil {
		return nil, nil, none, err.Error(), nil
	}
	if ids == nil {
		devs, err := n.Devices()
		if err != nil {
			n.Close()
			return nil, nil, none, "no GPU telemetry: " + err.Error(), nil
		}
		for _, d := range devs {
			ids = append(ids, d.Index)
		}
	}
	return n, ids, func() { n.Close() }, "", nil
}

// localURL reports whether a base URL's host is this machine (loopback).
func localURL(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	return httpserve.IsLoopback(u.Hostname())
}

// printFindings writes the diagnosis of one level, one finding a line.
func printFindings(w io.Writer, fs []diagnose.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintln(w, "Findings:")
	for _, f := range fs {
		fmt.Fprint(w, "  -"+wrap(f.String(), 100, "    ")[3:])
	}
}

// benchFindings diagnoses a bench level; the engine and its settings are
// the server's own, unknown here but for the metric names.
func benchFindings(load measure.Load, s measure.Summary, e engine.Engine, set engine.Settings) []diagnose.Finding {
	return diagnose.Level(diagnose.Input{Engine: e, Settings: set, Level: measure.NewLevel(load, s, nil), CacheCold: cacheCold(s.Meta)})
}

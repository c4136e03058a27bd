// Package measure is servetune's measurement model, the leaf every other
// package shares: what was sent (Request), what happened to it (Record, its
// Chunks and failure class), the load it was sent under (Load and its
// arrival process), what one load level measured (Summary, from Summarize),
// and the one shape a measured load level takes from the benchmark through
// the trial, the store and the tuner (Level). It also holds the phase a
// benchmark transport runs (Phase), the trial statuses (Status), and the
// summary's file formats: vLLM's flat JSON keys, CSV, per-request JSON
// lines, and Compare. It is the one home of the metric vocabulary (the
// metric table, metric.go: every metric's name, unit, direction and
// reading) and of the statistics (stats.go: percentiles by linear
// interpolation, the median, bootstrap, Student's and Welch's intervals).
//
// Metrics follow vLLM's definitions (docs/architecture.md, "Metrics"):
// TTFT = t_first − t_send, E2EL = t_last − t_send, TPOT = (E2EL −
// TTFT)/(out − 1), ITL per chunk and per token, queue = t_send − t_sched
// (open-loop lateness, never hidden); failed requests are counted by class
// and kept out of the latency statistics; percentiles carry bootstrap 95%
// confidence intervals.
//
//	recs := ... // []measure.Record from a transport
//	s := measure.Summarize(recs, measure.SummaryOptions{Goodput: measure.SLO{TTFTms: 500}})
//	fmt.Printf("p99 TTFT %.1f ms [%.1f, %.1f]\n", s.TTFT.P99, s.TTFT.P99CI[0], s.TTFT.P99CI[1])
//
// The package does no I/O beyond the writers it is given. Its functions are
// safe for concurrent use with distinct *rand.Rand values (a *rand.Rand, a
// Pacer, is not).
package measure

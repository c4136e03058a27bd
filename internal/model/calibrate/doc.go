// Package calibrate fits the simulated engine's efficiency constants
// (sim.Constants: memory-bandwidth and GEMM efficiencies, attention, the
// GPU link, host and kernel overheads) to measured load points, so that
// what-if studies and sim commands predict a user's own engine on their
// own hardware.
//
// A measurement is a Run: the engine configuration as launched and the
// load levels measured on it, each with the exact benchmark that was sent
// (workload, seed, load) and its summary. Fit replays every run on the
// simulator in virtual time and minimises the mean squared log error of
// the compared latency metrics (p50 and p99 TTFT and TPOT by default;
// TTFT and E2E latency less the API server's fixed front end, which no
// other constant moves) with gonum's Nelder-Mead over the logarithm of
// each constant, starting from the constants given (the stock ones, or an
// earlier profile). It fits only the constants the points tell apart:
// those whose 10% change, either way, moves the metrics by at least 2%
// and whose effect is not mostly that of a constant already chosen (a
// single model cannot separate the per-step host overhead from the
// per-kernel overhead, for instance); the others stay at their start
// values and Result.Held says why.
//
//	res, err := calibrate.Fit(ctx, runs, sim.StockConstants(engine.VLLM), calibrate.Options{})
//	if err != nil { ... }
//	for _, e := range res.Errors {
//		fmt.Printf("%s: %.1f%% -> %.1f%%\n", e.Metric, 100*e.Before, 100*e.After)
//	}
//
// guided.CalibrationRuns (tuner/guided) builds the runs of a stored study; `servetune
// calibrate` writes the result as a sim.Profile. Fit is deterministic for
// given runs and start, and safe to call concurrently.
package calibrate

// Package whatif answers the purchase question before any hardware
// exists: for a model and its traffic, which GPU, how many per replica,
// how many replicas, at what cost, and with which serve command.
//
// Run takes the GPU types to consider and, for each, every power-of-two
// GPU count per replica up to a limit and every engine asked for. A
// candidate that cannot hold the model in its most frugal configuration
// (the widest tensor split, the most compact weights and KV cache the user
// allows) is a row that says why: weights larger than the memory, or a
// KV cache too small for max-model-len. Every other candidate is a tuner
// study in virtual time (launcher kind virtual, an in-memory store): the
// sampler proposes the tensor/pipeline split (data-parallel ranks fill the
// rest of the replica), running requests, batched tokens, memory fraction,
// KV cache type and the weight quantizations allowed, and each trial is
// the trial package's capacity search over the Poisson request rate (the
// highest rate whose p99 TTFT/TPOT meet the SLOs with no failed request).
// There is no second optimiser: the tuner's sampler and the trial's search
// do the work.
//
// Each row is costed from dated prices (the catalog's, or the caller's):
// replicas for the target rate and the headroom left, $ per month
// on-demand and reserved, $ per million output tokens. Rows rank by $ per
// month with a target, by $ per million tokens without; every row carries
// its regime and the simulator's error band there (sim.ErrorBand: the
// fidelity suite's measured error over the metrics its verdict rests on;
// or a calibration profile's own fit error over them) and the rows whose cost ranges
// overlap a better row's say so (Row.TiesWith, Report.Ties).
//
//	rep, err := whatif.Run(ctx, whatif.Options{
//		Model: "meta-llama/Llama-3.3-70B-Instruct", GPUs: []string{"H100-SXM", "H200", "B200"},
//		Dataset: bench.DatasetSpec{Kind: bench.DatasetRandom, Input: bench.Dist{Kind: bench.DistFixed, Value: 2048},
//			Output: bench.Dist{Kind: bench.DistFixed, Value: 256}},
//		SLO:       recommend.SLO{{Metric: "ttft_p99", Max: 2000}, {Metric: "tpot_p99", Max: 50}},
//		TargetRPS: 20, ReservedDiscount: 0.4,
//	})
//	if errors.Is(err, whatif.ErrInput) { ... } // a bad option
//	for _, r := range rep.Rows { fmt.Println(r.Name(), r.CapacityRPS, r.MonthlyCost) }
//
// Run is deterministic for given options (the studies are seeded and run
// in virtual time) whatever the number of workers, and safe to call
// concurrently.
package whatif

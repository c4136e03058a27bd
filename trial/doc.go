// Package trial runs one tuning trial: launch the engine, wait for /health
// within the ready timeout, warm up, measure each load level of the workload
// (or search the capacity: the highest concurrency meeting the SLOs), tear
// the engine down, and classify what went wrong.
//
// Failures are results with a class: "oom" when the engine's output carries
// an out-of-memory message (vLLM's "No available memory for the cache
// blocks", CUDA OOM, ...), "crash" when it exits during the measurement,
// "not_ready" when /health does not answer in time, "launch_error" for any
// other start-up failure and "bench_error" when the benchmark itself fails.
//
// Example:
//
//	res := trial.Run(ctx, trial.Plan{
//		Launcher:         &launcher.Sim{GPU: "H100-SXM", TimeScale: 50},
//		Spec:             launcher.Spec{Engine: "vllm", Model: model, Args: args, GPUs: []int{0}},
//		ReadyTimeout:     time.Minute,
//		Dataset:          dataset,
//		Levels:           []bench.Load{{MaxConcurrency: 8}, {MaxConcurrency: 32}},
//		RequestsPerLevel: 100,
//	})
//	if res.Status == trial.StatusFailed {
//		log.Printf("%s: %s", res.Failure, res.Message)
//	}
//
// With Plan.GPUs set (an NVML reader), the trial's GPUs are sampled while the
// engine is measured, into Result.GPU.
//
// SearchCapacity is the capacity search on its own (concurrency doubling,
// then bisection), for callers that measure levels another way.
//
// Concurrency: Run may be called from several goroutines at once for
// trials on different GPUs; each call owns its engine and the goroutine that
// watches it, and waits for that goroutine before returning.
package trial

// Package trial runs one tuning trial: launch the engine, wait for /health
// within the ready timeout, warm up, measure each load level of the workload
// (or search the capacity: the highest concurrency meeting the SLOs), tear
// the engine down, and classify what went wrong.
//
// Failures are results with a class (engine.Failure): the engine's exit is
// classified by engine.Classify ("oom" when the kernel OOM-killed it or its
// output carries an out-of-memory message, "crash" when it exits during the
// measurement, "launch_error" for any other exit before ready), "not_ready"
// when it is not healthy in time, "bench_error" when the benchmark itself
// fails and "quality_fail" when the quality gate fails it. An instance that
// is not reached over HTTP (the virtual launcher's) hands the benchmark its
// own transport.
//
// Example:
//
//	res := trial.Run(ctx, trial.Plan{
//		Launcher:         &simulated.Virtual{GPU: "H100-SXM"},
//		Spec:             launcher.Spec{Engine: engine.VLLM, Model: model, Settings: settings, GPUs: []int{0}},
//		ReadyTimeout:     time.Minute,
//		Dataset:          dataset,
//		Levels:           []measure.Load{{MaxConcurrency: 8}, {MaxConcurrency: 32}},
//		RequestsPerLevel: 100,
//	})
//	if res.Status == measure.StatusFailed {
//		log.Printf("%s: %s", res.Failure, res.Message)
//	}
//
// With Plan.GPUs set (an NVML reader), the trial's GPUs are sampled during
// each level's measured phase, into the level's summary (energy, tokens per
// joule) and Result.GPU; with Plan.ScrapeMetrics the engine's /metrics is
// read during each level (the virtual launcher's engine reports its own).
// With Plan.Quality set, the engine answers the quality gate's tasks after
// its levels; a scored verdict that fails ends the trial as
// failed/quality_fail, its levels kept, its verdict in Result.Quality.
//
// SearchCapacity is the capacity search on its own (concurrency doubling,
// then bisection), for callers that measure levels another way; SearchRate
// is the same search over the request rate (Capacity.Rate), bracketing
// from a starting rate and bisecting geometrically to a relative precision.
//
// Concurrency: Run may be called from several goroutines at once for
// trials on different GPUs; each call owns its engine and the goroutine that
// watches it, and waits for that goroutine before returning.
package trial

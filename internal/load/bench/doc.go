// Package bench is the benchmark client: workloads (datasets and length
// distributions), the seeded request stream, and Run, which drives one load
// level over a Transport and returns per-request records and their Summary
// (package measure holds the measurement model and the metrics).
//
// Run owns the request stream: the requests, the warm-up requests and the
// arrival schedule come from independent streams seeded by Config.Seed, so
// one seed sends the same requests at the same offsets whatever the
// transport. The default transport is HTTP to an OpenAI-compatible endpoint:
// it streams /v1/completions or /v1/chat/completions with
// stream_options.include_usage, parses the SSE stream with SSEReader (one
// read buffer per stream, no allocation per event), and records every
// request's intended send time, actual send time, each text-carrying chunk
// and the end of the stream. The simulated engine's virtual clock
// (sim.Virtual) is the other transport: a virtual trial and `servetune sim
// run` go through the same Run.
//
// Arrivals are open loop (Poisson or gamma), with a concurrency cap, or
// both; a slow server never delays the schedule and lateness shows as queue
// time. Failures are classified (connect, timeout, http_4xx, http_5xx,
// stream_error, truncated, empty) and kept out of latency statistics.
//
// Example:
//
//	in, _ := bench.ParseDist("lognormal:median=1024,sigma=0.6")
//	res, err := bench.Run(ctx, bench.Config{
//		Target:      openai.Target{BaseURL: "http://127.0.0.1:8000", Model: "meta-llama/Llama-3.1-8B-Instruct"},
//		Dataset:     bench.DatasetSpec{Kind: bench.DatasetRandom, Input: in, Output: bench.Dist{Kind: bench.DistFixed, Value: 128}},
//		Load:        measure.Load{Rate: 8, MaxConcurrency: 64},
//		NumRequests: 400,
//		Warmup:      16,
//		Seed:        1,
//	})
//	if err != nil {
//		return err
//	}
//	fmt.Printf("median TTFT %.1f ms, p99 TPOT %.1f ms\n", res.Summary.TTFT.Median, res.Summary.TPOT.P99)
//
// Concurrency: Run may be called from several goroutines at once; each call
// owns its HTTP transport and goroutines and waits for all of them before it
// returns. Config.Progress is called from one goroutine at a time. The pure
// functions are safe for concurrent use with distinct *rand.Rand values (a
// *rand.Rand is not). An SSEReader serves one stream and is not safe for
// concurrent use. The API key in Target is sent as a Bearer header and never
// written to records, summaries, meta or error messages.
package bench

// Package bench is the benchmark client: workloads, open- and closed-loop load
// generation, a streaming OpenAI-compatible client and the metrics of
// DESIGN.md, computed from per-request records.
//
// The package has a pure core and an I/O edge. The core — DatasetSpec.Generate
// (prompts and lengths), Load.Schedule (arrival offsets), Summarize (metrics
// from records), ParseDist, Percentile and the bootstrap — touches no network
// and is deterministic given a seeded *rand.Rand, so the simulated engine
// builds []Record in virtual time and calls Summarize on them. The edge is
// Run, which drives a Config against a real endpoint: it streams
// /v1/completions or /v1/chat/completions with stream_options.include_usage,
// parses the SSE stream with SSEReader (one read buffer per stream, no
// allocation per event), and records every request's intended send time,
// actual send time, each text-carrying chunk and the end of the stream.
//
// Metrics follow vLLM's definitions and names: TTFT = t_first − t_send,
// E2EL = t_last − t_send, TPOT = (E2EL − TTFT)/(out − 1), ITL per chunk and per
// token, queue = t_send − t_sched (open-loop lateness, never hidden), output
// tokens from the server's usage (never assumed). Failures are classified
// (connect, timeout, http_4xx, http_5xx, stream_error, truncated, empty) and
// kept out of latency statistics. Summary marshals to vLLM's flat JSON keys
// (median_ttft_ms, p99_tpot_ms, ...); Compare bootstraps the difference of two
// runs from the per-request samples kept with SummaryOptions.KeepSamples.
//
// Example:
//
//	in, _ := bench.ParseDist("lognormal:median=1024,sigma=0.6")
//	res, err := bench.Run(ctx, bench.Config{
//		Target:      bench.Target{BaseURL: "http://127.0.0.1:8000", Model: "meta-llama/Llama-3.1-8B-Instruct"},
//		Dataset:     bench.DatasetSpec{Kind: bench.DatasetRandom, Input: in, Output: bench.Dist{Kind: bench.DistFixed, Value: 128}},
//		Load:        bench.Load{Rate: 8, MaxConcurrency: 64},
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

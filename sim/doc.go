// Package sim is the simulated inference engine: a physically grounded
// stand-in for vLLM and SGLang. It has one core and two clocks. The core is a
// discrete-event model of an engine: the memory accounting the engine does at
// start-up (weights by quantization, activation peak, non-torch memory, CUDA
// graphs, paged KV blocks), a per-operation roofline step-time model (GEMMs,
// attention by context length, tensor-parallel all-reduce by link, MoE
// experts touched, per-step CPU overhead), and the engine's scheduler
// (continuous batching under max running requests and a batched-token
// budget, chunked prefill, paged KV with preemption, prefix cache hits, a
// waiting queue). RunVirtual drives it in virtual time (thousands of requests
// in milliseconds); Server drives it against the real clock behind the
// engine's OpenAI-compatible HTTP API, optionally TimeScale times faster.
//
// Configs come from the engine's own command line, so the simulator is a
// drop-in for `vllm serve` or `python3 -m sglang.launch_server`:
//
//	cfg, err := sim.ParseArgs([]string{"meta-llama/Llama-3.1-8B-Instruct",
//		"--max-model-len", "16000", "--gpu", "H100-SXM"}, os.Getenv)
//	if err != nil { ... }
//	est, err := sim.Estimate(cfg) // err carries the engine's own message when it does not fit
//	if err != nil { ... }
//	fmt.Printf("KV cache %.2f GiB, %d tokens\n", est.KVCacheGiB, est.KVCacheTokens)
//	recs, err := sim.RunVirtual(cfg, reqs, bench.Load{MaxConcurrency: 64}, 1)
//
// The tokenizer is deliberately simple and documented so clients can align
// prompt lengths: whitespace-separated words, one token per word, and a word
// longer than four bytes counts one token per four bytes (rounded up).
// Generated text is one short word per token, so it re-tokenizes to the same
// count.
//
// Every constant is in constants.go with its source. The model is
// deterministic: the same Config, requests, load and seed give the same
// records.
//
// Config, MemoryEstimate and the package functions are safe for concurrent
// use (they share no state). A Server is safe for concurrent use by many HTTP
// clients; its engine loop is one goroutine owned by Serve.
package sim

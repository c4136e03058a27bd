// Package sim is the simulated inference engine: a physically grounded
// stand-in for vLLM and SGLang. It has one core and two clocks. The core is a
// discrete-event model of an engine: the memory accounting the engine does at
// start-up (weights by quantization, activation peak, non-torch memory, CUDA
// graphs, paged KV blocks), a per-operation roofline step-time model (GEMMs,
// attention by context length, tensor-parallel all-reduce by link, MoE
// experts touched, per-step CPU overhead), and the engine's scheduler
// (continuous batching under max running requests and a batched-token
// budget, chunked prefill, paged KV with preemption, prefix cache hits, a
// waiting queue). Virtual drives it on a virtual clock as a benchmark
// transport (thousands of requests in milliseconds; RunVirtual for one batch
// of requests); Server drives it against the real clock behind the engine's
// OpenAI-compatible HTTP API, optionally TimeScale times faster.
//
// Configs come from the engine's own command line (ParseArgs, through the
// engine package's flag table), so the simulator is a drop-in for `vllm
// serve` or `python3 -m sglang.launch_server`, or straight from settings by
// neutral name (FromSettings), as the tuner's precheck and the virtual
// launcher build them:
//
//	cfg, err := sim.FromSettings(engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct", "", "H100-SXM", 1,
//		engine.Settings{"max_model_len": 16000})
//	if err != nil { ... }
//	est, err := sim.Estimate(cfg) // err carries the engine's own message when it does not fit
//	if err != nil { ... }
//	fmt.Printf("KV cache %.2f GiB, %d tokens\n", est.KVCacheGiB, est.KVCacheTokens)
//	eng, _ := sim.NewVirtual(cfg)
//	res, err := bench.Run(ctx, bench.Config{Transport: eng, Dataset: ds, Load: measure.Load{MaxConcurrency: 64}, NumRequests: 1000})
//
// The tokenizer is deliberately simple and documented so clients can align
// prompt lengths: whitespace-separated words, one token per word, and a word
// longer than four bytes counts one token per four bytes (rounded up).
// Generated text is one short word per token, so it re-tokenizes to the same
// count.
//
// Every constant is in constants.go with its source. The efficiency
// constants (Constants: bandwidth and GEMM efficiencies, attention, the
// link, host and kernel overheads) can be replaced by a calibration
// Profile fitted to a user's own measurements (package calibrate,
// `servetune calibrate`); a profile names the GPU and engine it was
// measured on and Config.ApplyProfile refuses it elsewhere unless forced.
// ErrorBand states the expected error of a prediction by regime, from the
// calibration points below. The model is deterministic: the same Config,
// requests, load and seed give the same records.
//
// # Calibration
//
// Against the published measurements of constants.go (TestCalibration*, TestMemoryMatchesVLLM,
// TestNIMCurveShape print the figures):
//
//   - Memory (point 1): Llama-3.1-8B bf16 H100 TP1 at 0.9 and max_model_len
//     16000: KV 51.41 GiB vs 51.38 measured (+0.1%); Llama-3.3-70B FP8 TP2:
//     31.99 vs 32.0 GiB (0.0%); TP1 fails with vLLM's "No available memory
//     for the cache blocks"; Qwen3-32B TP1: 4.20 vs 4.45 GiB (-5.6%) and
//     fails at max_model_len 32000 with vLLM's message.
//   - Light load (point 2, vLLM v0.5 blog, indirect): the GPU part of an 8B
//     decode step at batch 4 on H100 is 6.6 ms vs ~4.9 ms implied by "62%
//     of ~13 ms on the CPU" (+33%). Point 5 measures the same regime
//     directly and supersedes it.
//   - Maximum throughput (point 3, TensorRT-LLM upper bounds, FP8 KV): the
//     simulated vLLM reaches 0.69-0.86 of TensorRT-LLM on all eleven rows
//     (8B H100 128/128 0.82, 1000/1000 0.77, 2048/128 0.84, 2048/2048 0.84;
//     8B H200 1000/1000 0.86; 70B TP2 H100 1000/1000 0.75, 5000/500 0.80;
//     70B TP1 H200 128/128 0.81, 128/2048 0.69, 1000/1000 0.70, 2048/128
//     0.78), consistent with TensorRT-LLM being the faster engine.
//   - NIM curve (point 4, shape): TTFT stays within 4x of its
//     concurrency-1 value up to 50, then explodes (12 s at 100, 78 s at
//     200) while output throughput levels off near 720 tok/s (NIM ~920).
//     Concurrency-1 TTFT 472 ms vs 407 (+16%), ITL 17.9 ms vs 18.6 (-4%).
//   - Small-batch decode (point 5): vLLM's latency benchmark (batch 8,
//     32 in / 128 out, BF16) from its performance dashboard, "Performance
//     Benchmark" Buildkite build 9515
//     (buildkite.com/vllm/performance-benchmark/builds/9515, H200: 8B
//     833.4 ms, 70B TP4 2077.5 ms, Mixtral TP2 1917.4 ms) and the same
//     dashboard's tables for 8xH100 (as copied on
//     buildkite.com/elastic/enterprise-search-ruby/builds/571: 997.5,
//     2444.5 and 2327.0 ms): mean batch latency within
//     -9.3%..+3.0% on all six rows (8B H100 +3.0%, H200 -1.5%; 70B TP4
//     H100 -3.5%, H200 -9.3%; Mixtral TP2 H100 +1.2%, H200 -7.3%).
//
// # Weak spots and their fixes
//
// Three regimes where a purchase decision is most exposed were measured
// against real vLLM runs outside this repository; each was looked for in
// public measurements and traced to a cause in the model.
//
//   - Decode at batch 8 with short prompts was 7-26% fast. Public: point 5
//     above, before: 8B H100 -11.5%, H200 -18.8%; 70B TP4 H100 -18.0%,
//     H200 -26.4%; Mixtral TP2 H100 -6.8%, H200 -17.0%. Cause: every GPU
//     kernel costs a launch gap and ramp even inside a CUDA graph, which
//     a roofline per operation leaves out and which does not shrink with
//     a faster memory (H200 gains 1.2x over H100 here, not the 1.43x of
//     its bandwidth). Fix: kernelOverhead (3.4 us per kernel, NVIDIA's
//     CUDA Graphs measurement) times the kernels a step launches, counted
//     from the engines' layer (constants.go). After: -9.3%..+3.0%.
//   - Offline maximum throughput of a 70B FP8 model with 1,024 running
//     requests on one H200 was 35-45% low. No public vLLM figure of this
//     regime was found; the nearest public one, TensorRT-LLM v1.0's
//     perf-overview table (github.com/NVIDIA/TensorRT-LLM
//     docs/source/performance/perf-overview.md, Llama 3.3 70B FP8, H200
//     TP1), shows the same deficit on its decode-heavy rows: before, the
//     simulator reached 0.68 (128/2048) and 0.67 (1000/1000) of TensorRT-LLM
//     against 0.75-0.86 on the other rows. In that regime the KV cache
//     binds and vLLM preempts: the simulator recomputed every preempted
//     request from scratch (11-13x the prompt tokens computed again). vLLM
//     keeps a preempted request's computed blocks in its prefix cache
//     until they are handed out again, last block first, so only what was
//     evicted is recomputed; the core now does the same (own entries,
//     evicted from the tail, least recently used first). After: 0.69 and
//     0.70. Most blocks are still handed out before re-admission, so the
//     recompute stays large: this weak spot is narrowed, not closed; a
//     calibration profile of the user's own measurements is the remedy
//     until a public measurement of the regime shows the rest of the cause.
//   - TTFT under light Poisson load was 25-30% low. Public: vLLM issue
//     #12101 (github.com/vllm-project/vllm/issues/12101), Llama-3.3-70B
//     fp16 on 4xH100, concurrency 1, ~1,052 prompt / 258 output tokens:
//     mean TTFT 135.3 ms. The run used vLLM V0 with chunked prefill, whose
//     default token budget then was 512 per step; with that budget the
//     simulator gave 88.3 ms before (-35%) and gives 96.6 ms with the
//     per-kernel overhead above (-29%; with V1's budget 74.1 ms), its TPOT
//     18.1 ms against the run's ~18.7 (before 15.4). The rest of the TTFT
//     cause is not found: this weak spot is open, and the what-if error
//     band of a row whose capacity TTFT bounds says so (ErrorBand).
//
// Prefix caching shares KV blocks as vLLM's block manager does: a prefix
// group's blocks are cached block by block as they are computed, so a
// request admitted while the prefix is still being computed shares what
// is done; a prompt that covers only part of a cached prefix borrows that
// part; a sequence that computed its own copy keeps it (vLLM does not
// deduplicate running sequences' blocks). Cached blocks count once in the
// KV capacity (TestBlockAccounting checks the accounting every step).
//
// Config, MemoryEstimate and the package functions are safe for concurrent
// use (they share no state). A Server is safe for concurrent use by many HTTP
// clients; its engine loop is one goroutine owned by Serve.
package sim

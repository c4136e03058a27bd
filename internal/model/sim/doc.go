// Package sim is the simulated inference engine: a physically grounded
// stand-in for vLLM and SGLang. It has one core and two clocks. The core is a
// discrete-event model of an engine: the memory accounting the engine does at
// start-up (weights by quantization, activation peak, non-torch memory, CUDA
// graphs, paged KV blocks), a per-operation roofline step-time model (GEMMs,
// the memory-bound kernels between them, attention by context length,
// tensor-parallel all-reduce by link, MoE experts touched, per-kernel and
// per-step overheads), the API server's front end a request passes through,
// and the engine's scheduler (continuous batching under max running
// requests and a batched-token budget, chunked prefill, paged KV with
// preemption, a prefix cache keyed by content, a waiting queue). Virtual
// drives it on a virtual clock as a benchmark transport (thousands of
// requests in milliseconds; RunVirtual for one batch of requests); Server
// drives it against the real clock behind the engine's OpenAI-compatible
// HTTP API, optionally TimeScale times faster.
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
// Every constant is in constants.go, each with its source and a link to
// its derivation in docs/fidelity-accounts.md, "The simulator's
// constants", where the errors against the published calibration points
// and the known weak spots are too. The efficiency constants (Constants:
// bandwidth and GEMM efficiencies, attention, the link, the host,
// front-end and kernel overheads) can be replaced by a calibration Profile
// fitted to a user's own measurements (package calibrate, `servetune
// calibrate`); a profile names the GPU and engine it was measured on and
// Config.ApplyProfile refuses it elsewhere unless forced.
//
// ErrorBand states the expected error of a prediction in its regime and
// over the metrics its verdict rests on, from the fidelity suite's
// measured errors (medians.json, docs/fidelity.md): its
// load regime's, and each structural regime's (tp>1, moe...) within that
// load where the suite has MinBandRuns runs of the metric there.
//
// The simulated vLLM runs async scheduling (its default since PR #27614)
// unless --no-async-scheduling is given. The model is deterministic: the
// same Config, requests, load and seed give the same records.
//
// # Prefix cache
//
// Prefix hits come out of content, as in vLLM's block manager. A
// sequence's tokens (the server's token ids of the prompt, then the
// output words it sends, which tokenize back to the same ids; on the
// virtual clock, the workload's prefix group for its first PrefixTokens
// tokens and the request's own after) fill pages of 16 tokens (vLLM's
// default block; SGLang's radix tree matches single tokens, which the
// model rounds to pages of 16 of its page size 1). A full page is keyed
// by a hash chained on the previous page's, hash(parent, tokens), so two
// sequences share a page only when everything up to its end is equal. At
// admission the leading pages found are hits: no prefill, no new memory,
// a reference more (vllm:prefix_cache_{queries,hits}_total count prompt
// tokens; at least one token is always computed). Pages are cached as they
// fill, prompt and output alike (SGLang's output at the request's end),
// so a conversation's next turn hits its previous answer (on the virtual
// clock, a session's turns are one prefix group over their whole
// sequence, prompts and answers: conversation.go). A page no
// running sequence references stays cached in the free queue and is
// evicted least recently freed first, a request's tail before its head;
// a referenced page never is. A page computed beside a cached copy stays
// its sequence's own (vLLM does not deduplicate). Finished and preempted
// requests free into the one queue, as vLLM's free block queue does. With
// caching off (prefix_caching false) nothing is cached or hit.
// TestBlockAccounting checks the accounting every step,
// TestPrefixEvictionLRU the eviction order, TestConversationPrefixCache the
// hits over HTTP.
//
// Config, MemoryEstimate and the package functions are safe for concurrent
// use (they share no state). A Server is safe for concurrent use by many HTTP
// clients; its engine loop is one goroutine owned by Serve.
package sim

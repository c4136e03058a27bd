// Package diagnose turns stored measurements into advice with evidence, as
// an experienced engineer reads a benchmark: each Rule looks at one measured
// load level (the client's summary, the engine's own metrics, the GPUs'
// telemetry) and, when the level shows what it looks for, returns a Finding
// that says what happened with its numbers, what to do (naming the
// engine's flags, with the configuration's value when known), and the
// figures it rests on.
//
// The rules, most pressing first:
//
//   - max_running_requests: requests wait while the KV cache has room and
//     the batch holds at one size: raise the cap on running requests (each
//     engine's own flag, from engine.Flag).
//   - kv_memory: preemptions, or a full cache with requests waiting: more
//     KV memory (memory fraction, FP8 KV cache, more tensor parallelism).
//   - ttft_queueing, ttft_prefill: which part of the server-side TTFT
//     dominates, the queue or the prompt's computation.
//   - gpu_underused: GPUs idle half the time with nothing waiting.
//   - client_overhead: the client's TTFT far above the server's (network or
//     client overhead: the figures are suspect).
//   - client_late: an open-loop client behind its own arrival schedule.
//
// A Finding is plain data (JSON tags, no methods beyond String), for the
// CLI to print and for reports to render:
//
//	for _, f := range diagnose.Level(diagnose.Input{Engine: engine.VLLM, Settings: settings, Level: lv}) {
//		fmt.Println(f) // [action] concurrency=48: Requests waited while ... Raise <the engine's flag> (now 8) ...
//	}
//
// The package is pure: no I/O, safe for concurrent use.
package diagnose

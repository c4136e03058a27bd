// Package engine is servetune's one vocabulary of the inference engines it
// tunes, vLLM and SGLang: every fact about "an engine" lives here.
//
//   - The settings by neutral name (tensor_parallel, max_running_requests,
//     gpu_memory_fraction, ...), their value types and ranges, and each
//     engine's flags for them: one table (flags.go) that Render writes
//     command lines from and ParseCommand reads them back with, for both
//     engines and the simulated engine's own flags.
//   - Command lines: ServeCommand (`vllm serve ...`, `python3 -m
//     sglang.launch_server ...`), ContainerArgs and DefaultImage for the
//     engines' images, DockerRun for a recommendation.
//   - Failure classes (Failure) and the one classifier of an engine that
//     ended (Classify: the exit code, the kernel's OOM kill, and vLLM's,
//     SGLang's and PyTorch's out-of-memory messages).
//   - The simulated engine's contract with its launchers: SimEnv, SimImage.
//
// Example:
//
//	s := engine.Settings{"tensor_parallel": 2, "max_running_requests": 128, "kv_cache_dtype": "fp8"}
//	argv := engine.ServeCommand(engine.SGLang, "Qwen/Qwen2.5-7B-Instruct", s, nil)
//	// python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct (then SGLang's flags)
//	cmd, err := engine.ParseCommand(argv[3:], nil) // back to SGLang and the settings
//
// Everything here is a pure value or function and safe for concurrent use;
// Settings is a plain map (concurrent readers are fine, a writer needs
// exclusive access).
package engine

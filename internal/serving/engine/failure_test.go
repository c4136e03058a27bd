package engine

import (
	"strings"
	"testing"
)

// TestClassifyRealMessages: the start-up failures vLLM, SGLang and PyTorch
// print when a configuration does not fit, as they print them (log prefixes
// included), are classified oom by the one classifier; other exits are a
// crash under load or a launch error before ready.
func TestClassifyRealMessages(t *testing.T) {
	tests := []struct {
		name    string
		exit    Exit
		serving bool
		logs    string
		want    Failure
		line    string // a substring the message must carry
	}{
		{"vLLM V1 no KV cache", Exit{Code: 1}, false,
			"(EngineCore_DP0 pid=18799) INFO 10-08 20:33:40 [gpu_worker.py:276] Available KV cache memory: -1.20 GiB\n" +
				"(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n" +
				"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
			FailOOM, "No available memory for the cache blocks"},
		{"vLLM V1 max_model_len does not fit", Exit{Code: 1}, false,
			"(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: To serve at least one request with the models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the available KV cache memory (4.50 GiB). Based on the available memory, the estimated maximum model length is 32768. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			FailOOM, "5.62 GiB KV cache is needed"},
		{"vLLM V0 max_model_len does not fit", Exit{Code: 1}, false,
			"ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (33424). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			FailOOM, "33424"},
		{"vLLM free memory below the utilisation", Exit{Code: 1}, false,
			"(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			FailOOM, "less than desired GPU memory utilization"},
		{"torch CUDA OOM loading weights", Exit{Code: 1}, false,
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
			FailOOM, "Tried to allocate 1.96 GiB"},
		{"SGLang KV pool empty", Exit{Code: 1}, false,
			"[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):\n" +
				"  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 1999, in run_scheduler_process\n" +
				"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n" +
				"[2025-03-29 18:18:34] Received sigquit from a child process. It usually means the child failed.",
			FailOOM, "Not enough memory. Please try to increase"},
		{"SGLang newer wording", Exit{Code: 1}, false,
			"RuntimeError: Not enough memory to allocate KV cache.", FailOOM, "allocate KV cache"},
		{"SGLang CUDA graph capture", Exit{Code: 1}, false,
			"Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.50 GiB is free.",
			FailOOM, "Capture cuda graph failed"},
		{"the kernel's OOM killer", Exit{Code: 137, OOMKilled: true}, false, "", FailOOM, "out-of-memory killer"},
		{"OOM-killed under load", Exit{Code: 137, OOMKilled: true}, true, "INFO running", FailOOM, "during the measurement"},
		{"CUDA OOM under load", Exit{Code: 1}, true, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.", FailOOM, "512.00 MiB"},
		{"segfault under load", Exit{Code: 139}, true, "INFO ok\nSegmentation fault", FailCrash, "exit code 139): Segmentation fault"},
		{"bad flag before ready", Exit{Code: 2}, false, "vllm serve: error: unrecognized arguments: --frobnicate", FailLaunchError, "unrecognized arguments"},
		{"silent exit before ready", Exit{Code: 1}, false, "", FailLaunchError, "exit code 1"},
		{"not an OOM: a metric name", Exit{Code: 1}, false, "INFO vllm:kv_cache_usage_perc 0.93 (memory use fine)", FailLaunchError, "kv_cache_usage_perc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := Classify(tt.exit, tt.serving, tt.logs)
			if got != tt.want || !strings.Contains(msg, tt.line) {
				t.Errorf("Classify = %s %q, want %s with %q", got, msg, tt.want, tt.line)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
		})
	}
}

// TestSimulatorMessagesAreOOM: what the simulated engine prints when a
// configuration does not fit is what the classifier reads as oom.
func TestSimulatorMessagesAreOOM(t *testing.T) {
	for _, m := range []string{MsgNoCacheBlocks, "To serve ... (7.81 GiB " + MsgKVTooSmall + " (4.45 GiB).", "torch.OutOfMemoryError: " + MsgCUDAOOM, MsgSGLangNotEnough} {
		if _, ok := OOMLine("ERROR " + m); !ok {
			t.Errorf("%q is not classified oom", m)
		}
	}
}

func TestFailureValid(t *testing.T) {
	for _, f := range append([]Failure{FailNone}, Failures...) {
		if !f.Valid() {
			t.Errorf("%q not valid", f)
		}
	}
	if Failure("gremlins").Valid() {
		t.Error("unknown class valid")
	}
}

// TestClassifyScheduler: an engine whose job a scheduler ended is a
// scheduler failure with the scheduler's words, whatever the engine
// printed last; the kernel's OOM kill still reads as oom.
func TestClassifyScheduler(t *testing.T) {
	got, msg := Classify(Exit{Code: 143, Scheduler: "slurm job 12 CANCELLED"}, true, "INFO: Started server process\nINFO: Shutting down\n")
	if got != FailScheduler || !strings.HasPrefix(msg, "slurm job 12 CANCELLED during the measurement") || !strings.Contains(msg, "Shutting down") {
		t.Errorf("Classify = %s %q", got, msg)
	}
	if got, _ := Classify(Exit{Code: 137, OOMKilled: true}, true, ""); got != FailOOM {
		t.Errorf("OOM-killed job: %s", got)
	}
	if got, msg := Classify(Exit{Code: 0, Scheduler: "slurm job 3 TIMEOUT"}, false, ""); got != FailScheduler || msg != "slurm job 3 TIMEOUT at start-up" {
		t.Errorf("Classify = %s %q", got, msg)
	}
}

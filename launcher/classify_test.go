package launcher

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		code int
		oom  bool
		logs string
		want Failure
	}{
		{"clean exit", 0, false, "INFO shutting down", FailureNone},
		{"kernel OOM", 137, true, "", FailureOOM},
		{"vllm no KV", 1, false, "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`", FailureOOM},
		{"vllm max len", 1, false, "ValueError: To serve at least one request with the models's max seq len (32000), (7.81 GiB KV cache is needed, which is larger than the available KV cache memory (4.45 GiB).", FailureOOM},
		{"torch", 1, false, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", FailureOOM},
		{"sglang", 1, false, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", FailureOOM},
		{"segfault", 139, false, "Segmentation fault", FailureCrash},
		{"bad flag", 2, false, "error: unrecognized arguments: --frobnicate", FailureCrash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.code, tt.oom, tt.logs); got != tt.want {
				t.Errorf("Classify = %q, want %q", got, tt.want)
			}
		})
	}
}

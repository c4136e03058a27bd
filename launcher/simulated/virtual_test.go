package simulated

import (
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// TestVirtualDeploymentRoleSettings: the virtual kind's disaggregated
// deployment (the guided sampler's forecast) builds each role's engines
// with that role's batch limits.
func TestVirtualDeploymentRoleSettings(t *testing.T) {
	v := &Virtual{GPU: "H100-SXM"}
	spec := launcher.Spec{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []int{0, 1},
		Settings: engine.Settings{"disaggregated": true, "max_running_requests": 32, "max_batched_tokens": 2048,
			"prefill_max_running_requests": 4, "prefill_max_batched_tokens": 16384, "decode_max_running_requests": 256}}
	d, err := v.Deployment(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Prefill.MaxRunningRequests != 4 || d.Prefill.MaxBatchedTokens != 16384 {
		t.Errorf("prefill: max_running_requests %d, max_batched_tokens %d; want 4, 16384", d.Prefill.MaxRunningRequests, d.Prefill.MaxBatchedTokens)
	}
	if d.Decode.MaxRunningRequests != 256 || d.Decode.MaxBatchedTokens != 2048 {
		t.Errorf("decode: max_running_requests %d, max_batched_tokens %d; want 256, 2048", d.Decode.MaxRunningRequests, d.Decode.MaxBatchedTokens)
	}
}

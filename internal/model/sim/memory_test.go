package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
)

func mustParse(t testing.TB, args ...string) Config {
	t.Helper()
	cfg, err := ParseArgs(args, nil)
	if err != nil {
		t.Fatalf("ParseArgs(%q): %v", args, err)
	}
	return cfg
}

// TestMemoryMatchesVLLM checks the memory model against the vLLM start-up
// logs of docs/reference.md (Engines): llm-d-benchmark's
// (config_explorer/empirical-vllm-memory-results.md) and llm-d-planner's
// Qwen3-14B version sweep (accuracy/results/version-sweep/run_matrix.md,
// v0.15.0 and v0.16.0, whose sampler sorts as the model's does).
func TestMemoryMatchesVLLM(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		weights    float64
		kv         float64
		tol        float64 // relative tolerance on KV
		wantErrMsg string
	}{
		{"llama-8b bf16 tp1", []string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16000"}, 14.99, 51.38, 0.05, ""},
		{"llama-70b fp8 tp2", []string{"meta-llama/Llama-3.3-70B-Instruct", "--quantization", "fp8", "-tp", "2", "--max-model-len", "16000"}, 33.88, 32.0, 0.08, ""},
		{"llama-70b fp8 id tp2", []string{"--model", "meta-llama/Llama-3.3-70B-Instruct-FP8", "--tensor-parallel-size=2", "--max-model-len", "16000"}, 33.88, 32.0, 0.08, ""},
		{"qwen3-32b bf16 tp1", []string{"Qwen/Qwen3-32B", "--max-model-len", "16000"}, 61.03, 4.45, 0.08, ""},
		{"llama-70b fp8 tp1", []string{"meta-llama/Llama-3.3-70B-Instruct", "--quantization", "fp8", "--max-model-len", "16000"}, 67.72, 0, 0, "No available memory for the cache blocks"},
		{"qwen3-32b at 32000", []string{"Qwen/Qwen3-32B", "--max-model-len", "32000"}, 61.03, 0, 0, "KV cache is needed, which is larger than the available KV cache memory"},
		{"qwen3-32b bf16 tp2", []string{"Qwen/Qwen3-32B", "-tp", "2", "--max-model-len", "16000"}, 30.59, 34.49, 0.02, ""},
		{"qwen3-14b at 0.95 v0.15", []string{"Qwen/Qwen3-14B", "--model-config", "testdata/fidelity/qwen3-14b.config.json", "--max-model-len", "8192", "--gpu-memory-utilization", "0.95"}, 27.52, 41.94, 0.02, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, append(tt.args, "--gpu", "H100-SXM")...)
			est, err := Estimate(cfg)
			t.Logf("weights %.2f act %.2f non-torch %.2f kv %.2f GiB (%d tokens), max concurrency %.2f",
				est.WeightsGiB, est.ActivationGiB, est.NonTorchGiB, est.KVCacheGiB, est.KVCacheTokens, est.MaxConcurrency)
			if math.Abs(est.WeightsGiB-tt.weights)/tt.weights > 0.01 {
				t.Errorf("weights = %.2f GiB, want %.2f", est.WeightsGiB, tt.weights)
			}
			if tt.wantErrMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrMsg) || !errors.Is(err, ErrOOM) || !isOOM(err.Error()) {
					t.Fatalf("err = %v, want OOM with %q", err, tt.wantErrMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(est.KVCacheGiB-tt.kv)/tt.kv > tt.tol {
				t.Errorf("KV = %.2f GiB, want %.2f within %.0f%%", est.KVCacheGiB, tt.kv, tt.tol*100)
			}
		})
	}
}

func TestMemoryTradeOffs(t *testing.T) {
	kv := func(args ...string) MemoryEstimate {
		est, err := Estimate(mustParse(t, append([]string{"llama-3.1-8b", "--max-model-len", "8192"}, args...)...))
		if err != nil {
			t.Fatal(err)
		}
		return est
	}
	base := kv()
	tests := []struct {
		name string
		est  MemoryEstimate
		more bool // more KV tokens than base
	}{
		{"fp8 kv doubles tokens", kv("--kv-cache-dtype", "fp8"), true},
		{"lower utilisation", kv("--gpu-memory-utilization", "0.7"), false},
		{"more seqs costs sampler memory", kv("--max-num-seqs", "2048", "--max-num-batched-tokens", "8192"), false},
		{"tp2 splits weights and kv heads", kv("-tp", "2"), true},
		{"fp8 weights", kv("--quantization", "fp8"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.est.KVCacheTokens > base.KVCacheTokens; got != tt.more {
				t.Errorf("KV tokens %d vs base %d", tt.est.KVCacheTokens, base.KVCacheTokens)
			}
		})
	}
	if r := float64(tests[0].est.KVCacheTokens) / float64(base.KVCacheTokens); math.Abs(r-2) > 0.01 {
		t.Errorf("fp8 KV ratio = %.3f, want 2", r)
	}
}

func TestSGLangMemory(t *testing.T) {
	cfg := mustParse(t, "--model-path", "llama-3.1-8b", "--mem-fraction-static", "0.88", "--context-length", "16000")
	if cfg.Engine != engine.SGLang {
		t.Fatalf("engine = %s", cfg.Engine)
	}
	est, err := Estimate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// (79.18 - 0.3 - 14.96) - 79.18*0.12 = 54.42 GiB, page size 1.
	if math.Abs(est.KVCacheGiB-54.42) > 0.1 || est.BlockSize != 1 {
		t.Errorf("engine.SGLang KV = %.2f GiB (block %d), want 54.42", est.KVCacheGiB, est.BlockSize)
	}
	_, err = Estimate(mustParse(t, "--model-path", "llama-3.1-8b", "--mem-fraction-static", "0.15"))
	if err == nil || !strings.Contains(err.Error(), engine.MsgSGLangNotEnough) {
		t.Errorf("err = %v, want %q", err, engine.MsgSGLangNotEnough)
	}
}

// isOOM is whether the one classifier reads msg as out of memory.
func isOOM(msg string) bool {
	_, ok := engine.OOMLine(msg)
	return ok
}

// TestSGLangStartsWithoutPrefillProfile: SGLang sizes its KV pool from the
// memory left after the weights less total*(1 - mem_fraction_static)
// (profile_max_num_token, sgl-project/sglang
// python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py at
// 001ccef0072a4537d4ec6bdd50a73e6feb2c907d) and runs no prefill at
// start-up, so a whole-context prefill batch (chunked prefill off at
// 131072) starts with the same pool as chunked prefill on, though its
// run-time activations are larger. vLLM does profile a dummy run of
// max_num_batched_tokens (vllm-project/vllm vllm/worker/model_runner.py at
// 587909ce7f4fe9cb48be48fb50936bcb18b2f73c, profile_run), which is
// max_model_len with chunked prefill off, so its pool shrinks. What still
// fails SGLang's start-up is CUDA graph capture in the reserve.
func TestSGLangStartsWithoutPrefillProfile(t *testing.T) {
	base := []string{"--model-path", "llama-3.1-8b", "--context-length", "131072", "--gpu", "H100-SXM"}
	offCfg := mustParse(t, append(base, "--chunked-prefill-size", "-1")...)
	off, err := Estimate(offCfg)
	if err != nil {
		t.Fatalf("chunked prefill off: %v", err)
	}
	// The default fraction reserves for max_prefill_tokens without chunks
	// (sglangMemoryDefaults); at the same fraction the pools are the same.
	if err := offCfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	on, err := Estimate(mustParse(t, append(base, "--mem-fraction-static", fmt.Sprint(offCfg.MemFraction))...))
	if err != nil {
		t.Fatal(err)
	}
	if off.KVCacheTokens != on.KVCacheTokens || off.ActivationGiB <= on.ActivationGiB {
		t.Errorf("pool %d vs %d tokens, run-time activations %.2f vs %.2f GiB", off.KVCacheTokens, on.KVCacheTokens, off.ActivationGiB, on.ActivationGiB)
	}
	vOn, errOn := Estimate(mustParse(t, "llama-3.1-8b", "--max-model-len", "131072", "--gpu", "H100-SXM"))
	vOff, errOff := Estimate(mustParse(t, "llama-3.1-8b", "--max-model-len", "131072", "--gpu", "H100-SXM", "--no-enable-chunked-prefill"))
	if errOn != nil || errOff != nil || vOff.KVCacheTokens >= vOn.KVCacheTokens {
		t.Errorf("vLLM: pool %d tokens chunked off vs %d on (%v, %v); the profile run should shrink it", vOff.KVCacheTokens, vOn.KVCacheTokens, errOff, errOn)
	}
	// A reserve too small for the CUDA graphs still fails SGLang's start-up;
	// without graphs nothing is allocated there.
	_, err = Estimate(mustParse(t, append(base, "--mem-fraction-static", "0.999")...))
	if !errors.Is(err, ErrOOM) || !strings.Contains(err.Error(), "CUDA graph capture") {
		t.Errorf("tiny reserve: err = %v", err)
	}
	if _, err := Estimate(mustParse(t, append(base, "--mem-fraction-static", "0.999", "--disable-cuda-graph")...)); err != nil {
		t.Errorf("tiny reserve without CUDA graphs: %v", err)
	}
}

// A block-scaled FP8 checkpoint refuses a tensor-parallel size that splits
// a block of its MLPs, as vLLM and SGLang do while creating the weights
// (config.go, checkWeightBlocks): Qwen3-235B-A22B-FP8's experts (1536
// wide, 128x128 blocks) at TP8 get 192 columns a GPU. TP4 (384) and TP8
// with the experts in parallel start; so does the BF16 checkpoint at TP8.
func TestFP8BlocksRefuseSplitShards(t *testing.T) {
	tp, ep := engine.Flag(engine.VLLM, "tensor_parallel"), engine.Flag(engine.VLLM, "expert_parallel")
	fp8 := []string{"Qwen/Qwen3-235B-A22B-FP8", "--gpu", "H200"}
	_, err := ParseArgs(append(fp8, tp, "8"), nil)
	if !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), "= 192 is not divisible by weight quantization block_n = 128") {
		t.Errorf("FP8 at TP8: err = %v", err)
	}
	for _, args := range [][]string{
		append(fp8, tp, "4"),
		append(fp8, tp, "8", ep),
		{"Qwen/Qwen3-235B-A22B", "--gpu", "H200", tp, "8"},
	} {
		if _, err := Estimate(mustParse(t, args...)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

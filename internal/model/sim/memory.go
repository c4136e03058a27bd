package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/servetune/servetune/internal/serving/engine"
)

// ErrOOM is wrapped by every StartupError: the config does not fit in memory.
var ErrOOM = errors.New("does not fit in GPU memory")

// StartupError is a start-up failure. Error returns the engine's own message
// (what the real engine would print last), so it can be logged as is.
type StartupError struct {
	Engine  engine.Engine
	Message string
}

func (e *StartupError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrOOM) true.
func (e *StartupError) Unwrap() error { return ErrOOM }

// MemoryEstimate is the per-GPU memory breakdown the engine computes at
// start-up. Sizes are GiB; it is also the JSON of `sim estimate`.
type MemoryEstimate struct {
	Engine       engine.Engine `json:"engine"`
	GPU          string        `json:"gpu"`
	TotalGiB     float64       `json:"total_gib"`     // memory the engine sees
	RequestedGiB float64       `json:"requested_gib"` // vLLM: total*utilisation; SGLang: total*mem_fraction_static
	WeightsGiB   float64       `json:"weights_gib"`
	// ActivationGiB is vLLM's profiled peak of a dummy forward and sampler
	// pass; for SGLang the run-time peak of its largest prefill batch,
	// which the 1 - mem_fraction_static reserve must hold once serving
	// (SGLang does not profile it at start-up).
	ActivationGiB float64 `json:"activation_gib"`
	NonTorchGiB   float64 `json:"non_torch_gib"`
	CUDAGraphGiB  float64 `json:"cuda_graph_gib"`
	KVCacheGiB    float64 `json:"kv_cache_gib"`
	KVCacheTokens int     `json:"kv_cache_tokens"`
	KVBlocks      int     `json:"kv_blocks"`
	BlockSize     int     `json:"block_size"`
	KVBytesPerTok float64 `json:"kv_bytes_per_token"` // per GPU
	// MLA says the KV cache is multi-head latent attention's, whole on
	// every TP rank.
	MLA bool `json:"mla,omitempty"`
	// KVCacheTokensTotal is the tokens the whole server holds: each
	// data-parallel rank (a replica, or an attention rank) caches
	// KVCacheTokens of its own.
	KVCacheTokensTotal int `json:"kv_cache_tokens_total"`
	// ExpertWeightsGiB is the routed experts' part of WeightsGiB, spread
	// over ExpertGroup GPUs (MoE models only).
	ExpertWeightsGiB float64 `json:"expert_weights_gib,omitempty"`
	ExpertGroup      int     `json:"expert_group,omitempty"`
	// LinearStateBytes is one request's state in its stage's
	// linear-attention layers on one GPU (a hybrid's; linear.go), and
	// LinearStateSlots SGLang's pool of them (max_mamba_cache_size).
	LinearStateBytes   float64 `json:"linear_state_bytes,omitempty"`
	LinearStateSlots   int     `json:"linear_state_slots,omitempty"`
	MaxModelLen        int     `json:"max_model_len"`
	MaxRunningRequests int     `json:"max_running_requests"`
	MaxConcurrency     float64 `json:"max_concurrency"` // requests of max_model_len tokens that fit at once
}

// startup readies c for an engine to start (NewServer, NewVirtual): its
// defaults filled in and checked (Normalize), then its memory accounted
// (Estimate).
func (c *Config) startup() (MemoryEstimate, error) {
	if err := c.Normalize(); err != nil {
		return MemoryEstimate{}, err
	}
	return Estimate(*c)
}

// Estimate computes the start-up memory accounting of cfg on one GPU of its
// TP group. When the config does not fit, the error is a *StartupError with
// the engine's own message (errors.Is(err, ErrOOM)); the estimate returned
// with it still has every term filled in, for reports.
func Estimate(cfg Config) (MemoryEstimate, error) {
	if err := cfg.Normalize(); err != nil {
		return MemoryEstimate{}, err
	}
	m := cfg.Model
	total := cfg.GPU.MemoryGiB * GiB

	// Weights: quantized linear layers, 16-bit embeddings and LM head, all
	// sharded over TP (vocab-parallel embeddings) and PP (layers), the
	// routed experts over their group (moe.go).
	weights, experts := cfg.weightsPerGPU()
	kvPerTok := cfg.kvPoolBytesPerToken() // windowed layers: hybrid.go
	// Speculative decoding's drafts: their weights and their KV cache,
	// token for token beside the target's (speculative.go).
	weights += cfg.specWeightsPerGPU()
	kvPerTok += cfg.specKVPerTokenPerGPU()

	est := MemoryEstimate{
		Engine: cfg.Engine, GPU: cfg.GPU.ID, TotalGiB: cfg.GPU.MemoryGiB,
		WeightsGiB: weights / GiB, BlockSize: cfg.BlockSize, KVBytesPerTok: kvPerTok,
		MaxModelLen: cfg.MaxModelLen, MLA: m.MLA != nil,
		ExpertWeightsGiB: experts / GiB, ExpertGroup: cfg.MoEGroup(),
		LinearStateBytes: cfg.linearStateBytes(),
	}
	scale := cfg.Constants.MemoryOverhead // the reservations' scale (constants.go)
	if cfg.CUDAGraphs {
		est.CUDAGraphGiB = scale * cudaGraphBytesPerLayer * float64(m.Layers) / float64(cfg.PP) / GiB
	}
	if weights > total {
		return est, &StartupError{Engine: cfg.Engine, Message: fmt.Sprintf(
			"torch.OutOfMemoryError: %s Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB of which %.2f GiB is free.",
			engine.MsgCUDAOOM, weights/GiB, total/GiB, math.Max(0, total-weights)/GiB)}
	}

	kv := cfg.kvPool(&est, total, weights)
	if cfg.Engine == engine.SGLang {
		var err error
		if kv, err = cfg.sglangLinearPool(&est, kv); err != nil {
			return est, err
		}
	}
	if kv <= 0 {
		est.KVCacheGiB = kv / GiB
		msg := engine.MsgNoCacheBlocks
		if cfg.Engine == engine.SGLang {
			msg = engine.MsgSGLangNotEnough
		}
		return est, &StartupError{Engine: cfg.Engine, Message: msg}
	}
	blockBytes := kvPerTok * float64(cfg.BlockSize)
	est.KVBlocks = int(kv / blockBytes)
	est.KVCacheTokens = est.KVBlocks * cfg.BlockSize
	est.KVCacheTokensTotal = est.KVCacheTokens * cfg.DP
	est.KVCacheGiB = float64(est.KVBlocks) * blockBytes / GiB
	est.MaxConcurrency = float64(est.KVCacheTokens) / float64(cfg.MaxModelLen)

	return est, cfg.startupLimits(&est, kv, kvPerTok, total)
}

// startupLimits checks what else start-up needs once the KV pool of kv
// bytes is sized (kvPerTok bytes a token): vLLM one request of
// max_model_len in the pool; both engines' CUDA graphs in the headroom.
// It sets SGLang's default max_running_requests from the pool.
func (cfg Config) startupLimits(est *MemoryEstimate, kv, kvPerTok, total float64) error {
	switch cfg.Engine {
	case engine.VLLM:
		need := kvPerTok*float64(cfg.MaxModelLen) + cfg.boundedKVBytes(cfg.MaxModelLen, cfg.MaxBatchedTokens)
		if need > kv {
			estLen := int(kv/kvPerTok) / cfg.BlockSize * cfg.BlockSize
			return &StartupError{Engine: cfg.Engine, Message: fmt.Sprintf(
				"To serve at least one request with the models's max seq len (%d), (%.2f GiB %s (%.2f GiB). Based on the available memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
				cfg.MaxModelLen, need/GiB, engine.MsgKVTooSmall, kv/GiB, estLen)}
		}
	case engine.SGLang:
		// SGLang: max_running_requests defaults from the pool size.
		if cfg.MaxRunningRequests == 0 {
			est.MaxRunningRequests = min(sglangMaxRunningCap, max(2048, est.KVCacheTokens/cfg.MaxModelLen*512))
		} else {
			est.MaxRunningRequests = cfg.MaxRunningRequests
		}
		if est.LinearStateSlots > 0 { // a state for each running request, and spares (linear.go)
			est.MaxRunningRequests = min(est.MaxRunningRequests, est.LinearStateSlots/sglangMambaRunningRatio)
		}
	}
	// CUDA graphs are captured in the 1 - mem_fraction headroom, on both
	// engines. SGLang runs no prefill at start-up: profile_max_num_token
	// (sgl-project/sglang python/sglang/srt/model_executor/
	// model_runner_kv_cache_mixin.py at 001ccef0072a4537d4ec6bdd50a73e6feb2c907d;
	// model_runner.py before the split) sizes the pool from the free
	// memory after the weights less total*(1-mem_fraction_static), and the
	// only allocation after it is the decode CUDA graph capture, so the
	// graphs are its one start-up check too. The prefill activations
	// (ActivationGiB) come out of the same reserve at run time; the
	// simulator does not model a run-time OOM and serves such a prefill.
	if headroom := total * (1 - cfg.MemFraction); est.CUDAGraphGiB*GiB > headroom {
		return &StartupError{Engine: cfg.Engine, Message: fmt.Sprintf(
			"torch.OutOfMemoryError: %s Tried to allocate %.2f GiB during CUDA graph capture. GPU 0 has a total capacity of %.2f GiB of which %.2f GiB is free.",
			engine.MsgCUDAOOM, est.CUDAGraphGiB, total/GiB, headroom/GiB)}
	}
	return nil
}

// kvPool is the bytes the engine's start-up leaves for the KV cache on one
// GPU after the weights, filling est's reservation terms: vLLM's requested
// share less the profiled activation peak and the memory outside torch;
// SGLang's max_total_tokens budget, the free memory after the weights and
// its context less total*(1-mem_fraction_static).
func (cfg Config) kvPool(est *MemoryEstimate, total, weights float64) float64 {
	scale := cfg.Constants.MemoryOverhead // the reservations' scale (constants.go)
	requested := total * cfg.MemFraction
	est.RequestedGiB = requested / GiB
	switch cfg.Engine {
	case engine.VLLM:
		act := scale * activationPeak(cfg)
		nonTorch := scale * vllmNonTorchTP1
		if cfg.TP*cfg.PP > 1 || cfg.DPAttentionOn() {
			nonTorch = scale * vllmNonTorchTPN
		}
		nonTorch += cfg.Deviation.seqReserve(cfg)
		est.ActivationGiB, est.NonTorchGiB = act/GiB, nonTorch/GiB
		est.MaxRunningRequests = cfg.MaxRunningRequests
		return requested - weights - act - nonTorch
	case engine.SGLang:
		ctxBytes := scale*sglangContextBytes + cfg.Deviation.seqReserve(cfg)
		est.NonTorchGiB = ctxBytes / GiB
		est.ActivationGiB = scale * activationPeak(cfg) / GiB
		return (total - ctxBytes - weights) - total*(1-cfg.MemFraction)
	}
	return 0
}

// activationPeak is vLLM's profiled peak of the dummy run: the forward pass
// over max_num_batched_tokens tokens (gate_up output plus a few hidden-size
// buffers) and the sampler over max_num_seqs rows of fp32 logits.
func activationPeak(cfg Config) float64 {
	m := cfg.Model
	tokens := float64(cfg.MaxBatchedTokens)
	seqs := float64(cfg.MaxRunningRequests)
	if seqs == 0 { // SGLang default: the cuda-graph batch is what it samples at once
		seqs = float64(cfg.CUDAGraphMaxBS)
	}
	inter := float64(m.Intermediate)
	if m.MoE() {
		inter *= float64(m.ExpertsPerTok)
	}
	forward := tokens * (2*inter/float64(cfg.TP) + activationHiddenCopies*float64(m.Hidden)) * bytesBF16
	sampler := samplerLogitCopies * seqs * float64(m.Vocab) * 4
	return forward + sampler
}

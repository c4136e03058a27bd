package sim

import (
	"fmt"
	"math"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Hybrid linear attention (catalog.Model.Linear: Qwen3-Next, Qwen3.5's
// Gated DeltaNet layers). A linear-attention layer keeps no KV cache:
// each request holds a state of constant size (a short-convolution
// window and a recurrent matrix per value head), whatever its length.
//
// Memory. vLLM's hybrid KV cache manager puts the state of a request in
// one page of the pool that the attention layers' blocks share: it
// enlarges the attention block until an attention layer's page (block
// size x one token's KV) holds a layer's state, in multiples of 16
// tokens, and pads the state's page to it
// (HybridAttentionMambaModelConfig in vllm/model_executor/models/config.py),
// and groups the layers so that each group has as many layers as there
// are attention layers (kv_cache_utils.py): a request holds its blocks
// of the attention group and one page in each group of linear layers
// (MambaSpec, mamba_cache_mode "none"). SGLang keeps the states in a
// pool of their own (MambaPool): max_mamba_cache_size states, sized at
// mamba_full_memory_ratio (0.9, ServerArgs) to the KV pool's memory,
// and runs at most a third as many requests
// (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO; model_runner_kv_cache_mixin.py,
// _handle_max_mamba_cache and _resolve_max_num_reqs). The state's
// recurrent part is float32 on SGLang (mamba2_state_dtype in
// python/sglang/srt/configs/mamba_utils.py), the model's dtype on vLLM
// (MambaStateDtypeCalculator, mamba_ssm_cache_dtype "auto"), and
// config.json's mamba_ssm_dtype on both where it has one.
//
// Time. The linear layers' projections are GEMMs like any linear; the
// recurrence runs as a chunked scan over a prompt and one update per
// decoded token (fla's chunk_gated_delta_rule and
// fused_recurrent_gated_delta_rule, vllm/model_executor/layers/fla/ops):
// a decode step reads and writes each request's state in every linear
// layer, a prefill costs per token the chunk's attention-like products
// and the state's, and reads and writes the intermediate states once a
// chunk. A cached prefix is not reused: the state at its end is not
// kept (vLLM disabled prefix caching for hybrid models; its later
// 'align' mode and SGLang's MambaRadixCache are not modelled).

// sglangMambaFullMemoryRatio is SGLang's --mamba-full-memory-ratio
// default (python/sglang/srt/server_args.py, mamba_full_memory_ratio:
// float = 0.9): the state pool's memory over the KV pool's.
const sglangMambaFullMemoryRatio = 0.9

// sglangMambaRunningRatio is SGLang's states per running request with
// the radix cache on (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3).
const sglangMambaRunningRatio = 3

// vllmMambaBlockAlign is the multiple of tokens vLLM rounds the enlarged
// attention block to (kernel_block_alignment_size, 16 for the
// FlashAttention and FlashInfer backends).
const vllmMambaBlockAlign = 16

// linearStateElemBytes is the recurrent state's element size on cfg's
// engine.
func (c *Config) linearStateElemBytes() float64 {
	switch c.Model.Linear.StateDType {
	case "float32":
		return 4
	case "bfloat16", "float16":
		return bytesBF16
	}
	if c.Engine == engine.SGLang {
		return 4
	}
	return bytesBF16
}

// linearStateBytesPerLayer is one request's state in one linear layer on
// one GPU: the convolution window in BF16 and the recurrent matrices,
// both split over the tensor-parallel ranks by head.
func (c *Config) linearStateBytesPerLayer() float64 {
	conv, rec := c.Model.Linear.StateElems()
	tp := float64(c.TP)
	return conv/tp*bytesBF16 + rec/tp*c.linearStateElemBytes()
}

// linearStateBytes is one request's state in all of its stage's linear
// layers on one GPU; 0 without linear layers.
func (c *Config) linearStateBytes() float64 {
	if c.Model.Linear == nil {
		return 0
	}
	return float64(c.Model.Linear.Layers) / float64(c.PP) * c.linearStateBytesPerLayer()
}

// linearBlockSize is the attention block vLLM's hybrid manager sets so
// that an attention layer's page holds a linear layer's state: the
// fewest multiples of 16 tokens whose KV reaches it.
func (c *Config) linearBlockSize() int {
	perToken := c.kvLayerBytesPerGPU()
	return vllmMambaBlockAlign * int(math.Ceil(c.linearStateBytesPerLayer()/(vllmMambaBlockAlign*perToken)))
}

// linearGroups is the pages one request's state takes in vLLM's pool:
// one in each group of the linear layers, a group having as many layers
// as the attention layers.
func (c *Config) linearGroups() int {
	a := c.Model.Linear
	if a == nil || c.Engine != engine.VLLM {
		return 0
	}
	full := c.Model.FullLayers()
	return (a.Layers + full - 1) / full
}

// vllmLinearDefaults enlarges vLLM's block size for a hybrid model's
// states (linearBlockSize), as vLLM does when the block is unset or
// smaller.
func (c *Config) vllmLinearDefaults() {
	if c.Model.Linear == nil {
		return
	}
	if b := c.linearBlockSize(); c.BlockSize < b {
		c.BlockSize = b
	}
}

// sglangLinearPool splits SGLang's memory for the KV pool, rest bytes,
// between the states' pool and the KV pool, filling est's states; it
// returns the KV pool's share. The states' pool takes
// mamba_full_memory_ratio / (1 + ratio) of it, in whole states.
func (cfg Config) sglangLinearPool(est *MemoryEstimate, rest float64) (float64, error) {
	per := cfg.linearStateBytes()
	if per == 0 || rest <= 0 {
		return rest, nil
	}
	slots := int(rest * sglangMambaFullMemoryRatio / (1 + sglangMambaFullMemoryRatio) / per)
	est.LinearStateSlots = slots
	if slots <= 0 {
		return 0, &StartupError{Engine: cfg.Engine, Message: fmt.Sprintf(
			"RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=%d (total_rest_memory=%.2f GB, mamba_cache_per_req=%.2f MB).",
			slots, rest/GiB, per/(1<<20))}
	}
	return rest - float64(slots)*per, nil
}

// linearStep is the step model's share for the linear-attention layers.
type linearStep struct {
	frac float64 // linear layers / all layers
	// heads is the value heads on one GPU, dk and dv a head's key and
	// value widths; state is a head's recurrent state in bytes.
	heads, dk, dv, state float64
	// convBytes is one request's convolution window on one GPU, read
	// and written at each decode step.
	convBytes float64
}

// gdnChunk is the chunked scan's chunk (fla's chunk_gated_delta_rule,
// chunk_size 64).
const gdnChunk = 64

// setLinear fits s to cfg's linear-attention layers: their projections
// among the linears, the attention layers' weighted by their share, and
// the recurrence's figures (linearStep); nothing without them.
func (s *stepModel) setLinear(cfg Config) {
	a := cfg.Model.Linear
	if a == nil {
		return
	}
	tp := float64(cfg.TP)
	h := s.hidden
	frac := float64(a.Layers) / s.layers
	key, value := float64(a.KeyHeads*a.KeyHeadDim)/tp, float64(a.ValueHeads*a.ValueHeadDim)/tp
	vHeads := float64(a.ValueHeads) / tp
	// The attention layers' QKV and O, in the share of layers that have them.
	for i := range s.gemms[:2] {
		g := &s.gemms[i]
		g.weights, g.in, g.out = g.weights*(1-frac), g.in*(1-frac), g.out*(1-frac)
		g.kernels, g.quant = 1-frac, 1-frac
	}
	// in_proj_qkvz and in_proj_ba (one read of the input each), out_proj.
	in := 2*key + 2*value + 2*vHeads
	s.gemms = append(s.gemms,
		gemm{weights: h * in * frac, in: h * frac, out: in * frac, kernels: 2 * frac, quant: 2 * frac},
		gemm{weights: value * h * frac, in: value * frac, out: h * frac, kernels: frac, quant: frac})
	conv := float64(a.ConvChannels()) / tp
	s.lin = &linearStep{frac: frac, heads: vHeads, dk: float64(a.KeyHeadDim), dv: float64(a.ValueHeadDim),
		state:     float64(a.KeyHeadDim*a.ValueHeadDim) * cfg.linearStateElemBytes(),
		convBytes: conv * float64(a.ConvKernel-1) * bytesBF16}
}

// actBytes is a token's memory-bound bytes in one layer, averaged
// over the layers, of the linear layers' kernels between their GEMMs:
// the convolution (read and write q, k, v) and the gated norm (read the
// output and its gate, write the output).
func (x *linearStep) actBytes(convChannels, value float64) float64 {
	return x.frac * (2*convChannels + 3*value) * bytesBF16
}

// seconds is one layer's recurrence in a step, averaged over the layers:
// each decoding request's state read and written once (and its
// convolution window), and a prefill's chunked scan: per token and head
// the chunk's products of q and k with the chunk's keys and values
// (4·C·dk + 2·C·dv FLOPs) and the state's (6·dk·dv), reading and
// writing each chunk's state in BF16, and each prefilling request's
// state once.
func (x *linearStep) seconds(s *stepModel, b batchShape) float64 {
	decodes := float64(b.decodes)
	t := roofline(decodes*x.heads*6*x.dk*x.dv, s.attnRate, decodes*(2*x.heads*x.state+2*x.convBytes), s.bw)
	if pt := float64(b.prefillTokens); pt > 0 {
		seqs := float64(b.seqs - b.decodes)
		flops := pt * x.heads * (4*gdnChunk*x.dk + 2*gdnChunk*x.dv + 6*x.dk*x.dv)
		bytes := pt*x.heads*(2*x.dk*x.dv*bytesBF16/gdnChunk+(2*x.dk+2*x.dv)*bytesBF16) + seqs*2*(x.heads*x.state+x.convBytes)
		t += roofline(flops, s.attnRate, bytes, s.bw)
	}
	return x.frac * t
}

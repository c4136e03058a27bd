package sim

import (
	"math"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Mixture-of-experts and multi-head latent attention under tensor, data
// and expert parallelism (docs/reference.md, "Mixture of experts"):
//
//   - attention, the shared experts, the leading dense layers, the
//     router and the embeddings are split over tensor_parallel GPUs and
//     repeated on every data-parallel rank;
//   - the routed experts are spread over the experts' group (MoEGroup):
//     tensor_parallel GPUs, or tensor_parallel × data_parallel with
//     data-parallel attention; sliced (TP) by default, whole experts per
//     GPU with expert_parallel;
//   - MLA's latent KV cache is whole on every TP rank; each
//     data-parallel rank caches its own requests.

// DPAttentionOn reports whether the data-parallel ranks run attention on
// their own requests and share the routed experts: an MoE model with
// data_parallel > 1 on vLLM, or with dp_attention on SGLang.
func (c *Config) DPAttentionOn() bool {
	return c.Model.MoE() && c.DP > 1 && (c.Engine == engine.VLLM || c.DPAttention)
}

// MoEGroup is how many GPUs one pipeline stage's routed experts are
// spread over (the EP size with expert_parallel); 0 for dense models.
func (c *Config) MoEGroup() int {
	switch {
	case !c.Model.MoE():
		return 0
	case c.DPAttentionOn():
		return c.TP * c.DP
	}
	return c.TP
}

// weightsPerGPU is one GPU's weights in bytes, and the routed experts'
// part of them. Expert parallelism places whole experts, so a GPU holds
// ceil(experts / group) of them.
func (c *Config) weightsPerGPU() (all, experts float64) {
	m := c.Model
	wb := c.weightBytesPerElem()
	routed := m.RoutedParams()
	rest := (m.LinearParams()-routed)*wb + m.EmbeddingParams()*bytesBF16
	all = rest / float64(c.TP*c.PP)
	if routed == 0 {
		return all, 0
	}
	g := float64(c.MoEGroup())
	share := 1 / g
	if c.ExpertParallel {
		share = math.Ceil(float64(m.Experts)/g) / float64(m.Experts)
	}
	experts = routed * share * wb / float64(c.PP)
	return all + experts, experts
}

// kvBytesPerTokenPerGPU is one token's KV cache on one GPU: its stage's
// layers, of the GPU's KV heads (2·kv·d elements per layer), or of MLA's
// latent (kv_lora_rank + qk_rope_head_dim elements per layer, whole on
// every TP rank).
func (c *Config) kvBytesPerTokenPerGPU() float64 {
	m := c.Model
	layers := float64(m.Layers) / float64(c.PP)
	if a := m.MLA; a != nil {
		return layers * float64(a.KVLoRARank+a.QKRopeHeadDim) * c.kvBytesPerElem()
	}
	return 2 * layers * float64(c.kvHeadsPerGPU()) * float64(m.HeadDim) * c.kvBytesPerElem()
}

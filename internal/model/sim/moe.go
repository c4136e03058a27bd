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

// DPLockstep reports whether the data-parallel ranks step together, each
// step as long as the slowest rank's with every rank's tokens through every
// GPU's expert slices (virtualRun.startLockstep): vLLM with an MoE model and
// data_parallel > 1, whose ranks meet in each MoE layer's collectives
// (docs/fidelity-accounts.md#vllms-data-parallel-moe-ranks-step-together-the-dp2-run).
// SGLang's DP attention also meets every step; it is not modelled.
func (c *Config) DPLockstep() bool {
	return c.DPAttentionOn() && c.Engine == engine.VLLM
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
	rest, routed := m.WeightBytesSplit(c.quantOrNone())
	all = rest / float64(c.TP*c.PP)
	if routed == 0 {
		return all, 0
	}
	g := float64(c.MoEGroup())
	share := 1 / g
	if c.ExpertParallel {
		share = math.Ceil(float64(m.Experts)/g) / float64(m.Experts)
	}
	experts = routed * share / float64(c.PP)
	return all + experts, experts
}

// kvBytesPerTokenPerGPU is one token's KV cache on one GPU in its
// stage's full-attention layers (kvLayerBytesPerGPU each); windowed
// layers hold boundedKVBytes a request instead (hybrid.go).
func (c *Config) kvBytesPerTokenPerGPU() float64 {
	return float64(c.Model.FullLayers()) / float64(c.PP) * c.kvLayerBytesPerGPU()
}

// moeStep is the step-time model of an MoE layer under data-parallel
// attention and expert parallelism, and of MLA's attention. newMoEStep
// adjusts the dense step model (steptime.go) and takes over its routed
// experts; tokenwise adds what scales with a step's tokens.
type moeStep struct {
	frac      float64 // layers with routed experts / all layers
	ranks     float64 // data-parallel ranks whose tokens meet in the experts (1 without DP attention)
	group     float64 // GPUs the experts are spread over
	experts   float64
	topK      float64
	expertW   float64 // elements of one expert's MLP per GPU (whole with EP, else a 1/group slice)
	perGPU    float64 // experts a GPU holds (all of them sliced, or its whole ones)
	hidden    float64
	latency   float64 // seconds, one exchange among the group
	bandwidth float64 // bytes/s
	ep        bool
	kernels   float64 // kernels per layer beside the linears' (newMoEStep)
	// cross is the share of the exchange bound for other domains
	// (Topology.EPCrossShare), sent at netBW after netLatency; domain
	// the GPUs of one domain.
	cross, domain, netLatency, netBW float64
}

// setMLAGemms replaces s's attention linears with MLA's (DeepSeek-V2/V3):
// the latent down-projections, the query's up-projection, the absorbed KV
// up-projection and the output, and sets the attention's per-token shape
// to the latent.
func (s *stepModel) setMLAGemms(cfg Config) {
	m, a := cfg.Model, cfg.Model.MLA
	tp := float64(cfg.TP)
	h := float64(m.Hidden)
	heads := float64(m.Heads) / tp
	qk := float64(a.QKNopeHeadDim + a.QKRopeHeadDim)
	latent := float64(a.KVLoRARank + a.QKRopeHeadDim)
	s.gemms = s.gemms[:0]
	if a.QLoRARank > 0 {
		// The query and KV down-projections read the same input and
		// run as one replicated GEMM (fused_qkv_a_proj in the
		// engines' deepseek_v2.py), then the query's up-projection.
		r := float64(a.QLoRARank)
		s.gemms = append(s.gemms, linear(h*(r+latent), h, r+latent), linear(r*heads*qk, r, heads*qk))
	} else {
		s.gemms = append(s.gemms, linear(h*heads*qk, h, heads*qk), linear(h*latent, h, latent))
	}
	// The KV up-projection runs absorbed at decode: two batched
	// GEMMs on bf16 weights, one into the latent before attention
	// and one out of it after (w_kc and w_vc in the engines'
	// deepseek_v2.py).
	kvUp := float64(a.KVLoRARank) * heads * float64(a.QKNopeHeadDim+a.VHeadDim)
	s.gemms = append(s.gemms,
		gemm{weights: kvUp, in: float64(a.KVLoRARank), out: heads * float64(a.QKNopeHeadDim+a.VHeadDim), kernels: 2},
		linear(heads*float64(a.VHeadDim)*h, heads*float64(a.VHeadDim), h))
	s.headDim, s.kvPerGPU = latent, 0.5 // 2·kv·d = one latent per token
	s.prefillPairFlops = 2 * (qk + float64(a.VHeadDim))
}

// newMoEStep returns the MoE step model of cfg (nil for dense models)
// after fitting s to cfg's attention: MLA's projections replace the
// grouped-query ones, and its cache reads as kv_lora_rank +
// qk_rope_head_dim elements per token and layer, whole on every TP rank.
// The decode attention then does about 4·(kv_lora_rank + qk_rope_head_dim)
// FLOPs per head and cached token, as the absorbed form does. Prefill
// attention runs unabsorbed: the latents are up-projected to per-head
// keys of qk_nope_head_dim + qk_rope_head_dim and values of v_head_dim
// (the KV up-projection counted with the linears), and attention does
// 2·(qk + v) FLOPs per head and query-key pair (2·(192 + 128) for
// DeepSeek-V3; forward_normal in SGLang's deepseek_v2.py, the prefill
// path of vLLM's MLA backends), not the absorbed 4·576.
func newMoEStep(cfg Config, s *stepModel) *moeStep {
	m := cfg.Model
	tp := float64(cfg.TP)
	h := float64(m.Hidden)
	if m.MLA != nil {
		s.setMLAGemms(cfg)
	}
	if !m.MoE() {
		return nil
	}
	frac := m.MoEShare()
	mlps := 0.0 // the shared and dense MLPs per layer, for their SiLU-and-mul kernels
	// SGLang runs DeepSeek-V3/R1's one shared expert as a 257th routed
	// expert that every token takes, inside the fused MoE kernels, unless
	// the experts are expert-parallel (deepseek_v2.py,
	// determine_num_fused_shared_experts, on by default): its weights are
	// read as before, with no kernels of its own.
	fusedShared := cfg.Engine == engine.SGLang && !cfg.ExpertParallel && m.Experts == 256 && m.SharedIntermediate == m.Intermediate
	// The shared experts of the MoE layers and the MLP of the leading
	// dense layers, over TP, weighted by the layers that have them.
	for _, mlp := range []struct {
		inter, share float64
		fused        bool
	}{{float64(m.SharedIntermediate), frac, fusedShared}, {float64(m.DenseIntermediate), 1 - frac, false}} {
		if mlp.inter == 0 || mlp.share == 0 {
			continue
		}
		i := mlp.inter / tp
		k := mlp.share
		if mlp.fused {
			k = 0
		}
		s.gemms = append(s.gemms,
			gemm{weights: 2 * h * i * mlp.share, in: h * mlp.share, out: 2 * i * mlp.share, kernels: k, quant: k},
			gemm{weights: i * h * mlp.share, in: i * mlp.share, out: h * mlp.share, kernels: k, quant: k})
		mlps += k
	}
	g := float64(cfg.MoEGroup())
	x := &moeStep{frac: frac, ranks: 1, group: g, experts: float64(m.Experts), topK: float64(m.ExpertsPerTok),
		hidden: h, ep: cfg.ExpertParallel}
	// The kernels the MoE layers add beside the linears (steptime.go,
	// layerKernels): the routed path's in the MoE layers, SiLU-and-mul
	// per shared or dense MLP, and MLA's two RMSNorms of the latents.
	x.kernels = frac*moeRoutedKernels + mlps*mlpActivationKernels
	if m.MLA != nil {
		x.kernels += mlaExtraKernels
	}
	if cfg.Quantization == "fp8" && cfg.GPU.HasFP8() {
		x.kernels += frac * moeRoutedQuantKernels
	}
	if cfg.DPAttentionOn() {
		x.ranks = float64(cfg.DP)
	}
	x.expertW, x.perGPU = 3*h*float64(m.Intermediate)/g, x.experts
	if x.ep {
		x.expertW, x.perGPU = 3*h*float64(m.Intermediate), math.Ceil(x.experts/g)
	}
	if g > 1 {
		lat := allReduceLatencyNVLink
		if !cfg.GPU.NVLink() {
			lat = allReduceLatencyPCIe
		}
		x.latency = lookupLatency(lat, int(g)).Seconds()
		x.bandwidth = cfg.GPU.LinkGBps * 1e9 * cfg.Constants.WithDefaults(cfg.Engine).LinkEfficiency
	}
	if s.topo.EPCrossShare > 0 {
		x.cross, x.domain = s.topo.EPCrossShare, float64(s.topo.Domain)
		x.netLatency, x.netBW = scaleOutLatency.Seconds(), s.topo.bandwidth()
	}
	s.moe = false // moeStep costs the routed experts and the router
	return x
}

// tokenwise is one layer's routed-expert time for a step of T tokens on
// this data-parallel rank, averaged over the layers: every rank's tokens
// meet in the experts, group of them (batchShape.groupTokens; 0 takes
// every rank as loaded as this one), so a GPU reads the experts those
// tokens touch among its own and does its share of their FLOPs; the
// router; and the exchange among the group. With expert parallelism each
// token's hidden state goes to the GPUs of its top-k experts and comes
// back (all-to-all dispatch and combine); without it the ranks' tokens
// are gathered and the partial sums reduce-scattered.
func (x *moeStep) tokenwise(s *stepModel, T, group float64) float64 {
	tokens := T * x.ranks // into the experts, from every rank
	if group > 0 && x.ranks > 1 {
		tokens = group
	}
	touched := x.perGPU * (1 - math.Pow(1-x.topK/x.experts, tokens))
	// A GPU's share of the routed token-expert pairs: all of them on its
	// slices, or those of its whole experts.
	pairs := tokens * x.topK
	if x.ep {
		pairs *= x.perGPU / x.experts
	}
	t := s.routedExperts(T, pairs, touched, x.experts, x.expertW, x.hidden)
	if x.group > 1 && x.ranks > 1 {
		moved := tokens // gather every rank's tokens, reduce-scatter back
		if x.ep {
			moved = T * math.Min(x.topK, x.group) // to the GPUs of its experts and back
		}
		n := moved * x.hidden * bytesBF16
		if x.cross > 0 {
			// Across domains the NVLink share and the network share
			// go at once; the slower sets the time (DeepEP's
			// internode kernels are bound by RDMA).
			t += 2 * (x.netLatency + math.Max(n*(x.domain-1)/x.group/x.bandwidth, n*x.cross/x.netBW))
		} else {
			t += 2 * (x.latency + n*(x.group-1)/x.group/x.bandwidth)
		}
	}
	return x.frac * t
}

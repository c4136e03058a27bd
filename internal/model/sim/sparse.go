package sim

import (
	"strings"

	"github.com/servetune/servetune/internal/serving/engine"
)

// DeepSeek Sparse Attention (catalog.Model.Sparse: DeepSeek-V3.2,
// GLM-5): MLA whose every query attends to the index_topk cached tokens
// a lightning indexer picks for it.
//
// Memory. Each token caches its latent as MLA does and its indexer key,
// 132 bytes in FP8 with its scale (catalog.Model.KVBytesPerLayerToken);
// an FP8 KV cache is vLLM's fp8_ds_mla record. vLLM takes "auto" as
// BF16 (DeepseekV32ForCausalLM in vllm/model_executor/models/config.py
// maps bfloat16 to auto and fp8 to fp8_ds_mla); SGLang picks FP8 on
// Blackwell and BF16 on Hopper (server_args.py,
// _handle_model_specific_adjustments: kv_cache_dtype "fp8_e4m3" if the
// compute capability is 10 or more). Both page the cache in blocks of 64
// tokens (FlashMLASparseBackend's kernel block size; SGLang's page_size
// 64 for NSA).
//
// Time. The indexer projects the query latent and the hidden state
// (replicated on every tensor-parallel rank: ReplicatedLinear wq_b,
// wk_weights_proj with disable_tp in vLLM's deepseek_v2.py Indexer),
// scores every cached token against index_n_heads heads of
// index_head_dim in FP8 (DeepGEMM's fp8_mqa_logits over a prefill,
// fp8_paged_mqa_logits in decode: 2·heads·dim FLOPs a token pair,
// reading each cached indexer key), writes the float32 scores and
// reads them for the top-k. Attention then runs over at most index_topk
// keys a query, as the sparse MLA kernels gather them (FlashMLA's
// flash_mla_sparse_fwd and flash_mla_with_kvcache): vLLM in the
// absorbed form for prompts too, 2·(kv_lora_rank + qk_rope_head_dim +
// kv_lora_rank) FLOPs per head and query-key pair; SGLang's prompts up
// to index_topk tokens as dense unabsorbed attention
// (SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD, the top-k), which the
// step model takes for all its prompts. The engines' other DSA settings
// (SGLang's DP attention and context parallelism for it) are not
// modelled.

// sparseBlockSize is the KV block both engines use for sparse MLA.
const sparseBlockSize = 64

// preHopper says whether g is an NVIDIA GPU before Hopper, where
// FlashMLA's sparse kernels do not run.
func preHopper(gpu string) bool {
	for _, p := range []string{"A100", "A10G", "L4"} {
		if strings.HasPrefix(gpu, p) {
			return true
		}
	}
	return false
}

// checkSparse refuses DeepSeek Sparse Attention on GPUs the engines do
// not run it on, and sets its block size where the user gave none.
func (c *Config) checkSparse() error {
	if c.Model.Sparse == nil {
		return nil
	}
	if preHopper(c.GPU.ID) {
		cc := computeCapability(c.GPU.ID) // major·10 + minor, as torch reports it
		return bad("%s requires Hopper (9.0+) or Blackwell (10.0+) for the FLASHMLA_SPARSE backend. Current device has compute capability %s.%s.",
			c.Model.ID, cc[:len(cc)-1], cc[len(cc)-1:])
	}
	if c.BlockSize == 0 {
		c.BlockSize = sparseBlockSize
	}
	return nil
}

// sparseKVFP8 says whether the engine takes "auto" as an FP8 KV cache
// for DeepSeek Sparse Attention: SGLang on Blackwell.
func (c *Config) sparseKVFP8() bool {
	return c.Model.Sparse != nil && c.Engine == engine.SGLang && (c.KVCacheDType == "" || c.KVCacheDType == "auto") &&
		c.GPU.HasFP4() && strings.HasPrefix(c.GPU.Name, "NVIDIA")
}

// sparseStep is the step model's share for the indexer.
type sparseStep struct {
	flopsPerPair float64 // indexer FLOPs a query and cached token: 2·heads·dim
	keyBytes     float64 // a cached indexer key with its scale
	rate         float64 // FP8 FLOP/s of the indexer's logits
}

// setSparse fits s to cfg's sparse attention: the indexer's projections
// among the linears (whole on every rank), its scoring (sparseStep), and
// the attention's keys capped at index_topk a query (as a window of
// index_topk over every layer: hybrid.go, attention).
func (s *stepModel) setSparse(cfg Config, k Constants) {
	m := cfg.Model
	sp, a := m.Sparse, m.MLA
	if sp == nil || a == nil {
		return
	}
	h := s.hidden
	nh, d := float64(sp.IndexHeads), float64(sp.IndexHeadDim)
	in := float64(a.QLoRARank)
	if in == 0 {
		in = h
	}
	s.gemms = append(s.gemms, linear(in*nh*d, in, nh*d), linear(h*(d+nh), h, d+nh))
	rate := cfg.GPU.FP8TFLOPS * 1e12 * k.FP8GEMMEfficiency
	if rate == 0 {
		rate = s.attnRate
	}
	s.sp = &sparseStep{flopsPerPair: 2 * nh * d, keyBytes: sp.IndexKeyBytes(), rate: rate}
	s.fullFrac, s.spans = 0, append(s.spans, attnSpan{frac: 1, span: float64(sp.TopK)})
	if cfg.Engine == engine.VLLM { // absorbed: the latent's keys and values
		s.prefillPairFlops = 2 * float64(2*a.KVLoRARank+a.QKRopeHeadDim)
	}
	// The latent as cached: an FP8 record is 656 bytes, not 576.
	s.kvElem = (m.KVBytesPerLayerToken(cfg.kvBytesPerElem()) - sp.IndexKeyBytes()) / float64(a.KVLoRARank+a.QKRopeHeadDim)
}

// seconds is one layer's indexer scoring in a step: every decoding
// query against its context (each reading the keys it scores), every
// prompt token against the tokens before it (the chunk's keys read
// once), each score written and read for the top-k.
func (x *sparseStep) seconds(s *stepModel, b batchShape) float64 {
	decode := b.decodeCtx + b.verifyCtx
	pairs := decode + b.prefillPairs
	if pairs == 0 {
		return 0
	}
	bytes := (decode+b.prefillKV)*x.keyBytes + pairs*2*4
	return roofline(pairs*x.flopsPerPair, x.rate, bytes, s.bw)
}

package catalog

import (
	"fmt"
	"strings"
)

// Model is the shape of a decoder-only transformer, as its config.json
// states it. Experts is 0 for dense models; for MoE models Intermediate is
// the per-expert MLP size.
type Model struct {
	ID             string   `json:"id"` // Hugging Face id
	Aliases        []string `json:"aliases,omitempty"`
	Layers         int      `json:"num_hidden_layers"`
	Hidden         int      `json:"hidden_size"`
	Heads          int      `json:"num_attention_heads"`
	KVHeads        int      `json:"num_key_value_heads"`
	HeadDim        int      `json:"head_dim"`
	Intermediate   int      `json:"intermediate_size"` // dense MLP, or per expert for MoE
	Vocab          int      `json:"vocab_size"`
	TiedEmbeddings bool     `json:"tie_word_embeddings"`
	Experts        int      `json:"num_experts,omitempty"`
	ExpertsPerTok  int      `json:"num_experts_per_tok,omitempty"`
	MaxPosition    int      `json:"max_position_embeddings"`
	DType          string   `json:"torch_dtype"` // checkpoint dtype, e.g. bfloat16
	// Quantization is the checkpoint's weight quantization when the id or the
	// config says so (fp8, awq, gptq); empty for 16-bit checkpoints.
	Quantization string `json:"quantization,omitempty"`
	// WeightBits, when set, is the checkpoint's own bits per quantized
	// weight with its scales (compressed-tensors W4A16: 4 + 16/group_size),
	// and QuantExpertsOnly says its ignore list keeps all but the routed
	// experts in 16 bits (Kimi-K2.5); QuantBits reads them.
	WeightBits       float64 `json:"weight_bits,omitempty"`
	QuantExpertsOnly bool    `json:"quant_experts_only,omitempty"`
	// WeightBlock is the side of the square blocks of weights that share
	// one FP8 scale (quantization_config.weight_block_size; DeepSeek-V3's
	// checkpoint: 128); 0 for per-tensor or per-channel scales.
	WeightBlock int `json:"weight_block_size,omitempty"`

	// SharedIntermediate is the MLP size of the always-active shared
	// experts of an MoE layer, all of them together (DeepSeek:
	// n_shared_experts*moe_intermediate_size; Qwen2-MoE:
	// shared_expert_intermediate_size); 0 when there are none.
	SharedIntermediate int `json:"shared_intermediate_size,omitempty"`
	// DenseLayers leading layers of an MoE model have a dense MLP of
	// DenseIntermediate instead of experts (DeepSeek's first_k_dense_replace).
	DenseLayers       int `json:"first_k_dense_replace,omitempty"`
	DenseIntermediate int `json:"dense_intermediate_size,omitempty"`
	// MLA is multi-head latent attention's shape (DeepSeek-V2/V3); nil for
	// grouped-query attention.
	MLA *MLA `json:"mla,omitempty"`
	// SlidingLayers of the Layers attend to the last SlidingWindow tokens
	// only (layer_types "sliding_attention"; gpt-oss: 18 of 36, window
	// 128), and ChunkedLayers to the tokens of their own
	// AttentionChunk-token chunk (Llama-4: 36 of 48, 8192): their KV
	// cache stops growing there (layers.go, KVSpans).
	SlidingWindow  int `json:"sliding_window,omitempty"`
	SlidingLayers  int `json:"sliding_layers,omitempty"`
	AttentionChunk int `json:"attention_chunk_size,omitempty"`
	ChunkedLayers  int `json:"chunked_layers,omitempty"`
	// AttentionSinks: each head adds a learned logit to its softmax's
	// denominator (gpt-oss); no KV, a term per head.
	AttentionSinks bool `json:"attention_sinks,omitempty"`
	// Linear is the shape of the linear-attention (Gated DeltaNet) layers
	// of a hybrid model (Qwen3-Next, Qwen3.5: three of every four
	// layers), each holding a constant state per request instead of a KV
	// cache (linear.go); nil when every layer is attention.
	Linear *LinearAttention `json:"linear_attention,omitempty"`
	// AttnOutputGate: the attention layers' query projection is twice
	// as wide, its second half a sigmoid gate on each head's output
	// (Qwen3-Next's gated attention).
	AttnOutputGate bool `json:"attn_output_gate,omitempty"`
	// Sparse is DeepSeek Sparse Attention's indexer (DeepSeek-V3.2,
	// GLM-5: MLA over the index_topk tokens an FP8 indexer picks,
	// sparse.go); nil for dense attention.
	Sparse *SparseAttention `json:"sparse_attention,omitempty"`
	// QKNormAllHeads: the query and key RMSNorms span every head of the
	// layer (MiniMax-M2's qk_norm_type "per_layer"), so tensor
	// parallelism all-reduces their per-token variances in every layer.
	QKNormAllHeads bool `json:"qk_norm_all_heads,omitempty"`
	// RouterFP32: the MoE router's gate runs in float32, its weights and
	// its input cast up (MiniMax-M2: both engines' minimax_m2.py create
	// the gate with params_dtype float32 and call it on
	// hidden_states.to(torch.float32)).
	RouterFP32 bool `json:"router_fp32,omitempty"`
	// Unmodelled names the config.json fields, with their values, that
	// change the model's cost in a way the simulated engine does not model
	// (the step time and KV cache of sim); Simulable refuses them.
	Unmodelled []string `json:"unmodelled,omitempty"`
	// Generation is the sampling a request that sets none gets: the
	// model's generation_config.json defaults (sampling.go); nil for
	// the OpenAI API's (temperature 1, no top-p or top-k).
	Generation *Sampling `json:"generation_defaults,omitempty"`
}

// MLA is the shape of multi-head latent attention, as config.json states it.
// QLoRARank is 0 when queries are not compressed (DeepSeek-V2-Lite).
type MLA struct {
	KVLoRARank    int `json:"kv_lora_rank"`
	QLoRARank     int `json:"q_lora_rank,omitempty"`
	QKRopeHeadDim int `json:"qk_rope_head_dim"`
	QKNopeHeadDim int `json:"qk_nope_head_dim"`
	VHeadDim      int `json:"v_head_dim"`
}

// MoE reports whether the model has routed experts.
func (m Model) MoE() bool { return m.Experts > 0 }

// AttentionParams is the parameter count of one attention layer's
// projections: h*d*(q + 2kv) for QKV plus q*d*h for the output, the
// query twice as wide with an output gate. MLA's are the query down- and
// up-projections (or one projection without q_lora_rank), the joint KV
// down-projection with the shared rotary key, the KV up-projection and
// the output (DeepSeek-V2 paper, section 2.1), and sparse attention's
// indexer. A hybrid's linear-attention layers have their own
// (LinearAttention.Params).
func (m Model) AttentionParams() float64 {
	h, d := float64(m.Hidden), float64(m.HeadDim)
	if a := m.MLA; a != nil {
		heads := float64(m.Heads)
		qk := float64(a.QKNopeHeadDim + a.QKRopeHeadDim)
		q := h * heads * qk
		if a.QLoRARank > 0 {
			q = h*float64(a.QLoRARank) + float64(a.QLoRARank)*heads*qk
		}
		kvDown := h * float64(a.KVLoRARank+a.QKRopeHeadDim)
		kvUp := float64(a.KVLoRARank) * heads * float64(a.QKNopeHeadDim+a.VHeadDim)
		p := q + kvDown + kvUp + heads*float64(a.VHeadDim)*h
		if s := m.Sparse; s != nil {
			p += s.IndexerParams(m.Hidden, a.QLoRARank)
		}
		return p
	}
	q := float64(m.Heads)
	if m.AttnOutputGate {
		q *= 2
	}
	return h*d*(q+2*float64(m.KVHeads)) + float64(m.Heads)*d*h
}

// AttentionLayers is the number of attention layers (all but a hybrid's
// linear-attention layers).
func (m Model) AttentionLayers() int {
	if m.Linear == nil {
		return m.Layers
	}
	return m.Layers - m.Linear.Layers
}

// mixerParams is the parameter count of every layer's token mixer: the
// attention layers' projections and the linear-attention layers'.
func (m Model) mixerParams() float64 {
	p := float64(m.AttentionLayers()) * m.AttentionParams()
	if a := m.Linear; a != nil {
		p += float64(a.Layers) * a.Params(m.Hidden)
	}
	return p
}

// MLPParams is the parameter count of one MoE or dense layer's SwiGLU MLP:
// 3*h*I, or for MoE 3*h*I per expert times the experts plus the h*E router
// and the shared experts. LinearParams counts the leading dense layers of
// an MoE model too.
func (m Model) MLPParams() float64 {
	h := float64(m.Hidden)
	per := 3 * h * float64(m.Intermediate)
	if m.MoE() {
		return per*float64(m.Experts) + h*float64(m.Experts) + 3*h*float64(m.SharedIntermediate)
	}
	return per
}

// moeLayers is the number of layers with experts.
func (m Model) moeLayers() float64 {
	if !m.MoE() {
		return 0
	}
	return float64(m.Layers - m.DenseLayers)
}

// MoEShare is the share of the layers that have experts: 0 for a dense
// model.
func (m Model) MoEShare() float64 {
	if m.Layers == 0 {
		return 0
	}
	return m.moeLayers() / float64(m.Layers)
}

// LinearParams is the parameter count of all layers' linear weights
// (attention and MLP), the weights that quantization shrinks.
func (m Model) LinearParams() float64 {
	if !m.MoE() {
		return m.mixerParams() + float64(m.Layers)*m.MLPParams()
	}
	dense := float64(m.DenseLayers) * 3 * float64(m.Hidden) * float64(m.DenseIntermediate)
	return m.mixerParams() + m.moeLayers()*m.MLPParams() + dense
}

// RoutedParams is the parameter count of every layer's routed experts,
// the weights expert parallelism spreads; 0 for dense models.
func (m Model) RoutedParams() float64 {
	return m.moeLayers() * float64(m.Experts) * m.ExpertParams()
}

// ExpertParams is the parameter count of one expert (3*h*I); 0 for dense models.
func (m Model) ExpertParams() float64 {
	if !m.MoE() {
		return 0
	}
	return 3 * float64(m.Hidden) * float64(m.Intermediate)
}

// EmbeddingParams counts the input embedding and, unless tied, the LM head.
func (m Model) EmbeddingParams() float64 {
	e := float64(m.Vocab) * float64(m.Hidden)
	if m.TiedEmbeddings {
		return e
	}
	return 2 * e
}

// Params is the total parameter count (norms are negligible and left out).
func (m Model) Params() float64 {
	return m.LinearParams() + m.EmbeddingParams()
}

// ActiveParams is the parameter count one token touches: all of a dense
// model, the top-k experts of an MoE one.
func (m Model) ActiveParams() float64 {
	if !m.MoE() {
		return m.Params()
	}
	h := float64(m.Hidden)
	mlp := float64(m.ExpertsPerTok)*m.ExpertParams() + h*float64(m.Experts) + 3*h*float64(m.SharedIntermediate)
	dense := float64(m.DenseLayers) * 3 * h * float64(m.DenseIntermediate)
	return m.mixerParams() + m.moeLayers()*mlp + dense + m.EmbeddingParams()
}

// KVBytesPerToken is the KV cache of one token over the layers whose
// cache grows with the sequence (FullLayers), 2*L*kv*d elements of
// elemBytes each (2 for bf16, 1 for fp8). MLA caches the compressed
// latent and the rotary key instead: L*(kv_lora_rank + qk_rope_head_dim)
// elements. The layers whose cache stops growing are KVSpans', and a
// hybrid's linear-attention layers hold a state per request instead.
func (m Model) KVBytesPerToken(elemBytes float64) float64 {
	return float64(m.FullLayers()) * m.KVBytesPerLayerToken(elemBytes)
}

// KVBytesPerLayerToken is one token's KV cache in one attention layer.
// Sparse attention caches the latent and the token's indexer key
// (SparseAttention.IndexKeyBytes); its FP8 latent is vLLM's fp8_ds_mla
// record (kv_lora_rank FP8 values, a float32 scale per 128 of them and
// the rotary key in BF16: 656 bytes for DeepSeek-V3.2, FlashMLASparse in
// vllm/v1/attention/backends/mla/flashmla_sparse.py; SGLang's NSA pool
// the same, calculate_mla_kv_cache_dim).
func (m Model) KVBytesPerLayerToken(elemBytes float64) float64 {
	if a := m.MLA; a != nil {
		latent := float64(a.KVLoRARank+a.QKRopeHeadDim) * elemBytes
		if s := m.Sparse; s != nil {
			if elemBytes == 1 {
				latent = float64(a.KVLoRARank + a.KVLoRARank/indexQuantBlock*4 + 2*a.QKRopeHeadDim)
			}
			latent += s.IndexKeyBytes()
		}
		return latent
	}
	return 2 * float64(m.KVHeads) * float64(m.HeadDim) * elemBytes
}

// Simulable says whether the simulated engine can cost the model; the
// error names each config.json field it cannot (Unmodelled).
func (m Model) Simulable() error {
	if len(m.Unmodelled) == 0 {
		return nil
	}
	return fmt.Errorf("model %q (%.1fB parameters): the simulated engine does not model %s",
		m.ID, m.Params()/1e9, strings.Join(m.Unmodelled, ", "))
}

// Validate checks that the shape is usable; the error names the first bad field.
func (m Model) Validate() error {
	checks := []struct {
		name string
		v    int
	}{
		{"num_hidden_layers", m.Layers}, {"hidden_size", m.Hidden}, {"num_attention_heads", m.Heads},
		{"num_key_value_heads", m.KVHeads}, {"head_dim", m.HeadDim}, {"intermediate_size", m.Intermediate},
		{"vocab_size", m.Vocab},
	}
	for _, c := range checks {
		if c.v <= 0 {
			return fmt.Errorf("model %q: %s must be positive, got %d", m.ID, c.name, c.v)
		}
	}
	if m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("model %q: num_attention_heads %d is not a multiple of num_key_value_heads %d", m.ID, m.Heads, m.KVHeads)
	}
	if m.MoE() && (m.ExpertsPerTok <= 0 || m.ExpertsPerTok > m.Experts) {
		return fmt.Errorf("model %q: num_experts_per_tok %d must be in [1, %d]", m.ID, m.ExpertsPerTok, m.Experts)
	}
	if m.SharedIntermediate < 0 {
		return fmt.Errorf("model %q: shared experts' intermediate size must not be negative, got %d", m.ID, m.SharedIntermediate)
	}
	if m.DenseLayers < 0 || m.DenseLayers > m.Layers || (m.MoE() && m.DenseLayers == m.Layers) {
		return fmt.Errorf("model %q: first_k_dense_replace %d must be in [0, %d)", m.ID, m.DenseLayers, m.Layers)
	}
	if m.DenseLayers > 0 && m.DenseIntermediate <= 0 {
		return fmt.Errorf("model %q: intermediate_size must be positive for the first_k_dense_replace layers, got %d", m.ID, m.DenseIntermediate)
	}
	if err := m.validateLayerKinds(); err != nil {
		return err
	}
	if s := m.Sparse; s != nil {
		if err := s.validate(m.ID); err != nil {
			return err
		}
	}
	if a := m.MLA; a != nil {
		for _, c := range []struct {
			name string
			v    int
		}{{"kv_lora_rank", a.KVLoRARank}, {"qk_rope_head_dim", a.QKRopeHeadDim}, {"qk_nope_head_dim", a.QKNopeHeadDim}, {"v_head_dim", a.VHeadDim}} {
			if c.v <= 0 {
				return fmt.Errorf("model %q: %s must be positive, got %d", m.ID, c.name, c.v)
			}
		}
		if a.QLoRARank < 0 {
			return fmt.Errorf("model %q: q_lora_rank must not be negative, got %d", m.ID, a.QLoRARank)
		}
	}
	return nil
}

// models is the built-in table of docs/reference.md (Models) (shapes from each
// model's published config.json). Qwen3-32B is added for the memory facts of
// docs/reference.md (Engines).
var models = []Model{
	{ID: "meta-llama/Llama-3.1-8B-Instruct", Aliases: []string{"llama-3.1-8b", "llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B", "llama-3-8b", "meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct"},
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 128256, MaxPosition: 131072, DType: "bfloat16", Generation: llama3Generation},
	{ID: "meta-llama/Llama-3.1-70B-Instruct", Aliases: []string{"llama-3.1-70b", "llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B-Instruct"},
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 28672, Vocab: 128256, MaxPosition: 131072, DType: "bfloat16", Generation: llama3Generation},
	{ID: "meta-llama/Llama-3.3-70B-Instruct", Aliases: []string{"llama-3.3-70b", "llama-3.3-70b-instruct"},
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 28672, Vocab: 128256, MaxPosition: 131072, DType: "bfloat16", Generation: llama3Generation},
	{ID: "Qwen/Qwen2.5-7B-Instruct", Aliases: []string{"qwen2.5-7b", "qwen2.5-7b-instruct"},
		Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128, Intermediate: 18944, Vocab: 152064, MaxPosition: 32768, DType: "bfloat16"},
	{ID: "Qwen/Qwen2.5-32B-Instruct", Aliases: []string{"qwen2.5-32b", "qwen2.5-32b-instruct"},
		Layers: 64, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Intermediate: 27648, Vocab: 152064, MaxPosition: 32768, DType: "bfloat16"},
	{ID: "Qwen/Qwen2.5-72B-Instruct", Aliases: []string{"qwen2.5-72b", "qwen2.5-72b-instruct"},
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 29568, Vocab: 152064, MaxPosition: 32768, DType: "bfloat16"},
	{ID: "Qwen/Qwen3-32B", Aliases: []string{"qwen3-32b"},
		Layers: 64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 25600, Vocab: 151936, MaxPosition: 40960, DType: "bfloat16", Generation: qwen3Generation},
	{ID: "mistralai/Mistral-7B-Instruct-v0.3", Aliases: []string{"mistral-7b", "mistral-7b-instruct"},
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 32768, MaxPosition: 32768, DType: "bfloat16"},
	{ID: "mistralai/Mixtral-8x7B-Instruct-v0.1", Aliases: []string{"mixtral-8x7b", "mixtral-8x7b-instruct"},
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 32000, MaxPosition: 32768, DType: "bfloat16",
		Experts: 8, ExpertsPerTok: 2},
	{ID: "Qwen/Qwen3-30B-A3B", Aliases: []string{"qwen3-30b-a3b"},
		Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Intermediate: 768, Vocab: 151936, MaxPosition: 40960, DType: "bfloat16", Generation: qwen3Generation,
		Experts: 128, ExpertsPerTok: 8},
	// The MoE models of docs/reference.md (Mixture of experts).
	{ID: "Qwen/Qwen3-235B-A22B", Aliases: []string{"qwen3-235b-a22b"},
		Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, Intermediate: 1536, Vocab: 151936, MaxPosition: 40960, DType: "bfloat16", Generation: qwen3Generation,
		Experts: 128, ExpertsPerTok: 8},
	{ID: "mistralai/Mixtral-8x22B-Instruct-v0.1", Aliases: []string{"mixtral-8x22b", "mixtral-8x22b-instruct"},
		Layers: 56, Hidden: 6144, Heads: 48, KVHeads: 8, HeadDim: 128, Intermediate: 16384, Vocab: 32768, MaxPosition: 65536, DType: "bfloat16",
		Experts: 8, ExpertsPerTok: 2},
	// DeepSeek-V3's checkpoint is FP8 (block-scaled e4m3): it is served as is.
	{ID: "deepseek-ai/DeepSeek-V3", Aliases: []string{"deepseek-v3", "deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-R1", "deepseek-r1"},
		Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, HeadDim: 192, Intermediate: 2048, Vocab: 129280, MaxPosition: 163840, DType: "bfloat16",
		Quantization: "fp8", WeightBlock: 128, Experts: 256, ExpertsPerTok: 8, SharedIntermediate: 2048, DenseLayers: 3, DenseIntermediate: 18432,
		MLA: &MLA{KVLoRARank: 512, QLoRARank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}},
	// gpt-oss: MXFP4 routed experts, BF16 elsewhere; sliding-window
	// attention (128 tokens) in every other layer, attention sinks.
	{ID: "openai/gpt-oss-120b", Aliases: []string{"gpt-oss-120b"},
		Layers: 36, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Intermediate: 2880, Vocab: 201088, MaxPosition: 131072, DType: "bfloat16",
		Quantization: "mxfp4", Experts: 128, ExpertsPerTok: 4, SlidingWindow: 128, SlidingLayers: 18, AttentionSinks: true},
	{ID: "openai/gpt-oss-20b", Aliases: []string{"gpt-oss-20b"},
		Layers: 24, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Intermediate: 2880, Vocab: 201088, MaxPosition: 131072, DType: "bfloat16",
		Quantization: "mxfp4", Experts: 32, ExpertsPerTok: 4, SlidingWindow: 128, SlidingLayers: 12, AttentionSinks: true},
	// MiniMax-M2.5: FP8 checkpoint (block-scaled e4m3, 128x128), 256
	// experts top 8 and no shared expert, full attention in every layer.
	{ID: "MiniMaxAI/MiniMax-M2.5", Aliases: []string{"minimax-m2.5", "MiniMaxAI/MiniMax-M2"},
		Layers: 62, Hidden: 3072, Heads: 48, KVHeads: 8, HeadDim: 128, Intermediate: 1536, Vocab: 200064, MaxPosition: 196608, DType: "bfloat16",
		Quantization: "fp8", WeightBlock: 128, Experts: 256, ExpertsPerTok: 8, QKNormAllHeads: true, RouterFP32: true},
	// Kimi-K2: DeepSeek-V3's architecture (MLA, FP8 128-blocks) with 384
	// experts, 64 heads and one leading dense layer.
	{ID: "moonshotai/Kimi-K2-Instruct", Aliases: []string{"kimi-k2", "kimi-k2-instruct", "moonshotai/Kimi-K2-Instruct-0905"},
		Layers: 61, Hidden: 7168, Heads: 64, KVHeads: 64, HeadDim: 192, Intermediate: 2048, Vocab: 163840, MaxPosition: 131072, DType: "bfloat16",
		Quantization: "fp8", WeightBlock: 128, Experts: 384, ExpertsPerTok: 8, SharedIntermediate: 2048, DenseLayers: 1, DenseIntermediate: 18432,
		MLA: &MLA{KVLoRARank: 512, QLoRARank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}},
	// Kimi-K2.5: Kimi-K2's language model, its routed experts INT4
	// weight-only (compressed-tensors W4A16, group 32 with BF16 scales),
	// everything else BF16.
	{ID: "moonshotai/Kimi-K2.5", Aliases: []string{"kimi-k2.5"},
		Layers: 61, Hidden: 7168, Heads: 64, KVHeads: 64, HeadDim: 192, Intermediate: 2048, Vocab: 163840, MaxPosition: 262144, DType: "bfloat16",
		Quantization: "compressed-tensors", WeightBits: 4.5, QuantExpertsOnly: true, Experts: 384, ExpertsPerTok: 8, SharedIntermediate: 2048, DenseLayers: 1, DenseIntermediate: 18432,
		MLA: &MLA{KVLoRARank: 512, QLoRARank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}},
	// Llama-4 (llama4.go): chunked local attention (8192) in the 36 RoPE
	// layers, global in the 12 NoPE ones; one shared expert beside the
	// routed ones; Maverick's odd layers are dense (intermediate_size_mlp).
	{ID: "meta-llama/Llama-4-Scout-17B-16E-Instruct", Aliases: []string{"llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E"},
		Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Intermediate: 8192, Vocab: 202048, MaxPosition: 10485760, DType: "bfloat16",
		Experts: 16, ExpertsPerTok: 1, SharedIntermediate: 8192, AttentionChunk: 8192, ChunkedLayers: 36},
	{ID: "meta-llama/Llama-4-Maverick-17B-128E-Instruct", Aliases: []string{"llama-4-maverick", "meta-llama/Llama-4-Maverick-17B-128E"},
		Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Intermediate: 8192, Vocab: 202048, MaxPosition: 1048576, DType: "bfloat16",
		Experts: 128, ExpertsPerTok: 1, SharedIntermediate: 8192, DenseLayers: 24, DenseIntermediate: 16384, AttentionChunk: 8192, ChunkedLayers: 36},
	// Qwen3-Next and Qwen3.5 (linear.go): Gated DeltaNet in three of every
	// four layers, gated full attention (two KV heads of 256) in the
	// fourth; 512 experts top 10 and a shared expert as wide.
	{ID: "Qwen/Qwen3-Next-80B-A3B-Instruct", Aliases: []string{"qwen3-next-80b-a3b", "qwen3-next-80b-a3b-instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking"},
		Layers: 48, Hidden: 2048, Heads: 16, KVHeads: 2, HeadDim: 256, Intermediate: 512, Vocab: 151936, MaxPosition: 262144, DType: "bfloat16",
		Experts: 512, ExpertsPerTok: 10, SharedIntermediate: 512, AttnOutputGate: true,
		Linear: &LinearAttention{Layers: 36, KeyHeads: 16, ValueHeads: 32, KeyHeadDim: 128, ValueHeadDim: 128, ConvKernel: 4}},
	{ID: "Qwen/Qwen3.5-397B-A17B", Aliases: []string{"qwen3.5-397b-a17b"},
		Layers: 60, Hidden: 4096, Heads: 32, KVHeads: 2, HeadDim: 256, Intermediate: 1024, Vocab: 248320, MaxPosition: 262144, DType: "bfloat16",
		Experts: 512, ExpertsPerTok: 10, SharedIntermediate: 1024, AttnOutputGate: true,
		Linear: &LinearAttention{Layers: 45, KeyHeads: 16, ValueHeads: 64, KeyHeadDim: 128, ValueHeadDim: 128, ConvKernel: 4}},
	// DeepSeek-V3.2 and GLM-5 (sparse.go): DeepSeek-V3's MLA and MoE
	// with an FP8 indexer in every layer that picks 2,048 tokens for
	// each query. DeepSeek-V3.2's checkpoint is FP8 (128-blocks), GLM-5's
	// BF16.
	{ID: "deepseek-ai/DeepSeek-V3.2", Aliases: []string{"deepseek-v3.2", "deepseek-ai/DeepSeek-V3.2-Exp"},
		Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, HeadDim: 192, Intermediate: 2048, Vocab: 129280, MaxPosition: 163840, DType: "bfloat16",
		Quantization: "fp8", WeightBlock: 128, Experts: 256, ExpertsPerTok: 8, SharedIntermediate: 2048, DenseLayers: 3, DenseIntermediate: 18432,
		MLA:    &MLA{KVLoRARank: 512, QLoRARank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128},
		Sparse: &SparseAttention{TopK: 2048, IndexHeads: 64, IndexHeadDim: 128}},
	{ID: "zai-org/GLM-5", Aliases: []string{"glm-5", "zai-org/GLM-5.1"},
		Layers: 78, Hidden: 6144, Heads: 64, KVHeads: 64, HeadDim: 256, Intermediate: 2048, Vocab: 154880, MaxPosition: 202752, DType: "bfloat16",
		Experts: 256, ExpertsPerTok: 8, SharedIntermediate: 2048, DenseLayers: 3, DenseIntermediate: 12288,
		MLA:    &MLA{KVLoRARank: 512, QLoRARank: 2048, QKRopeHeadDim: 64, QKNopeHeadDim: 192, VHeadDim: 256},
		Sparse: &SparseAttention{TopK: 2048, IndexHeads: 32, IndexHeadDim: 128}},
}

// clone returns m sharing no slice or pointer with it: lookups hand out
// copies of the table's entries.
func (m Model) clone() Model {
	m.Aliases = append([]string(nil), m.Aliases...)
	m.Unmodelled = append([]string(nil), m.Unmodelled...)
	m.Generation = cloned(m.Generation)
	m.MLA = cloned(m.MLA)
	m.Linear = cloned(m.Linear)
	m.Sparse = cloned(m.Sparse)
	return m
}

// cloned is a copy of *p of its own; nil for nil.
func cloned[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// quantSuffixes are checkpoint-name suffixes that imply weight quantization,
// longest first so "-FP8-dynamic" wins over "-FP8".
var quantSuffixes = []struct{ suffix, quant string }{
	{"-fp8-dynamic", "fp8"}, {"-fp8", "fp8"}, {"-awq", "awq"}, {"-gptq-int4", "gptq"}, {"-gptq", "gptq"}, {"-w4a16", "gptq"},
}

// Models returns the built-in model table.
func Models() []Model {
	out := make([]Model, len(models))
	for i, m := range models {
		out[i] = m.clone()
	}
	return out
}

// LookupModel returns the model with the given Hugging Face id or alias
// (case-insensitive; an organisation prefix of a quantizing publisher is
// ignored). An id ending in -FP8, -AWQ or -GPTQ names the base model with
// that weight quantization, e.g. "meta-llama/Llama-3.3-70B-Instruct-FP8".
func LookupModel(id string) (Model, error) {
	key := strings.ToLower(strings.TrimSpace(id))
	quant := ""
	for _, s := range quantSuffixes {
		if strings.HasSuffix(key, s.suffix) {
			key, quant = strings.TrimSuffix(key, s.suffix), s.quant
			break
		}
	}
	match := func(k string) (Model, bool) {
		for _, m := range models {
			if strings.ToLower(m.ID) == k {
				return m, true
			}
			for _, a := range m.Aliases {
				if strings.ToLower(a) == k {
					return m, true
				}
			}
		}
		return Model{}, false
	}
	m, ok := match(key)
	if !ok {
		// Quantized re-uploads live under other organisations
		// (RedHatAI/Llama-3.3-70B-Instruct-FP8): match on the name alone.
		if i := strings.LastIndex(key, "/"); i >= 0 {
			name := key[i+1:]
			for _, cand := range models {
				if j := strings.LastIndex(strings.ToLower(cand.ID), "/"); strings.ToLower(cand.ID)[j+1:] == name {
					m, ok = cand, true
					break
				}
			}
		}
	}
	if !ok {
		return Model{}, fmt.Errorf("model %q: %w (use a known id or alias, or --model-config config.json)", id, ErrUnknown)
	}
	m = m.clone()
	if quant != "" {
		m.ID = strings.TrimSpace(id)
		m.Quantization = quant
		if quant == "fp8" && strings.HasPrefix(key, "qwen/") {
			// The Qwen organisation's own FP8 checkpoints are block-scaled
			// (quantization_config.weight_block_size [128, 128], as
			// internal/model/sim/testdata/fidelity/qwen3-14b-fp8.config.json
			// has it; vLLM issue #17569: Qwen3-235B-A22B-FP8's "block_n =
			// 128"), where re-uploads under other organisations (RedHatAI,
			// neuralmagic) are per-channel.
			m.WeightBlock = 128
		}
	}
	return m, nil
}

package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hfConfig is the subset of a Hugging Face config.json the simulator needs.
// Pointers tell "absent" from zero so defaults apply only to absent fields.
type hfConfig struct {
	Layers          *int  `json:"num_hidden_layers"`
	Hidden          *int  `json:"hidden_size"`
	Heads           *int  `json:"num_attention_heads"`
	KVHeads         *int  `json:"num_key_value_heads"`
	HeadDim         *int  `json:"head_dim"`
	Intermediate    *int  `json:"intermediate_size"`
	MoEIntermediate *int  `json:"moe_intermediate_size"`
	Vocab           *int  `json:"vocab_size"`
	Tied            *bool `json:"tie_word_embeddings"`
	LocalExperts    *int  `json:"num_local_experts"` // Mixtral
	Experts         *int  `json:"num_experts"`       // Qwen MoE
	RoutedExperts   *int  `json:"n_routed_experts"`  // DeepSeek
	ExpertsPerTok   *int  `json:"num_experts_per_tok"`
	ExpertsPerToken *int  `json:"experts_per_token"` // gpt-oss
	// Shared experts: DeepSeek's count of moe_intermediate_size MLPs,
	// Qwen2-MoE's one MLP of its own size.
	SharedExperts      *int  `json:"n_shared_experts"`
	SharedIntermediate *int  `json:"shared_expert_intermediate_size"`
	FirstKDense        *int  `json:"first_k_dense_replace"`
	MoELayerFreq       *int  `json:"moe_layer_freq"`      // DeepSeek: every n-th layer after the dense ones
	SparseStep         *int  `json:"decoder_sparse_step"` // Qwen MoE: the same
	MLPOnlyLayers      []int `json:"mlp_only_layers"`
	// Multi-head latent attention (DeepSeek-V2/V3).
	KVLoRARank    *int `json:"kv_lora_rank"`
	QLoRARank     *int `json:"q_lora_rank"`
	QKRopeHeadDim *int `json:"qk_rope_head_dim"`
	QKNopeHeadDim *int `json:"qk_nope_head_dim"`
	VHeadDim      *int `json:"v_head_dim"`
	// Attention over part of the context.
	SlidingWindow    *int     `json:"sliding_window"`
	UseSlidingWindow *bool    `json:"use_sliding_window"`
	LayerTypes       []string `json:"layer_types"`
	AttnTypeList     []int    `json:"attn_type_list"` // MiniMax: 1 full attention, 0 linear
	UseQKNorm        *bool    `json:"use_qk_norm"`
	QKNormType       string   `json:"qk_norm_type"` // MiniMax: "per_layer" spans every head
	Architectures    []string `json:"architectures"`
	MaxPosition      *int     `json:"max_position_embeddings"`
	DType            string   `json:"torch_dtype"`
	DTypeField       string   `json:"dtype"` // transformers 5's name for torch_dtype
	NameOrPath       string   `json:"_name_or_path"`
	Quant            *hfQuant `json:"quantization_config"`
	// Multimodal wrappers keep the language model's shape here.
	TextConfig *hfConfig `json:"text_config"`
	llama4Fields
	linearFields
	sparseFields
}

type hfQuant struct {
	Method      string `json:"quant_method"`
	WeightBlock []int  `json:"weight_block_size"`
	// compressed-tensors: the schemes by group, and the modules left
	// unquantized.
	ConfigGroups map[string]struct {
		Weights *struct {
			NumBits   int    `json:"num_bits"`
			Type      string `json:"type"`
			GroupSize int    `json:"group_size"`
		} `json:"weights"`
		InputActivations json.RawMessage `json:"input_activations"`
	} `json:"config_groups"`
	Ignore []string `json:"ignore"`
}

// compressedW4A16 reads a compressed-tensors scheme of integer weights
// without quantized activations (W4A16, pack-quantized) into m: its bits
// per weight with a 16-bit scale per group, and whether its ignore list
// keeps attention (and so everything but the routed experts: Kimi-K2.5)
// in 16 bits. It reports false for other schemes (W8A8 FP8 and the like).
func compressedW4A16(m *Model, q *hfQuant) bool {
	for _, g := range q.ConfigGroups {
		w := g.Weights
		act := strings.TrimSpace(string(g.InputActivations))
		if w == nil || w.Type != "int" || w.NumBits != 4 || w.GroupSize <= 0 || (act != "" && act != "null") {
			return false
		}
		m.WeightBits = float64(w.NumBits) + 16/float64(w.GroupSize)
	}
	if m.WeightBits == 0 {
		return false
	}
	for _, ig := range q.Ignore {
		m.QuantExpertsOnly = m.QuantExpertsOnly || strings.Contains(ig, "self_attn")
	}
	return true
}

// knownArchitectures are the architectures whose layers are the ones Model
// describes: grouped-query or latent attention and a SwiGLU (GeGLU for
// Gemma) MLP or routed experts, in every layer. A multimodal wrapper is not
// here: its vision tower's weights are not counted.
var knownArchitectures = map[string]bool{
	"LlamaForCausalLM": true, "MistralForCausalLM": true, "MixtralForCausalLM": true,
	"Qwen2ForCausalLM": true, "Qwen3ForCausalLM": true, "Qwen2MoeForCausalLM": true, "Qwen3MoeForCausalLM": true,
	"DeepseekV2ForCausalLM": true, "DeepseekV3ForCausalLM": true,
	"GemmaForCausalLM": true, "GraniteForCausalLM": true,
	// gpt-oss: GQA with attention sinks (a learned logit per head) and
	// biases, sliding-window attention in every other layer (layer_types).
	"GptOssForCausalLM": true,
	// Llama-4: chunked local and NoPE global attention, interleaved MoE
	// with a shared expert (llama4.go); its vision tower is under 1% of
	// the weights.
	"Llama4ForConditionalGeneration": true, "Llama4ForCausalLM": true,
	// Kimi-K2.5: Kimi-K2's language model (DeepSeek-V3's architecture)
	// in text_config; its vision tower (about 0.4B of 1T) is not counted.
	"KimiK25ForConditionalGeneration": true,
	// MiniMax-M2: GQA with per-layer QK norm and partial rotary in every
	// layer (attn_type_list all 1: full attention; 0, MiniMax-01's
	// lightning attention, is refused), routed experts without a shared one.
	"MiniMaxM2ForCausalLM": true,
	// Qwen3-Next and Qwen3.5: Gated DeltaNet linear attention in three of
	// four layers, gated full attention in the fourth (linear.go); 512
	// routed experts and a shared one. Qwen3.5's vision tower (about
	// 0.4B of 397B) is not counted.
	"Qwen3NextForCausalLM": true, "Qwen3_5MoeForConditionalGeneration": true, "Qwen3_5MoeForCausalLM": true,
	"Qwen3_5ForConditionalGeneration": true, "Qwen3_5ForCausalLM": true,
	// DeepSeek-V3.2 and GLM-5: DeepSeek-V3's layers (MLA, a shared
	// expert, leading dense layers) with DeepSeek Sparse Attention's
	// indexer in every layer (sparse.go).
	"DeepseekV32ForCausalLM": true, "GlmMoeDsaForCausalLM": true,
}

// hybridFields are config.json fields of models whose layers are not all
// attention and MLP (Mamba or linear-attention hybrids, chunked or
// interleaved attention, interleaved MoE): present and not null, the
// simulated engine cannot cost the model.
var hybridFields = []string{
	"layers_block_type", "hybrid_override_pattern", "attn_layer_period", "attn_layer_offset",
	"expert_layer_period", "full_attention_interval", "linear_num_value_heads", "linear_key_head_dim",
	"mamba_d_state", "mamba_d_conv", "ssm_state_size", "interleave_moe_layer_step", "no_rope_layers",
	"attention_chunk_size", "sliding_window_pattern", "global_attn_every_n_layers",
}

// maxConfigBytes bounds what LoadHFConfig reads; real config.json files are a
// few KiB.
const maxConfigBytes = 1 << 20

// ParseHFConfig reads a Hugging Face config.json. id names the model in
// errors and becomes Model.ID (the file's _name_or_path is used when id is
// empty). Missing num_key_value_heads means multi-head attention; missing
// head_dim is hidden_size/num_attention_heads; tie_word_embeddings defaults
// to false as in transformers' Llama/Qwen2 configs.
func ParseHFConfig(r io.Reader, id string) (Model, error) {
	c, fields, err := readHFConfig(r)
	if err != nil {
		return Model{}, err
	}
	if id == "" {
		id = c.NameOrPath
	}
	if id == "" {
		id = "custom"
	}
	m := Model{
		ID: id, Layers: intOrZero(c.Layers), Hidden: intOrZero(c.Hidden), Heads: intOrZero(c.Heads),
		KVHeads: intOrZero(c.KVHeads), HeadDim: intOrZero(c.HeadDim), Intermediate: intOrZero(c.Intermediate),
		Vocab: intOrZero(c.Vocab), MaxPosition: intOrZero(c.MaxPosition), DType: c.DType,
	}
	if c.KVHeads == nil {
		m.KVHeads = m.Heads
	}
	if c.HeadDim == nil && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.DType == "" {
		m.DType = c.DTypeField
	}
	if c.Tied != nil {
		m.TiedEmbeddings = *c.Tied
	}
	mixtureAndMLA(&m, &c)
	if isLlama4(c.Architectures) {
		if err := llama4Layers(&m, c.llama4Fields); err != nil {
			return Model{}, err
		}
		for _, f := range []string{"interleave_moe_layer_step", "no_rope_layers", "attention_chunk_size"} {
			delete(fields, f)
		}
	}
	if isGatedDeltaNet(c.Architectures) {
		if err := linearLayers(&m, c.linearFields, c.LayerTypes); err != nil {
			return Model{}, err
		}
		for _, f := range gatedDeltaNetFields {
			delete(fields, f)
		}
	}
	m.Unmodelled = append(m.Unmodelled, sparseLayers(&m, c.sparseFields, fields)...)
	m.Unmodelled = append(m.Unmodelled, attentionSpan(&m, &c, fields)...)
	for _, a := range c.Architectures {
		m.AttentionSinks = m.AttentionSinks || a == "GptOssForCausalLM"
		if !knownArchitectures[a] {
			m.Unmodelled = append(m.Unmodelled, fmt.Sprintf("architectures %q", a))
		}
	}
	if m.DType == "" {
		m.DType = "bfloat16"
	}
	if c.Quant != nil {
		m.Quantization = normalizeQuant(c.Quant.Method)
		if c.Quant.Method == "compressed-tensors" && compressedW4A16(&m, c.Quant) {
			m.Quantization = "compressed-tensors"
		}
		if len(c.Quant.WeightBlock) > 0 {
			m.WeightBlock = c.Quant.WeightBlock[0]
		}
	}
	if err := m.Validate(); err != nil {
		return Model{}, err
	}
	return m, nil
}

// readHFConfig decodes a config.json, and its raw fields to find those the
// simulated engine cannot cost; a multimodal config's text_config is the
// language model's, taking the outer architectures, dtype and
// quantization where it has none.
func readHFConfig(r io.Reader) (hfConfig, hfRaw, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return hfConfig{}, nil, fmt.Errorf("read config.json: %w", err)
	}
	if len(data) > maxConfigBytes {
		return hfConfig{}, nil, fmt.Errorf("config.json larger than %d bytes", maxConfigBytes)
	}
	var c hfConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return hfConfig{}, nil, fmt.Errorf("parse config.json: %w", err)
	}
	// The raw fields, to find those the simulated engine cannot cost.
	var fields hfRaw
	_ = json.Unmarshal(data, &fields) // it decoded above
	if c.TextConfig != nil && c.Layers == nil {
		var text hfRaw
		_ = json.Unmarshal(fields["text_config"], &text)
		fields = text
		inner := *c.TextConfig
		if inner.Architectures == nil {
			inner.Architectures = c.Architectures
		}
		if inner.DType == "" && inner.DTypeField == "" {
			inner.DType, inner.DTypeField = c.DType, c.DTypeField
		}
		if inner.Quant == nil {
			inner.Quant = c.Quant
		}
		c = inner
	}
	return c, fields, nil
}

// mixtureAndMLA reads the experts (Mixtral's, Qwen's and DeepSeek's
// field names) and MLA's latent ranks into m.
func mixtureAndMLA(m *Model, c *hfConfig) {
	switch {
	case c.LocalExperts != nil:
		m.Experts = *c.LocalExperts
	case c.Experts != nil:
		m.Experts = *c.Experts
	case c.RoutedExperts != nil:
		m.Experts = *c.RoutedExperts
	}
	if m.Experts > 0 {
		m.ExpertsPerTok = intOrZero(c.ExpertsPerTok)
		if c.ExpertsPerTok == nil {
			m.ExpertsPerTok = intOrZero(c.ExpertsPerToken)
		}
		if c.MoEIntermediate != nil {
			m.Intermediate = *c.MoEIntermediate
		}
		moeShape(m, c)
	}
	if c.KVLoRARank != nil {
		m.MLA = &MLA{KVLoRARank: *c.KVLoRARank, QLoRARank: intOrZero(c.QLoRARank), QKRopeHeadDim: intOrZero(c.QKRopeHeadDim),
			QKNopeHeadDim: intOrZero(c.QKNopeHeadDim), VHeadDim: intOrZero(c.VHeadDim)}
		m.HeadDim = m.MLA.QKNopeHeadDim + m.MLA.QKRopeHeadDim
	}
}

// intOrZero is *p, or 0 for a field config.json leaves out.
func intOrZero(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// hfRaw is a config.json level as raw fields.
type hfRaw map[string]json.RawMessage

// present says whether the field is there and neither null, false, 0 nor empty.
func (r hfRaw) present(name string) bool {
	v, ok := r[name]
	if !ok {
		return false
	}
	switch string(bytes.TrimSpace(v)) {
	case "null", "false", "0", `""`, "[]", "{}":
		return false
	}
	return true
}

// moeShape fills the MoE layout beyond the routed experts (shared
// experts, leading dense layers), and names what the simulated engine
// does not cost: MoE layers interleaved with dense ones other than a
// leading block.
func moeShape(m *Model, c *hfConfig) {
	if c.SharedExperts != nil && *c.SharedExperts != 0 {
		m.SharedIntermediate = *c.SharedExperts * m.Intermediate
	}
	if c.SharedIntermediate != nil && *c.SharedIntermediate != 0 {
		m.SharedIntermediate += *c.SharedIntermediate
	}
	if c.FirstKDense != nil && *c.FirstKDense != 0 {
		m.DenseLayers = *c.FirstKDense
		m.DenseIntermediate = 0
		if c.Intermediate != nil {
			m.DenseIntermediate = *c.Intermediate
		}
	}
	// Every layer (after the dense ones) has experts unless these say
	// otherwise; the sizes above would be wrong then, so they are refused
	// by Simulable and the count is an upper bound.
	if c.MoELayerFreq != nil && *c.MoELayerFreq != 1 {
		m.Unmodelled = append(m.Unmodelled, fmt.Sprintf("moe_layer_freq %d", *c.MoELayerFreq))
	}
	if c.SparseStep != nil && *c.SparseStep != 1 {
		m.Unmodelled = append(m.Unmodelled, fmt.Sprintf("decoder_sparse_step %d", *c.SparseStep))
	}
	if len(c.MLPOnlyLayers) > 0 {
		m.Unmodelled = append(m.Unmodelled, fmt.Sprintf("mlp_only_layers (%d layers)", len(c.MLPOnlyLayers)))
	}
}

// attentionSpan reads the layers that attend to part of the context
// (layer_types "sliding_attention" with sliding_window: gpt-oss) into m,
// and names the fields by which some layers attend to less than the
// whole context, or are no attention at all, in a way the simulated
// engine does not cost (a window over every layer, as Mistral v0.1's,
// leaves no layer whose cache grows with the sequence).
func attentionSpan(m *Model, c *hfConfig, fields hfRaw) []string {
	var out []string
	window := 0
	if w := c.SlidingWindow; w != nil && *w > 0 && (c.UseSlidingWindow == nil || *c.UseSlidingWindow) &&
		(c.MaxPosition == nil || *w < *c.MaxPosition) {
		window = *w
	}
	sliding := 0
	for _, t := range c.LayerTypes {
		switch {
		case t == "full_attention":
		case t == "sliding_attention":
			sliding++
		case t == "linear_attention" && m.Linear != nil:
			// Gated DeltaNet layers, read by linearLayers.
		case t == "deepseek_sparse_attention" && m.Sparse != nil:
			// MLA with DeepSeek Sparse Attention's indexer in every layer.
		default:
			if named := fmt.Sprintf("layer_types %q", t); !slices.Contains(out, named) {
				out = append(out, named)
			}
		}
	}
	switch {
	case len(out) > 0:
	case sliding > 0 && window > 0 && len(c.LayerTypes) == m.Layers && sliding < m.Layers:
		m.SlidingLayers, m.SlidingWindow = sliding, window
	case sliding > 0:
		out = append(out, fmt.Sprintf("layer_types %q", "sliding_attention"))
	case window > 0:
		out = append(out, fmt.Sprintf("sliding_window %d", window))
	}
	m.QKNormAllHeads = c.QKNormType == "per_layer" && (c.UseQKNorm == nil || *c.UseQKNorm)
	m.RouterFP32 = slices.Contains(c.Architectures, "MiniMaxM2ForCausalLM")
	for _, t := range c.AttnTypeList {
		if t != 1 {
			out = append(out, fmt.Sprintf("attn_type_list %d (linear attention)", t))
			break
		}
	}
	for _, f := range hybridFields {
		if fields.present(f) {
			out = append(out, f)
		}
	}
	return out
}

// normalizeQuant maps quant_method spellings to the engines' quantization names.
func normalizeQuant(method string) string {
	switch s := strings.ToLower(method); s {
	case "fp8", "compressed-tensors", "modelopt", "fbgemm_fp8":
		// compressed-tensors is mostly FP8 (W8A8) in practice; the caller
		// overrides with the quantization setting when it is not.
		return "fp8"
	case "awq", "awq_marlin":
		return "awq"
	case "gptq", "gptq_marlin":
		return "gptq"
	case "mxfp4":
		return "mxfp4"
	default:
		return s
	}
}

// LoadHFConfig reads a config.json file; id as in ParseHFConfig. The
// generation_config.json beside it, if any, gives the sampling defaults
// (Model.Generation).
func LoadHFConfig(path, id string) (Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return Model{}, fmt.Errorf("model config: %w", err)
	}
	defer f.Close()
	m, err := ParseHFConfig(f, id)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	if m.Generation, err = loadGeneration(path); err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ModelPath says whether name is a local model rather than a catalog id: a
// Hugging Face config.json, or a directory holding one (as vLLM's --model
// DIR). It returns the directory an engine loads and the config.json's
// path; ok is false for a name that is no such path.
func ModelPath(name string) (dir, config string, ok bool) {
	st, err := os.Stat(name)
	if err != nil {
		return "", "", false
	}
	if st.IsDir() {
		config = filepath.Join(name, "config.json")
		if _, err := os.Stat(config); err != nil {
			return "", "", false
		}
		return name, config, true
	}
	return filepath.Dir(name), name, true
}

// ResolveModel finds a model by catalog id or alias, or as a local
// config.json or a directory holding one (ModelPath). configPath is the
// config.json it read ("" for catalog models).
func ResolveModel(name string) (m Model, configPath string, err error) {
	if dir, cfg, ok := ModelPath(name); ok {
		m, err = LoadHFConfig(cfg, dir)
		return m, cfg, err
	}
	m, err = LookupModel(name)
	return m, "", err
}

// LoadModel is the model name serves: read from configPath, a
// config.json, when one is given (name is then the id it answers to),
// else found by ResolveModel.
func LoadModel(name, configPath string) (Model, error) {
	if configPath != "" {
		return LoadHFConfig(configPath, name)
	}
	m, _, err := ResolveModel(name)
	return m, err
}

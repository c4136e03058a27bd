package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// hfConfig is the subset of a Hugging Face config.json the simulator needs.
// Pointers tell "absent" from zero so defaults apply only to absent fields.
type hfConfig struct {
	Layers          *int     `json:"num_hidden_layers"`
	Hidden          *int     `json:"hidden_size"`
	Heads           *int     `json:"num_attention_heads"`
	KVHeads         *int     `json:"num_key_value_heads"`
	HeadDim         *int     `json:"head_dim"`
	Intermediate    *int     `json:"intermediate_size"`
	MoEIntermediate *int     `json:"moe_intermediate_size"`
	Vocab           *int     `json:"vocab_size"`
	Tied            *bool    `json:"tie_word_embeddings"`
	LocalExperts    *int     `json:"num_local_experts"` // Mixtral
	Experts         *int     `json:"num_experts"`       // Qwen MoE
	ExpertsPerTok   *int     `json:"num_experts_per_tok"`
	MaxPosition     *int     `json:"max_position_embeddings"`
	DType           string   `json:"torch_dtype"`
	NameOrPath      string   `json:"_name_or_path"`
	Quant           *hfQuant `json:"quantization_config"`
	// Multimodal wrappers keep the language model's shape here.
	TextConfig *hfConfig `json:"text_config"`
}

type hfQuant struct {
	Method string `json:"quant_method"`
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
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return Model{}, fmt.Errorf("read config.json: %w", err)
	}
	if len(data) > maxConfigBytes {
		return Model{}, fmt.Errorf("config.json larger than %d bytes", maxConfigBytes)
	}
	var c hfConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return Model{}, fmt.Errorf("parse config.json: %w", err)
	}
	if c.TextConfig != nil && c.Layers == nil {
		inner := *c.TextConfig
		if inner.DType == "" {
			inner.DType = c.DType
		}
		if inner.Quant == nil {
			inner.Quant = c.Quant
		}
		c = inner
	}
	if id == "" {
		id = c.NameOrPath
	}
	if id == "" {
		id = "custom"
	}
	get := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	m := Model{
		ID: id, Layers: get(c.Layers), Hidden: get(c.Hidden), Heads: get(c.Heads),
		KVHeads: get(c.KVHeads), HeadDim: get(c.HeadDim), Intermediate: get(c.Intermediate),
		Vocab: get(c.Vocab), MaxPosition: get(c.MaxPosition), DType: c.DType,
	}
	if c.KVHeads == nil {
		m.KVHeads = m.Heads
	}
	if c.HeadDim == nil && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if c.Tied != nil {
		m.TiedEmbeddings = *c.Tied
	}
	switch {
	case c.LocalExperts != nil:
		m.Experts = *c.LocalExperts
	case c.Experts != nil:
		m.Experts = *c.Experts
	}
	if m.Experts > 0 {
		m.ExpertsPerTok = get(c.ExpertsPerTok)
		if c.MoEIntermediate != nil {
			m.Intermediate = *c.MoEIntermediate
		}
	}
	if m.DType == "" {
		m.DType = "bfloat16"
	}
	if c.Quant != nil {
		m.Quantization = normalizeQuant(c.Quant.Method)
	}
	if err := m.Validate(); err != nil {
		return Model{}, err
	}
	return m, nil
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
	default:
		return s
	}
}

// LoadHFConfig reads a config.json file; id as in ParseHFConfig.
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

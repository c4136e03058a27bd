package catalog

import (
	"fmt"
	"slices"
)

// Hybrid linear attention (Qwen3-Next, Qwen3.5): Gated DeltaNet layers
// in three of every four layers, gated full attention in the fourth.
// vLLM's qwen3_next.py builds layer i as full attention where
// layer_types[i] is "full_attention" (without layer_types: where
// (i+1) % full_attention_interval == 0) and as a Gated DeltaNet layer
// elsewhere. A Gated DeltaNet layer keeps no KV cache: each request
// holds a constant state, a short-convolution window of
// (linear_conv_kernel_dim - 1) tokens of its q, k and v channels and a
// linear_num_value_heads x linear_key_head_dim x linear_value_head_dim
// recurrent matrix (MambaStateShapeCalculator.gated_delta_net_state_shape
// in vllm/model_executor/layers/mamba/mamba_utils.py).

// LinearAttention is the shape of a hybrid model's Gated DeltaNet
// layers, as config.json states it.
type LinearAttention struct {
	Layers       int `json:"layers"`
	KeyHeads     int `json:"linear_num_key_heads"`
	ValueHeads   int `json:"linear_num_value_heads"`
	KeyHeadDim   int `json:"linear_key_head_dim"`
	ValueHeadDim int `json:"linear_value_head_dim"`
	ConvKernel   int `json:"linear_conv_kernel_dim"`
	// StateDType is config.json's mamba_ssm_dtype (Qwen3.5's float32),
	// the recurrent state's element type where the engine reads it; ""
	// leaves the engine's own default.
	StateDType string `json:"mamba_ssm_dtype,omitempty"`
}

// keyDim and valueDim are the layer's q/k and v widths over all heads.
func (a LinearAttention) keyDim() float64   { return float64(a.KeyHeads * a.KeyHeadDim) }
func (a LinearAttention) valueDim() float64 { return float64(a.ValueHeads * a.ValueHeadDim) }

// ConvChannels is the short convolution's channels: q, k and v.
func (a LinearAttention) ConvChannels() int {
	return 2*a.KeyHeads*a.KeyHeadDim + a.ValueHeads*a.ValueHeadDim
}

// Params is one Gated DeltaNet layer's parameter count: in_proj_qkvz
// (hidden to q, k, v and the output gate z), in_proj_ba (the write
// strength and decay per value head), the depthwise convolution over q,
// k and v, and out_proj (vLLM's Qwen3NextGatedDeltaNet); the per-head
// A_log, dt_bias and the gated norm are negligible.
func (a LinearAttention) Params(hidden int) float64 {
	h := float64(hidden)
	return h*(2*a.keyDim()+2*a.valueDim()) + h*2*float64(a.ValueHeads) +
		float64(a.ConvChannels()*a.ConvKernel) + a.valueDim()*h
}

// StateElems is one request's state in one layer, in elements over all
// heads: the convolution window and the recurrent matrices.
func (a LinearAttention) StateElems() (conv, recurrent float64) {
	return float64(a.ConvChannels() * (a.ConvKernel - 1)),
		float64(a.ValueHeads * a.KeyHeadDim * a.ValueHeadDim)
}

// linearFields are the config.json fields of the Gated DeltaNet layers.
type linearFields struct {
	FullAttentionInterval *int   `json:"full_attention_interval"`
	LinearKeyHeads        *int   `json:"linear_num_key_heads"`
	LinearValueHeads      *int   `json:"linear_num_value_heads"`
	LinearKeyHeadDim      *int   `json:"linear_key_head_dim"`
	LinearValueHeadDim    *int   `json:"linear_value_head_dim"`
	LinearConvKernel      *int   `json:"linear_conv_kernel_dim"`
	MambaSSMDType         string `json:"mamba_ssm_dtype"`
	AttnOutputGate        *bool  `json:"attn_output_gate"`
}

// gatedDeltaNetArchitectures are the architectures whose linear-attention
// layers are Gated DeltaNet, as the engines build them.
var gatedDeltaNetArchitectures = []string{
	"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM",
	"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM",
}

// isGatedDeltaNet says whether the architectures are Gated DeltaNet hybrids.
func isGatedDeltaNet(archs []string) bool {
	return slices.ContainsFunc(archs, func(a string) bool { return slices.Contains(gatedDeltaNetArchitectures, a) })
}

// gatedDeltaNetFields are the config.json fields linearLayers reads, no
// longer unmodelled once read.
var gatedDeltaNetFields = []string{"full_attention_interval", "linear_num_value_heads", "linear_key_head_dim"}

// linearLayers reads a Gated DeltaNet hybrid's layer kinds into m: which
// layers are linear attention (layer_types, else every layer but each
// full_attention_interval-th), their shape, and the full-attention
// layers' output gate (a second query-sized projection whose sigmoid
// gates the attention's output: vLLM's Qwen3NextAttention sizes its
// qkv_proj with num_heads * (1 + attn_output_gate), the gate on unless
// config.json says otherwise).
func linearLayers(m *Model, f linearFields, layerTypes []string) error {
	n := 0
	switch {
	case len(layerTypes) > 0:
		if len(layerTypes) != m.Layers {
			return fmt.Errorf("model %q: layer_types has %d entries for %d layers", m.ID, len(layerTypes), m.Layers)
		}
		for _, t := range layerTypes {
			if t == "linear_attention" {
				n++
			}
		}
	case f.FullAttentionInterval != nil && *f.FullAttentionInterval > 0:
		n = m.Layers - m.Layers / *f.FullAttentionInterval
	default:
		return fmt.Errorf("model %q: neither layer_types nor full_attention_interval says which layers are linear attention", m.ID)
	}
	m.AttnOutputGate = f.AttnOutputGate == nil || *f.AttnOutputGate
	if n == 0 {
		return nil
	}
	a := LinearAttention{Layers: n, KeyHeads: intOrZero(f.LinearKeyHeads), ValueHeads: intOrZero(f.LinearValueHeads),
		KeyHeadDim: intOrZero(f.LinearKeyHeadDim), ValueHeadDim: intOrZero(f.LinearValueHeadDim),
		ConvKernel: intOrZero(f.LinearConvKernel), StateDType: f.MambaSSMDType}
	m.Linear = &a
	return nil
}

// validate checks the linear-attention layers' shape.
func (a LinearAttention) validate(id string, layers int) error {
	for _, c := range []struct {
		name string
		v    int
	}{{"linear_num_key_heads", a.KeyHeads}, {"linear_num_value_heads", a.ValueHeads}, {"linear_key_head_dim", a.KeyHeadDim},
		{"linear_value_head_dim", a.ValueHeadDim}, {"linear_conv_kernel_dim", a.ConvKernel}} {
		if c.v <= 0 {
			return fmt.Errorf("model %q: %s must be positive for its %d linear-attention layers, got %d", id, c.name, a.Layers, c.v)
		}
	}
	if a.Layers < 0 || a.Layers >= layers {
		return fmt.Errorf("model %q: %d linear-attention layers of %d leave no full-attention layer", id, a.Layers, layers)
	}
	if a.ValueHeads%a.KeyHeads != 0 {
		return fmt.Errorf("model %q: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", id, a.ValueHeads, a.KeyHeads)
	}
	switch a.StateDType {
	case "", "float32", "bfloat16", "float16":
	default:
		return fmt.Errorf("model %q: mamba_ssm_dtype %q: want float32, bfloat16 or float16", id, a.StateDType)
	}
	return nil
}

package catalog

import "fmt"

// Llama-4 (Llama4ForConditionalGeneration; the language model in
// text_config): chunked local attention in the layers with RoPE, global
// attention without RoPE (NoPE) in every no_rope_layer_interval-th layer,
// routed experts with one shared expert in every
// interleave_moe_layer_step-th layer and a dense MLP of
// intermediate_size_mlp in the others. vLLM's llama4.py: a layer is NoPE
// where no_rope_layers[i] == 0 (empty: (i+1) % 4 == 0), NoPE layers run
// global Attention and the others ChunkedLocalAttention of
// attention_chunk_size; a layer has experts where (i+1) %
// interleave_moe_layer_step == 0. The vision tower (under 1% of the
// weights) is not counted.

// llama4Interval is transformers' Llama4TextConfig default
// no_rope_layer_interval: every 4th layer is NoPE when no_rope_layers is
// empty.
const llama4Interval = 4

// llama4Fields are the config.json fields the Llama-4 reader models.
type llama4Fields struct {
	AttentionChunk  *int  `json:"attention_chunk_size"`
	NoRopeLayers    []int `json:"no_rope_layers"`
	NoRopeInterval  *int  `json:"no_rope_layer_interval"`
	InterleaveStep  *int  `json:"interleave_moe_layer_step"`
	IntermediateMLP *int  `json:"intermediate_size_mlp"`
}

// isLlama4 says whether the architectures are Llama-4's.
func isLlama4(archs []string) bool {
	for _, a := range archs {
		if a == "Llama4ForConditionalGeneration" || a == "Llama4ForCausalLM" {
			return true
		}
	}
	return false
}

// llama4Layers reads Llama-4's layer kinds into m: the chunked layers,
// the MoE layers (the others counted as m's dense layers, wherever they
// sit: the cost does not depend on where) and the shared expert.
func llama4Layers(m *Model, f llama4Fields) error {
	nope := 0
	interval := llama4Interval
	if f.NoRopeInterval != nil && *f.NoRopeInterval > 0 {
		interval = *f.NoRopeInterval
	}
	switch {
	case len(f.NoRopeLayers) == 0:
		nope = m.Layers / interval
	case len(f.NoRopeLayers) != m.Layers:
		return fmt.Errorf("model %q: no_rope_layers has %d entries for %d layers", m.ID, len(f.NoRopeLayers), m.Layers)
	default:
		for _, v := range f.NoRopeLayers {
			if v == 0 {
				nope++
			}
		}
	}
	if f.AttentionChunk != nil && *f.AttentionChunk > 0 && (m.MaxPosition == 0 || *f.AttentionChunk < m.MaxPosition) {
		m.AttentionChunk, m.ChunkedLayers = *f.AttentionChunk, m.Layers-nope
	}
	if m.MoE() {
		step := 1
		if f.InterleaveStep != nil && *f.InterleaveStep > 0 {
			step = *f.InterleaveStep
		}
		// One shared expert as wide as a routed one in every MoE layer.
		m.SharedIntermediate = m.Intermediate
		if dense := m.Layers - m.Layers/step; dense > 0 {
			if f.IntermediateMLP == nil || *f.IntermediateMLP <= 0 {
				return fmt.Errorf("model %q: intermediate_size_mlp must be positive for its %d dense layers", m.ID, dense)
			}
			m.DenseLayers, m.DenseIntermediate = dense, *f.IntermediateMLP
		}
	}
	return nil
}

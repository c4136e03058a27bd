package catalog

import "fmt"

// Layer kinds and weight formats: which layers' KV cache grows with the
// sequence, and how many bytes a quantized weight takes.

// KVSpan is a set of layers whose KV cache stops growing at Span tokens
// of a request: sliding-window layers (their window) and chunked local
// attention layers (their chunk). vLLM's hybrid KV cache manager frees
// the blocks a layer no longer attends to (SlidingWindowSpec and
// ChunkedLocalAttentionSpec in vllm/v1/kv_cache_interface.py); SGLang
// keeps such layers in a pool of their own (SWATokenToKVPoolAllocator).
type KVSpan struct {
	Layers int
	Span   int
	// Chunked: the span restarts at every multiple of Span (chunked
	// local attention) instead of sliding.
	Chunked bool
}

// KVSpans are the model's layer sets whose KV cache stops growing; empty
// when every layer attends to the whole sequence.
func (m Model) KVSpans() []KVSpan {
	var out []KVSpan
	if m.SlidingLayers > 0 {
		out = append(out, KVSpan{Layers: m.SlidingLayers, Span: m.SlidingWindow})
	}
	if m.ChunkedLayers > 0 {
		out = append(out, KVSpan{Layers: m.ChunkedLayers, Span: m.AttentionChunk, Chunked: true})
	}
	return out
}

// FullLayers is the number of layers that attend to the whole sequence,
// whose KV cache grows with it: neither windowed nor linear attention.
func (m Model) FullLayers() int {
	return m.AttentionLayers() - m.SlidingLayers - m.ChunkedLayers
}

// validateLayerKinds checks the layer counts of each kind.
func (m Model) validateLayerKinds() error {
	for _, k := range []struct {
		name         string
		layers, span int
	}{{"sliding_window", m.SlidingLayers, m.SlidingWindow}, {"attention_chunk_size", m.ChunkedLayers, m.AttentionChunk}} {
		if k.layers < 0 || k.layers > 0 && k.span <= 0 {
			return fmt.Errorf("model %q: %s must be positive for its %d layers, got %d", m.ID, k.name, k.layers, k.span)
		}
	}
	if a := m.Linear; a != nil {
		if err := a.validate(m.ID, m.Layers); err != nil {
			return err
		}
	}
	if m.FullLayers() < 1 {
		return fmt.Errorf("model %q: no full-attention layer among its %d (the simulated engine sizes the KV cache by them)", m.ID, m.Layers)
	}
	return nil
}

// Weight storage per format, in bits per weight including its scales.
const (
	// MXFP4 (OCP Microscaling v1.0): 4-bit E2M1 values with one 8-bit
	// E8M0 scale per 32. gpt-oss's checkpoints store the routed experts
	// so (*_blocks and *_scales tensors) and everything else in BF16; its
	// two published sizes (model.safetensors.index.json total_size:
	// gpt-oss-120b 65,248,815,744 B, gpt-oss-20b 13,761,264,768 B) are
	// those counts to the byte.
	BitsMXFP4 = 4.25
	// NVFP4: 4-bit E2M1 values with one FP8 E4M3 scale per 16 (and a
	// tensor-wide FP32 scale).
	BitsNVFP4 = 4.5
	// INT4 weight-only with one BF16 scale per group of 32 (compressed-
	// tensors pack-quantized W4A16, group_size 32: Kimi-K2.5's routed
	// experts).
	BitsInt4G32 = 4.5
	// AWQ and GPTQ: 4-bit values with a scale per group (128 by default);
	// 4.25 bits with the zero points and scales.
	BitsInt4 = 4.25
)

// QuantBits is the storage of one linear weight under quantization quant
// (the engines' name for it, or "" and "none" for 16-bit), and
// whether only the routed experts are stored so: MXFP4 (vLLM's Mxfp4Config
// quantizes MoE layers only; "Mxfp4 linear layer is not implemented")
// and INT4 weight-only MoE (int4_moe, Kimi-K2.5's ignore list keeps
// attention, the shared experts and the dense MLPs in BF16).
func QuantBits(quant string) (bits float64, expertsOnly bool) {
	switch quant {
	case "fp8":
		return 8, false
	case "awq", "gptq":
		return BitsInt4, false
	case "mxfp4":
		return BitsMXFP4, true
	case "nvfp4", "modelopt_fp4":
		return BitsNVFP4, false
	case "int4_moe":
		return BitsInt4G32, true
	}
	return 16, false
}

// WeightBytes is the model's weights under quantization quant, the
// checkpoint's own when quant is "": the quantized linears at QuantBits,
// the 16-bit ones and the embeddings and LM head at two bytes.
func (m Model) WeightBytes(quant string) float64 {
	if quant == "" {
		quant = m.Quantization
	}
	rest, routed := m.WeightBytesSplit(quant)
	return rest + routed
}

// QuantBits is the package's QuantBits for quant on m: the
// checkpoint's own format where m states it (WeightBits) and quant is
// m's quantization.
func (m Model) QuantBits(quant string) (bits float64, expertsOnly bool) {
	if m.WeightBits > 0 && quant == m.Quantization {
		return m.WeightBits, m.QuantExpertsOnly
	}
	return QuantBits(quant)
}

// WeightBytesSplit is WeightBytes in two parts: everything but the
// routed experts, and the routed experts.
func (m Model) WeightBytesSplit(quant string) (rest, routed float64) {
	bits, expertsOnly := m.QuantBits(quant)
	linear := bits / 8
	experts := m.RoutedParams()
	rest = m.EmbeddingParams() * 2
	if expertsOnly {
		rest += (m.LinearParams() - experts) * 2
	} else {
		rest += (m.LinearParams() - experts) * linear
	}
	return rest, experts * linear
}

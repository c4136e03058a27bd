package catalog

import "fmt"

// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): MLA whose queries
// attend to index_topk cached tokens each, picked by a lightning
// indexer: a small multi-query attention of index_n_heads heads of
// index_head_dim over every cached token, in FP8, that scores the
// tokens for the top-k. vLLM's deepseek_v2.py turns it on where
// config.json has index_topk; its Indexer projects the query latent
// (wq_b, q_lora_rank to index_n_heads x index_head_dim) and the hidden
// state (wk and weights_proj, to one index_head_dim key and a weight
// per head), replicated on every tensor-parallel rank, and caches each
// token's indexer key in FP8 with one float32 scale per 128 elements
// (DeepseekV32IndexerCache: index_head_dim + index_head_dim/128*4
// bytes, 132 for 128). SGLang's NSA pool stores the same
// (NSATokenToKVPool, index_k_with_scale_buffer).

// SparseAttention is DeepSeek Sparse Attention's indexer, as
// config.json states it.
type SparseAttention struct {
	TopK         int `json:"index_topk"`
	IndexHeads   int `json:"index_n_heads"`
	IndexHeadDim int `json:"index_head_dim"`
}

// indexQuantBlock is the elements of an indexer key that share one
// float32 scale (the Indexer's quant_block_size).
const indexQuantBlock = 128

// IndexKeyBytes is one token's indexer key in one layer's cache: FP8
// values and a float32 scale per block, whatever the KV cache's dtype.
func (s SparseAttention) IndexKeyBytes() float64 {
	return float64(s.IndexHeadDim + s.IndexHeadDim/indexQuantBlock*4)
}

// IndexerParams is one layer's indexer projections: wq_b from the
// query latent (q_lora_rank; the hidden state without one), wk and
// weights_proj from the hidden state.
func (s SparseAttention) IndexerParams(hidden, qLoRARank int) float64 {
	in := qLoRARank
	if in == 0 {
		in = hidden
	}
	h, d, nh := float64(hidden), float64(s.IndexHeadDim), float64(s.IndexHeads)
	return float64(in)*nh*d + h*d + h*nh
}

// sparseFields are the config.json fields of the indexer, and those of
// its variants the simulated engine does not cost.
type sparseFields struct {
	IndexTopK    *int `json:"index_topk"`
	IndexHeads   *int `json:"index_n_heads"`
	IndexHeadDim *int `json:"index_head_dim"`
	// GLM-5.2's shared indexers: only every index_topk_freq-th layer
	// (or those of index_topk_pattern) runs its own indexer, the others
	// reuse its top-k.
	IndexTopKFreq *int `json:"index_topk_freq"`
}

// sparseLayers reads DeepSeek Sparse Attention's indexer into m (an MLA
// model with index_topk) and names what of it the simulated engine does
// not cost.
func sparseLayers(m *Model, f sparseFields, fields hfRaw) []string {
	if f.IndexTopK == nil || *f.IndexTopK <= 0 {
		return nil
	}
	if m.MLA == nil {
		return []string{fmt.Sprintf("index_topk %d without multi-head latent attention", *f.IndexTopK)}
	}
	m.Sparse = &SparseAttention{TopK: *f.IndexTopK, IndexHeads: intOrZero(f.IndexHeads), IndexHeadDim: intOrZero(f.IndexHeadDim)}
	var out []string
	if f.IndexTopKFreq != nil && *f.IndexTopKFreq > 1 {
		out = append(out, fmt.Sprintf("index_topk_freq %d (layers sharing an indexer's top-k)", *f.IndexTopKFreq))
	}
	if fields.present("index_topk_pattern") {
		out = append(out, "index_topk_pattern (layers sharing an indexer's top-k)")
	}
	return out
}

// validate checks the indexer's shape.
func (s SparseAttention) validate(id string) error {
	for _, c := range []struct {
		name string
		v    int
	}{{"index_topk", s.TopK}, {"index_n_heads", s.IndexHeads}, {"index_head_dim", s.IndexHeadDim}} {
		if c.v <= 0 {
			return fmt.Errorf("model %q: %s must be positive, got %d", id, c.name, c.v)
		}
	}
	return nil
}

package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Models whose layers are not all alike (catalog.Model.KVSpans): the KV
// cache and attention of sliding-window and chunked local attention
// layers, and the bytes of weights quantized in part.
//
// KV cache. vLLM's hybrid KV cache manager puts every layer kind in one
// pool of equal pages and frees, per layer kind, the blocks a layer no
// longer attends to (vllm/v1/kv_cache_interface.py: a sliding-window
// layer holds at most window-1 tokens plus the block being written, a
// chunked local layer its current chunk): the pool is counted in blocks
// of the full-attention layers (kvBytesPerTokenPerGPU), and a request
// of n tokens holds boundedKVBytes(n) more. SGLang keeps the windowed
// layers in a pool of their own, sized at swa_full_tokens_ratio (0.8,
// ServerArgs) of the full pool's tokens (SWATokenToKVPoolAllocator): its
// full pool holds fewer tokens for it, and a request's few windowed
// tokens never run that pool short, so they are not counted per request.
//
// Attention. A windowed layer attends to at most its span of keys: a
// decode query to min(context, span) of them, a prefill chunk's queries
// to at most span each. Attention sinks (gpt-oss) add one logit per head
// to each softmax: no KV and no cost worth a term.

// sglangSWAFullTokensRatio is SGLang's --swa-full-tokens-ratio default
// (python/sglang/srt/server_args.py, swa_full_tokens_ratio: float = 0.8).
const sglangSWAFullTokensRatio = 0.8

// kvLayerBytesPerGPU is one token's KV cache in one attention layer on
// one GPU: the GPU's KV heads (2·kv·d elements), or MLA's latent
// (kv_lora_rank + qk_rope_head_dim elements, whole on every TP rank;
// with sparse attention's indexer key, sparse.go).
func (c *Config) kvLayerBytesPerGPU() float64 {
	m := c.Model
	if m.MLA != nil { // sparse attention's indexer key too (catalog)
		return m.KVBytesPerLayerToken(c.kvBytesPerElem())
	}
	return 2 * float64(c.kvHeadsPerGPU()) * float64(m.HeadDim) * c.kvBytesPerElem()
}

// boundedKVBytes is what a request of n tokens holds on one GPU in its
// stage's windowed layers under vLLM's hybrid manager, beyond the
// full-attention layers' kvBytesPerTokenPerGPU a token; 0 for SGLang,
// whose windowed layers have a pool of their own (kvPoolBytesPerToken).
// A windowed layer holds the span less one token plus the tokens being
// written: a block's worth in a step of decoding, as the manager frees
// what falls out (scheduled = the block size); at start-up vLLM checks a
// request against a whole step's, min(span - 1 + max_num_batched_tokens,
// max_model_len) (SlidingWindowSpec.max_memory_usage_bytes).
func (c *Config) boundedKVBytes(n, scheduled int) float64 {
	if c.Engine == engine.SGLang {
		return 0
	}
	// A hybrid's linear layers: a pool block in each of their groups
	// (linear.go).
	b := float64(c.linearGroups()) * c.kvPoolBytesPerToken() * float64(c.BlockSize)
	for _, set := range c.Model.KVSpans() {
		held := min(n, set.Span-1+max(1, scheduled))
		b += float64(set.Layers) / float64(c.PP) * c.kvLayerBytesPerGPU() * float64(held)
	}
	return b
}

// kvPoolBytesPerToken is the pool's bytes per token of a full-attention
// layer's block: the full layers' KV, and under SGLang the windowed
// layers' at swa_full_tokens_ratio of it (their own pool, sized so).
func (c *Config) kvPoolBytesPerToken() float64 {
	b := c.kvBytesPerTokenPerGPU()
	if c.Engine == engine.SGLang {
		for _, set := range c.Model.KVSpans() {
			b += sglangSWAFullTokensRatio * float64(set.Layers) / float64(c.PP) * c.kvLayerBytesPerGPU()
		}
	}
	return b
}

// boundedBlocks is the pool blocks a request of n tokens holds in the
// windowed layers (boundedKVBytes), in blocks of the full layers', and
// in its linear layers' states under vLLM (linear.go).
func (c *core) boundedBlocks(n int) int {
	b := c.stateBlocks
	if c.spans != nil {
		b += c.spans.blocks(n)
	}
	return b
}

// spanBlocks is boundedKVBytes in a core's blocks, its figures worked
// out once (newSpanBlocks): allocate asks at every step.
type spanBlocks struct {
	spans []catalog.KVSpan
	// perToken is each span's bytes a held token, block the bytes of a
	// block of the pool, sched the tokens written at once (a block).
	perToken []float64
	block    float64
	sched    int
}

// newSpanBlocks returns cfg's windowed layers' accounting in blocks of
// bs tokens, nil when they hold nothing per request (no windowed layer,
// or SGLang's pool of their own).
func newSpanBlocks(cfg Config, bs int) *spanBlocks {
	if cfg.Engine == engine.SGLang || len(cfg.Model.KVSpans()) == 0 {
		return nil
	}
	x := &spanBlocks{spans: cfg.Model.KVSpans(), sched: bs,
		block: (cfg.kvPoolBytesPerToken() + cfg.specKVPerTokenPerGPU()) * float64(bs)}
	for _, set := range x.spans {
		x.perToken = append(x.perToken, float64(set.Layers)/float64(cfg.PP)*cfg.kvLayerBytesPerGPU())
	}
	return x
}

func (x *spanBlocks) blocks(n int) int {
	b := 0.0
	for i, set := range x.spans {
		b += x.perToken[i] * float64(min(n, set.Span-1+x.sched))
	}
	return int(math.Ceil(b / x.block))
}

// attnSpan is a set of windowed layers in the step model: its share of
// the layers and the keys a query attends to at most.
type attnSpan struct {
	frac, span float64
}

// setSpans sets the step model's windowed layer sets.
func (s *stepModel) setSpans(m catalog.Model) {
	s.fullFrac = float64(m.FullLayers()) / float64(m.Layers)
	for _, set := range m.KVSpans() {
		s.spans = append(s.spans, attnSpan{frac: float64(set.Layers) / float64(m.Layers), span: float64(set.Span)})
	}
}

// attention is one layer's attention time in a step, averaged over the
// layers: decode over the cached context, prefill over the causal
// pairs. A windowed layer set caps each query's keys at its span
// (decode: min(context, seqs·span) keys in all; prefill: at most span
// pairs per prompt token, and the keys read at prompt tokens plus
// span per sequence); a hybrid's linear layers run their recurrence
// instead (linear.go).
func (s *stepModel) attention(b batchShape) float64 {
	if len(s.spans) == 0 && s.lin == nil {
		return s.attentionOver(b.decodeCtx, b.verifyCtx, b.prefillPairs, b.prefillKV, b.prefillTokens)
	}
	t := s.fullFrac * s.attentionOver(b.decodeCtx, b.verifyCtx, b.prefillPairs, b.prefillKV, b.prefillTokens)
	if s.lin != nil {
		t += s.lin.seconds(s, b)
	}
	if s.sp != nil {
		t += s.sp.seconds(s, b)
	}
	seqs, pt := float64(b.seqs), float64(b.prefillTokens)
	for _, set := range s.spans {
		t += set.frac * s.attentionOver(math.Min(b.decodeCtx, seqs*set.span), math.Min(b.verifyCtx, seqs*set.span),
			math.Min(b.prefillPairs, pt*set.span), math.Min(b.prefillKV, pt+seqs*set.span), b.prefillTokens)
	}
	return t
}

// attentionOver is one layer's attention over decode context ctx (verify
// draft pairs more) and a prefill of pairs query-key pairs reading kv
// cached tokens, for prefill prompt tokens.
func (s *stepModel) attentionOver(ctx, verify, pairs, kv float64, prefill int) float64 {
	t := 0.0
	if ctx > 0 {
		t += s.decodeAttention(ctx, verify)
	}
	if prefill > 0 {
		flops := s.prefillPairFlops * s.qPerGPU * pairs
		bytes := kv*s.kvTokenBytes() + float64(prefill)*2*s.qPerGPU*s.headDim*bytesBF16
		t += roofline(flops, s.attnRate, bytes, s.bw)
	}
	return t
}

// qkNormAllReduce is one layer's all-reduce of the per-token query and
// key variances of a model whose QK norms span every head
// (catalog.Model.QKNormAllHeads) under tensor parallelism: vLLM's
// MiniMaxText01RMSNormTP (forward_qkv) reduces both variances, two fp32
// a token, in one all-reduce between a variance kernel and a normalize
// kernel; 0 without TP or such norms.
func (s *stepModel) qkNormAllReduce(T float64) float64 {
	if !s.qkNormTP {
		return 0
	}
	return s.allReduce(T * 2 * 4)
}

// NVFP4 (ModelOpt's modelopt_fp4 checkpoints: FP4 weights and
// activations with FP8 scales per 16). On GPUs with FP4 tensor cores
// (Blackwell) both engines run it natively (W4A4). Without them the
// engines differ: vLLM runs the weights through Marlin's weight-only FP4
// kernels in BF16 arithmetic (W4A16), logging "Your GPU does not have
// native support for FP4 computation but FP4 quantization is being used.
// Weight-only FP4 compression will be used leveraging the Marlin kernel."
// (vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py);
// SGLang refuses at start-up, ModelOptFp4Config.get_min_capability()
// being 100 (python/sglang/srt/layers/quantization/modelopt_quant.py).

// checkFP4 normalizes nvfp4 to the engines' modelopt_fp4 and refuses it
// where the engine does: SGLang without FP4 tensor cores, and a
// checkpoint quantized otherwise.
func (c *Config) checkFP4() error {
	c.Quantization = "modelopt_fp4"
	if q := c.Model.Quantization; q != "" && q != c.Quantization {
		return bad("Quantization method specified in the model config (%s) does not match the quantization method specified in the `quantization` argument (%s).", q, c.Quantization)
	}
	if c.Engine == engine.SGLang && !c.GPU.HasFP4() {
		return bad("The quantization method modelopt_fp4 is not supported for the current GPU. Minimum capability: 100. Current capability: %s.", computeCapability(c.GPU.ID))
	}
	if c.Engine == engine.VLLM && strings.HasPrefix(c.GPU.ID, "MI") {
		return bad("%s modelopt_fp4: the simulator models NVFP4 on NVIDIA GPUs only", engine.Flag(c.Engine, "quantization"))
	}
	return nil
}

// computeCapability is the CUDA compute capability of a catalog GPU as
// torch reports it (major*10 + minor), for the engines' messages.
func computeCapability(gpu string) string {
	switch {
	case strings.HasPrefix(gpu, "A100"):
		return "80"
	case strings.HasPrefix(gpu, "A10G"):
		return "86"
	case strings.HasPrefix(gpu, "L40"), strings.HasPrefix(gpu, "L4"):
		return "89"
	case strings.HasPrefix(gpu, "H100"), strings.HasPrefix(gpu, "H200"):
		return "90"
	case strings.HasPrefix(gpu, "B200"):
		return "100"
	}
	return fmt.Sprintf("unknown (%s)", gpu)
}

package sim

import (
	"math"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Speculative decoding (docs/reference.md, "Speculative decoding"). Each
// decode step of a sequence verifies the k draft tokens proposed after the
// previous one: the target model runs k+1 tokens of the sequence (its last
// sampled token and the drafts; SGLang's tree verifies
// spec_verify_tokens) and samples them all; the drafts are accepted in
// order while each is, i.i.d. with the acceptance rate a, and one more
// token (the correction, or the bonus after k accepted) comes with them,
// so a step gives 1 + j tokens, j the accepted drafts, E[1 + j] =
// (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023). The KV slots of the k
// drafts are allocated before the step (vLLM's lookahead slots); those
// of rejected drafts are wasted until the next step overwrites them.
//
// The drafts cost, after the target's step: an EAGLE, EAGLE-3 or MTP head
// is one decoder layer of the target's shape with the target's LM head; a
// draft model is its own forward pass; both run as vLLM's proposer does:
// once over every token of the step, then k-1 times over one token per
// drafting sequence (top-k per sequence for SGLang's tree). An n-gram
// lookup runs on the host and costs the GPU nothing.

// specOn reports whether c decodes speculatively.
func (c *Config) specOn() bool { return c.SpecMethod != "" && c.SpecMethod != "none" }

// specDefaults checks the speculative decoding settings and fills their
// defaults; off, it clears them.
func (c *Config) specDefaults() error {
	if !c.specOn() {
		c.SpecMethod, c.SpecTokens, c.SpecDraftModel, c.SpecTopK, c.SpecVerify = "", 0, "", 0, 0
		return nil
	}
	method := engine.Flag(c.Engine, "spec_method")
	switch c.SpecMethod {
	case "eagle", "eagle3", "mtp", "ngram", "draft_model":
	default:
		return bad("%s %q: the simulator models eagle, eagle3, mtp, ngram and draft_model", method, c.SpecMethod)
	}
	if c.Engine == engine.VLLM && c.PP > 1 {
		return bad("Speculative decoding is not compatible with pipeline parallelism.")
	}
	if c.SpecTokens == 0 && c.SpecMethod == "mtp" {
		c.SpecTokens = 1 // one MTP module (DeepSeek-V3's num_nextn_predict_layers)
	}
	if c.SpecTokens <= 0 {
		return bad("%s %s: give the draft tokens per step (num_speculative_tokens, SGLang's %s)", method, c.SpecMethod,
			engine.Flag(engine.SGLang, "spec_tokens"))
	}
	if c.SpecTopK <= 0 {
		c.SpecTopK = 1
	}
	if c.SpecVerify <= 0 {
		c.SpecVerify = c.SpecTokens + 1
	}
	if c.SpecVerify < c.SpecTokens+1 && c.SpecTopK == 1 {
		return bad("%s %d: a chain of %d draft tokens verifies %d", engine.Flag(engine.SGLang, "spec_verify_tokens"),
			c.SpecVerify, c.SpecTokens, c.SpecTokens+1)
	}
	if !(c.SpecAcceptance >= 0 && c.SpecAcceptance <= 1) {
		return bad("%s %v: must be in [0, 1]", engine.Flag(c.Engine, "sim_spec_acceptance"), c.SpecAcceptance)
	}
	if !c.SpecAcceptanceSet {
		return bad("speculative decoding: the simulator needs the draft tokens' acceptance rate, which no engine flag says: give %s A (0 <= A <= 1) or %s",
			engine.Flag(c.Engine, "sim_spec_acceptance"), engine.EnvSimSpecAcceptance)
	}
	if c.SpecMethod == "draft_model" {
		if c.SpecDraftModel == "" {
			return bad("%s draft_model: no draft model given", method)
		}
		m, _, err := catalog.ResolveModel(c.SpecDraftModel)
		if err != nil {
			return bad("draft model: %v", err)
		}
		if m.Heads%c.TP != 0 {
			return bad("draft model %s: its %d attention heads do not divide over tensor parallel size %d", m.ID, m.Heads, c.TP)
		}
		c.specDraft = m
	}
	return nil
}

// specTreeStopsOverlap reports whether cfg is SGLang drafting a tree (top-k
// above 1), which SGLang runs without its overlap scheduler, whatever the
// flags say (docs/reference.md, "Speculative decoding"): in its versions
// of January 2025 (EAGLE's arrival) and of April 2025 (v0.4.5's time),
// either side of v0.4.4, ServerArgs.__post_init__
// (python/sglang/srt/server_args.py) sets disable_overlap_schedule for
// every EAGLE run (and EAGLE3, once it came), and its later overlap path for speculative decoding takes chains only
// (top-k 1, num_draft_tokens = num_steps + 1): a tree must run with
// --disable-overlap-schedule. A step then waits for the host's work
// (constants.go, sglangNoOverlapSlowdown). A chain's overlap depends on
// the version: a run of an SGLang that turned it off for chains states
// --disable-overlap-schedule itself.
func (c *Config) specTreeStopsOverlap() bool {
	return c.Engine == engine.SGLang && c.specOn() && c.SpecTopK > 1
}

// draftConfig is the configuration a draft model runs under: the
// target's GPUs and tensor parallelism, unquantized, one stage.
func (c *Config) draftConfig() Config {
	d := *c
	d.Model, d.Quantization, d.PP, d.DP = c.specDraft, c.specDraft.Quantization, 1, 1
	d.SpecMethod = ""
	d.ExpertParallel, d.DPAttention = false, false
	return d
}

// specWeightsPerGPU is the drafts' weights on one GPU: one decoder layer
// for a head (its LM head and embeddings are the target's), a draft
// model's own.
func (c *Config) specWeightsPerGPU() float64 {
	switch c.SpecMethod {
	case "eagle", "eagle3", "mtp":
		return c.Model.LinearParams() / float64(c.Model.Layers) * c.weightBytesPerElem() / float64(c.TP)
	case "draft_model":
		d := c.draftConfig()
		w, _ := d.weightsPerGPU()
		return w
	}
	return 0
}

// specKVPerTokenPerGPU is the drafts' KV cache of one token on one GPU:
// one layer's for a head, a draft model's own.
func (c *Config) specKVPerTokenPerGPU() float64 {
	switch c.SpecMethod {
	case "eagle", "eagle3", "mtp":
		return c.kvLayerBytesPerGPU()
	case "draft_model":
		d := c.draftConfig()
		return d.kvBytesPerTokenPerGPU()
	}
	return 0
}

// specStep is the step-time model of the drafts.
type specStep struct {
	k, topK float64
	draft   *stepModel // nil: no GPU work (n-gram)
}

// newSpecStep returns the drafts' step model of cfg (nil when off); s is
// the target's.
func newSpecStep(cfg Config, s *stepModel) *specStep {
	if !cfg.specOn() {
		return nil
	}
	x := &specStep{k: float64(cfg.SpecTokens), topK: float64(max(1, cfg.SpecTopK))}
	switch cfg.SpecMethod {
	case "eagle", "eagle3", "mtp":
		d := *s
		d.layers, d.pp = 1, 1
		d.kernels = s.kernelsPerLayer + s.kernelsPerStep
		x.draft = &d
	case "draft_model":
		d := newStepModel(cfg.draftConfig())
		d.pp = 1
		x.draft = &d
	}
	if x.draft != nil {
		x.draft.cpuBase, x.draft.perSeq, x.draft.spec = 0, 0, nil
	}
	return x
}

// seconds is the drafts' GPU time after a step of shape b: one pass over
// the step's tokens, every drafting sequence sampling, then k-1 passes of
// top-k tokens per drafting sequence.
func (x *specStep) seconds(b batchShape) float64 {
	if x.draft == nil || b.drafting == 0 {
		return 0
	}
	first := b
	first.sampled = b.drafting
	t := x.draft.gpuSeconds(first)
	if x.k > 1 {
		n := float64(b.drafting) * x.topK
		next := batchShape{tokens: int(n), seqs: b.drafting, sampled: int(n), decodeCtx: b.draftCtx * x.topK}
		t += (x.k - 1) * x.draft.gpuSeconds(next)
	}
	return t
}

// specAccepted draws how many of s's k drafts this step accepts: each in
// order with probability a, i.i.d., from a stream seeded by the sequence
// and its position, so a run draws the same whatever else runs beside it.
func specAccepted(s *seq, k int, a float64) int {
	h := mix64(mix64(specDrawSeed, s.uid), uint64(s.generated))
	for j := 0; j < k; j++ {
		u := float64(mix64(h, uint64(j))>>11) / (1 << 53)
		if u >= a {
			return j
		}
	}
	return k
}

// specDrawSeed seeds the acceptance draws.
const specDrawSeed = 0x3c6ef372fe94f82b

// SpecExpectedTokens is the expected tokens per decode step with k drafts
// each accepted with probability a (Leviathan et al. 2023):
// (1 - a^(k+1)) / (1 - a).
func SpecExpectedTokens(k int, a float64) float64 {
	if a >= 1 {
		return float64(k + 1)
	}
	return (1 - math.Pow(a, float64(k+1))) / (1 - a)
}

package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/catalog"
)

// gpt-oss-120b's 18 sliding-window layers (128 tokens) hold at most the
// window and a block per request under vLLM's hybrid manager, whatever
// the request's length, so a long request's blocks are its 18 full
// layers' and a fixed few; its weights are the published checkpoint's.
func TestSlidingLayersHoldTheirWindow(t *testing.T) {
	cfg := mustParse(t, "openai/gpt-oss-120b", "-tp", "2", "--gpu", "H100-SXM")
	est, err := Estimate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 65,248,815,744 B published (model.safetensors.index.json), over 2 GPUs.
	if got, want := est.WeightsGiB*2, 65_248_815_744.0/GiB; math.Abs(got/want-1) > 0.03 {
		t.Errorf("weights %.2f GiB in all, want %.2f within 3%%", got, want)
	}
	// 18 full layers x 4 KV heads x 64 x 2 (K, V) x 2 B at TP2.
	if est.KVBytesPerTok != 18*4*64*2*2 {
		t.Errorf("KV per token per GPU %v B, want the 18 full layers' %v", est.KVBytesPerTok, 18*4*64*2*2)
	}
	c := newCore(cfg, est)
	for _, tt := range []struct{ n, want int }{
		{100, 7},     // a short request: all of its 100 tokens (7 blocks of 16)
		{1_000, 9},   // window 127 + a block of 16: 143 tokens, 9 blocks
		{100_000, 9}, // the same however long
		{131_072, 9},
	} {
		if got := c.boundedBlocks(tt.n); got != tt.want {
			t.Errorf("%d tokens: the sliding layers hold %d blocks, want %d", tt.n, got, tt.want)
		}
	}
	// SGLang keeps them in a pool of their own at 0.8 of the full pool's
	// tokens: each token of the pool costs 1.8 full layers' worth.
	sg := mustParse(t, "--model-path", "openai/gpt-oss-120b", "--tp-size", "2", "--gpu", "H100-SXM")
	if got, want := sg.kvPoolBytesPerToken(), 1.8*18*4*64*2*2; math.Abs(got-want) > 1e-6 {
		t.Errorf("SGLang pool bytes per token %v, want %v", got, want)
	}
	if sg.boundedKVBytes(100_000, 16) != 0 {
		t.Errorf("SGLang counts the windowed layers per request")
	}
}

// Decoding a long context costs gpt-oss's sliding layers their window
// only: the step at 32k tokens of context is cheaper than the same
// model with every layer full, and costs more than at 128 tokens.
func TestSlidingLayersAttendToTheirWindow(t *testing.T) {
	cfg := mustParse(t, "openai/gpt-oss-120b", "-tp", "2", "--gpu", "H100-SXM")
	full := cfg
	full.Model.SlidingLayers, full.Model.SlidingWindow = 0, 0
	step := func(c Config, ctx int) float64 {
		s := newStepModel(c)
		return s.stepSeconds(batchShape{tokens: 64, seqs: 64, sampled: 64, decodeCtx: float64(64 * ctx)})
	}
	long, longFull, short := step(cfg, 32768), step(full, 32768), step(cfg, 128)
	t.Logf("64 x 32k: %.2f ms (every layer full: %.2f ms); 64 x 128: %.2f ms", 1e3*long, 1e3*longFull, 1e3*short)
	if !(long < longFull && short < long) {
		t.Errorf("decode step %.3f ms at 32k (full layers: %.3f), %.3f ms at 128", 1e3*long, 1e3*longFull, 1e3*short)
	}
	// Half the layers attend to 128 tokens instead of 32k: the attention
	// part of the step is about halved.
	base := step(cfg, 1)
	if r := (long - base) / (longFull - base); r < 0.45 || r > 0.55 {
		t.Errorf("attention at 32k costs %.2f of the all-full model's, want about 0.5", r)
	}
}

// MiniMax-M2.5's QK norms span all 48 heads: under TP4 each layer
// all-reduces the tokens' query and key variances between two kernels
// of its own, which a one-token decode step pays in every layer; TP8
// is refused as vLLM refuses it (1536/8 = 192 is not whole 128-blocks),
// TP8 with expert parallelism is not.
func TestMiniMaxQKNormAllReduce(t *testing.T) {
	cfg := mustParse(t, "MiniMaxAI/MiniMax-M2.5", "-tp", "4", "--enable-expert-parallel", "--max-model-len", "16384", "--gpu", "H100-SXM")
	plain := cfg
	plain.Model.QKNormAllHeads = false
	b := batchShape{tokens: 1, seqs: 1, sampled: 1, decodeCtx: 1024}
	with, without := newStepModel(cfg), newStepModel(plain)
	extra := with.gpuSeconds(b) - without.gpuSeconds(b)
	want := 62 * (with.allReduce(8) + qkNormTPKernels*kernelOverhead.Seconds()*kernelClockScale(cfg.GPU))
	t.Logf("QK norm all-reduce: %.3f ms a decode step (62 layers)", 1e3*extra)
	if math.Abs(extra-want) > 1e-9 {
		t.Errorf("the QK norms add %.4f ms a step, want %.4f", 1e3*extra, 1e3*want)
	}
	if _, err := ParseArgs([]string{"MiniMaxAI/MiniMax-M2.5", "-tp", "8"}, nil); err == nil {
		t.Errorf("TP8 without expert parallelism accepted")
	}
	if _, err := ParseArgs([]string{"MiniMaxAI/MiniMax-M2.5", "-tp", "8", "--enable-expert-parallel", "--max-model-len", "16384"}, nil); err != nil {
		t.Errorf("TP8 with expert parallelism: %v", err)
	}
}

// NVFP4 as each engine runs it: natively on B200 (FP4 tensor cores);
// on H100 vLLM's Marlin weight-only FP4 at the W4A16 rate, while SGLang
// refuses with its own start-up message. The weights are 4.5 bits.
func TestNVFP4ByEngineAndGPU(t *testing.T) {
	v := mustParse(t, "meta-llama/Llama-3.3-70B-Instruct", "--quantization", "nvfp4", "--gpu", "H100-SXM", "--max-model-len", "8192")
	if v.Quantization != "modelopt_fp4" {
		t.Errorf("nvfp4 reads as %q, want the engines' modelopt_fp4", v.Quantization)
	}
	if got, want := v.weightsBytes(), v.Model.LinearParams()*4.5/8+v.Model.EmbeddingParams()*2; math.Abs(got-want) > 1 {
		t.Errorf("weights %.0f B, want %.0f (4.5 bits a linear weight)", got, want)
	}
	k := v.Constants.WithDefaults(v.Engine)
	if s := newStepModel(v); s.gemmRate != v.GPU.BF16TFLOPS*1e12*k.W4A16GEMMEfficiency {
		t.Errorf("vLLM on H100: GEMM rate %.0f TFLOPS, want Marlin's W4A16 rate", s.gemmRate/1e12)
	}
	b := mustParse(t, "meta-llama/Llama-3.3-70B-Instruct", "--quantization", "modelopt_fp4", "--gpu", "B200", "--max-model-len", "8192")
	if s := newStepModel(b); s.gemmRate != b.GPU.FP4TFLOPS*1e12*fp4GEMMEfficiency {
		t.Errorf("vLLM on B200: GEMM rate %.0f TFLOPS, want the FP4 tensor cores'", s.gemmRate/1e12)
	}
	_, err := ParseArgs([]string{"--model-path", "meta-llama/Llama-3.3-70B-Instruct", "--quantization", "nvfp4", "--gpu", "H100-SXM", "--context-length", "8192"}, nil)
	const msg = "The quantization method modelopt_fp4 is not supported for the current GPU. Minimum capability: 100. Current capability: 90."
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Errorf("SGLang NVFP4 on H100: %v, want %q", err, msg)
	}
	if _, err := ParseArgs([]string{"--model-path", "meta-llama/Llama-3.3-70B-Instruct", "--quantization", "nvfp4", "--gpu", "B200", "--context-length", "8192"}, nil); err != nil {
		t.Errorf("SGLang NVFP4 on B200: %v", err)
	}
	if _, err := ParseArgs([]string{"openai/gpt-oss-120b", "--quantization", "nvfp4"}, nil); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("NVFP4 over an MXFP4 checkpoint: %v", err)
	}
}

// Every NVIDIA GPU of the catalog without FP4 tensor cores has a compute
// capability for SGLang's NVFP4 refusal (no "unknown" in the message).
func TestComputeCapabilityOfCatalogGPUs(t *testing.T) {
	for _, g := range catalog.GPUs() {
		if g.HasFP4() || !strings.HasPrefix(g.Name, "NVIDIA") {
			continue
		}
		if c := computeCapability(g.ID); strings.HasPrefix(c, "unknown") {
			t.Errorf("%s: compute capability %s", g.ID, c)
		}
	}
}

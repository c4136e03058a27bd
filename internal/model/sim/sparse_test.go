package sim

import (
	"strings"
	"testing"
	"time"
)

// DeepSeek-V3.2's cache a token and layer: the latent and the indexer's
// 132-byte FP8 key; vLLM's "auto" is a BF16 latent (1,152 bytes), its
// fp8 the 656-byte fp8_ds_mla record; SGLang's "auto" is FP8 on
// Blackwell and BF16 on Hopper. Both page it in blocks of 64. Before
// Hopper the sparse kernels do not run.
func TestSparseAttentionKVCache(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		perLayer float64
	}{
		{[]string{"deepseek-ai/DeepSeek-V3.2", "-tp", "8", "--gpu", "H200", "--max-model-len", "32768"}, 1152 + 132},
		{[]string{"deepseek-ai/DeepSeek-V3.2", "-tp", "8", "--gpu", "H200", "--max-model-len", "32768", "--kv-cache-dtype", "fp8"}, 656 + 132},
		{[]string{"--model-path", "deepseek-ai/DeepSeek-V3.2", "--tp-size", "8", "--gpu", "H200", "--context-length", "32768"}, 1152 + 132},
		{[]string{"--model-path", "deepseek-ai/DeepSeek-V3.2", "--tp-size", "8", "--gpu", "B200", "--context-length", "32768"}, 656 + 132},
	} {
		cfg := mustParse(t, tt.args...)
		est, err := Estimate(cfg)
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if est.KVBytesPerTok != 61*tt.perLayer || est.BlockSize != 64 {
			t.Errorf("%q: %v bytes a token in blocks of %d, want 61 x %v in blocks of 64", tt.args, est.KVBytesPerTok, est.BlockSize, tt.perLayer)
		}
	}
	_, err := ParseArgs([]string{"deepseek-ai/DeepSeek-V3.2", "-tp", "8", "--gpu", "A100-80G"}, nil)
	if err == nil || !strings.Contains(err.Error(), "FLASHMLA_SPARSE") {
		t.Errorf("DeepSeek-V3.2 on A100: %v", err)
	}
}

// A decode step of DeepSeek-V3.2 attends to at most 2,048 latents a
// query: at 64k of context its attention costs a small share of
// DeepSeek-V3's (the same layers, dense), the indexer's FP8 scoring of
// every cached token on top; at 1k of context both attend to all of it
// and V3.2 pays for its indexer.
func TestSparseAttentionStepTime(t *testing.T) {
	v32 := mustParse(t, "deepseek-ai/DeepSeek-V3.2", "-tp", "8", "--gpu", "H200", "--max-model-len", "131072")
	v3 := mustParse(t, "deepseek-ai/DeepSeek-V3", "-tp", "8", "--gpu", "H200", "--max-model-len", "131072")
	decode := func(c Config, ctx int) (step, attn float64) {
		s := newStepModel(c)
		b := batchShape{tokens: 64, seqs: 64, decodes: 64, sampled: 64, decodeCtx: float64(64 * ctx)}
		return s.stepSeconds(b), s.attention(b)
	}
	long32, attn32 := decode(v32, 65536)
	long3, attn3 := decode(v3, 65536)
	short32, _ := decode(v32, 1024)
	short3, _ := decode(v3, 1024)
	t.Logf("64 x 64k: V3.2 %.1f ms (attention %.2f ms a layer), V3 %.1f ms (%.2f); 64 x 1k: %.1f and %.1f ms",
		1e3*long32, 1e3*attn32, 1e3*long3, 1e3*attn3, 1e3*short32, 1e3*short3)
	if !(attn32 < attn3/3 && long32 < long3 && short32 > short3) {
		t.Errorf("V3.2 against V3: %.1f/%.1f ms at 64k (attention %.3f/%.3f), %.1f/%.1f ms at 1k", 1e3*long32, 1e3*long3, 1e3*attn32, 1e3*attn3, 1e3*short32, 1e3*short3)
	}
	// The indexer scores every cached token: its share grows with the context.
	s := newStepModel(v32)
	at := func(ctx int) float64 {
		return s.sp.seconds(&s, batchShape{tokens: 64, seqs: 64, decodes: 64, decodeCtx: float64(64 * ctx)})
	}
	if r := at(65536) / at(8192); r < 7 || r > 9 {
		t.Errorf("indexer at 64k costs %.1fx its 8k, want about 8x", r)
	}
}

// Short runs of DeepSeek-V3.2 (FP8 on 8 H200) and GLM-5 (BF16 on 8
// B300) on both engines: every request served.
func TestSparseAttentionRun(t *testing.T) {
	for _, args := range [][]string{
		{"deepseek-ai/DeepSeek-V3.2", "-tp", "8", "--max-model-len", "16384", "--gpu", "H200"},
		{"--model-path", "deepseek-ai/DeepSeek-V3.2", "--tp-size", "8", "--context-length", "16384", "--gpu", "H200"},
		{"zai-org/GLM-5", "-tp", "8", "--max-model-len", "16384", "--gpu", "B300"},
		{"--model-path", "zai-org/GLM-5", "--tp-size", "8", "--context-length", "16384", "--gpu", "B300"},
	} {
		cfg := mustParse(t, args...)
		recs, err := RunVirtualSchedule(cfg, fixedReqs(24, 4000, 64), make([]time.Duration, 24), 8)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.Error != "" || r.OutputTokens != 64 {
				t.Fatalf("%q: record %d: %+v", args, i, r)
			}
		}
		ttft, tpot := recs[0].First-recs[0].Send, (recs[0].Last-recs[0].First)/63
		t.Logf("%s %s: TTFT %v, TPOT %v", cfg.Model.ID, cfg.Engine, ttft, tpot)
		if tpot < 5*time.Millisecond || tpot > 100*time.Millisecond {
			t.Errorf("%q: TPOT %v at 8 requests", args, tpot)
		}
	}
}

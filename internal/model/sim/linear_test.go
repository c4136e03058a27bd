package sim

import (
	"math"
	"testing"
	"time"
)

// Qwen3-Next's 36 Gated DeltaNet layers hold a constant state a request:
// under vLLM a TP4 rank's state in one layer is the convolution window
// (3 x 8,192/4 channels) and 8 heads of 128 x 128, in BF16: 274,432
// bytes, which an attention page of 272 tokens (17 x 16, at 1,024 bytes
// a token of its one KV head) holds; a request takes a page in each of
// the three groups of 12 linear layers, however long it is. SGLang
// keeps float32 states in a pool of their own, 0.9/1.9 of the memory it
// leaves for the caches, and runs a third as many requests as it holds.
func TestLinearAttentionState(t *testing.T) {
	cfg := mustParse(t, "Qwen/Qwen3-Next-80B-A3B-Instruct", "-tp", "4", "--max-model-len", "32768", "--gpu", "H100-SXM")
	if got := cfg.linearStateBytesPerLayer(); got != 3*8192/4*2+8*128*128*2 {
		t.Errorf("state a layer %v bytes, want 274,432", got)
	}
	if cfg.BlockSize != 272 {
		t.Errorf("block size %d, want 272", cfg.BlockSize)
	}
	est, err := Estimate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 12 full layers, one KV head of 256 at TP4, K and V in BF16.
	if est.KVBytesPerTok != 12*256*2*2 || est.LinearStateBytes != 36*274432 {
		t.Errorf("KV %v bytes a token, state %v bytes a request", est.KVBytesPerTok, est.LinearStateBytes)
	}
	c := newCore(cfg, est)
	if c.prefixCache {
		t.Errorf("a cached prefix is reused without the state at its end")
	}
	for _, n := range []int{1, 1000, 32768} {
		if got := c.boundedBlocks(n); got != 3 {
			t.Errorf("%d tokens: the states take %d blocks, want 3", n, got)
		}
	}
	sg := mustParse(t, "--model-path", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp-size", "4", "--context-length", "32768", "--gpu", "H100-SXM")
	sest, err := Estimate(sg)
	if err != nil {
		t.Fatal(err)
	}
	per := 36 * (3*8192/4*2 + 8*128*128*4.0)
	states := float64(sest.LinearStateSlots) * per
	t.Logf("SGLang TP4: %d states of %.1f MiB (%.2f GiB), KV pool %.2f GiB, max running %d",
		sest.LinearStateSlots, per/(1<<20), states/GiB, sest.KVCacheGiB, sest.MaxRunningRequests)
	if sest.LinearStateBytes != per || math.Abs(states/(sest.KVCacheGiB*GiB)-0.9) > 0.01 || sest.MaxRunningRequests != sest.LinearStateSlots/3 {
		t.Errorf("SGLang: %v bytes a state, states %.2f GiB against the KV pool's %.2f, max running %d of %d states",
			sest.LinearStateBytes, states/GiB, sest.KVCacheGiB, sest.MaxRunningRequests, sest.LinearStateSlots)
	}
	if _, err := ParseArgs([]string{"Qwen/Qwen3-Next-80B-A3B-Instruct", "-tp", "32"}, nil); err == nil {
		t.Errorf("TP32 splits 16 key heads")
	}
}

// A decode step of Qwen3-Next pays for the context in its 12 attention
// layers only: the linear layers read a constant state a request. The
// recurrence makes a bigger batch dearer whatever its context.
func TestLinearAttentionStepTime(t *testing.T) {
	cfg := mustParse(t, "Qwen/Qwen3-Next-80B-A3B-Instruct", "-tp", "4", "--max-model-len", "65536", "--gpu", "H100-SXM")
	full := cfg
	full.Model.Linear = nil // the same model with every layer attention
	full.BlockSize = 16
	step := func(c Config, bs, ctx int) float64 {
		s := newStepModel(c)
		return s.stepSeconds(batchShape{tokens: bs, seqs: bs, decodes: bs, sampled: bs, decodeCtx: float64(bs * ctx)})
	}
	short, long, longFull, baseFull := step(cfg, 64, 1024), step(cfg, 64, 32768), step(full, 64, 32768), step(full, 64, 1024)
	t.Logf("64 x 1k %.2f ms, 64 x 32k %.2f ms (every layer attention: %.2f, %.2f ms)", 1e3*short, 1e3*long, 1e3*baseFull, 1e3*longFull)
	// A quarter of the layers attend: the context's share of the step is a quarter.
	if r := (long - short) / (longFull - baseFull); r < 0.22 || r > 0.28 {
		t.Errorf("32k of context costs %.2f of the all-attention model's, want about 0.25", r)
	}
	s := newStepModel(cfg)
	one := s.lin.seconds(&s, batchShape{tokens: 1, seqs: 1, decodes: 1, decodeCtx: 1})
	many := s.lin.seconds(&s, batchShape{tokens: 64, seqs: 64, decodes: 64, decodeCtx: 64})
	if !(one > 0 && math.Abs(many/one-64) < 1) {
		t.Errorf("the recurrence of 64 requests costs %.1fx one's, want 64x (memory-bound)", many/one)
	}
	// A prefill of the same tokens costs its chunked scan.
	if p := s.lin.seconds(&s, prefillShape(0, 8192, true)); p <= 0 {
		t.Errorf("prefill recurrence %v", p)
	}
}

// A short run of Qwen3.5-397B-A17B on both engines: every request
// served, no prefix reused (the states at a prefix's end are not kept).
func TestLinearAttentionRun(t *testing.T) {
	for _, args := range [][]string{
		{"Qwen/Qwen3.5-397B-A17B", "-tp", "8", "--max-model-len", "16384", "--gpu", "H200"},
		{"--model-path", "Qwen/Qwen3.5-397B-A17B", "--tp-size", "8", "--context-length", "16384", "--gpu", "H200"},
	} {
		cfg := mustParse(t, args...)
		reqs := fixedReqs(32, 2000, 64)
		for i := range reqs {
			reqs[i].PrefixID, reqs[i].PrefixTokens = 0, 1024 // a shared system prompt
		}
		recs, err := RunVirtualSchedule(cfg, reqs, make([]time.Duration, len(reqs)), 16)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.Error != "" || r.OutputTokens != 64 {
				t.Fatalf("%s: record %d: %+v", cfg.Engine, i, r)
			}
		}
		ttft, tpot := recs[0].First-recs[0].Send, (recs[0].Last-recs[0].First)/63
		t.Logf("%s: TTFT %v, TPOT %v", cfg.Engine, ttft, tpot)
		if tpot < 5*time.Millisecond || tpot > 60*time.Millisecond {
			t.Errorf("%s: TPOT %v at 16 requests", cfg.Engine, tpot)
		}
	}
}

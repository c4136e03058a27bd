package sim

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

// phase sends reqs through v at concurrency c, all due at once.
func virtualPhase(v *Virtual, reqs []measure.Request, c int, warmup bool) []measure.Record {
	recs, _ := v.Send(context.Background(), measure.Phase{
		Count: len(reqs), MaxConcurrency: c, Warmup: warmup,
		Request: func(i int) measure.Request { return reqs[i] },
	})
	return recs
}

// TestVirtualEngineMetrics: the virtual engine reports, of each measured
// phase, what its /metrics would show: a cap of 8 running requests under
// 48 concurrent ones leaves 40 waiting with KV to spare; a cap of 256 does
// not queue them once the first prompts are in.
func TestVirtualEngineMetrics(t *testing.T) {
	reqs := fixedReqs(144, 1024, 128)
	for _, tc := range []struct {
		seqs                   string
		runPeak, waitPeakAtMin float64
		capped                 bool
	}{{"8", 8, 40, true}, {"256", 48, 0, false}} {
		v, err := NewVirtual(mustParse(t, "llama-3.1-8b", "--max-model-len", "4096", "--max-num-seqs", tc.seqs))
		if err != nil {
			t.Fatal(err)
		}
		if v.EngineMetrics() != nil {
			t.Fatal("metrics before any phase")
		}
		virtualPhase(v, reqs[:16], 48, true)
		if v.EngineMetrics() != nil {
			t.Fatal("a warm-up phase reported metrics")
		}
		recs := virtualPhase(v, reqs, 48, false)
		m := v.EngineMetrics()
		if m == nil || m.Source != "simulator" || m.Engine != "vllm" {
			t.Fatalf("max-num-seqs %s: %+v", tc.seqs, m)
		}
		t.Logf("max-num-seqs %s: running peak %v mean %.1f, waiting peak %v mean %.1f (%.0f%% of the time, %.1f running then), KV peak %.3f, TTFT server mean %.0f ms, queue %.0f ms",
			tc.seqs, m.NumRequestsRunningPeak, m.NumRequestsRunningMean, m.NumRequestsWaitingPeak, m.NumRequestsWaitingMean,
			100*m.WaitingShare, m.NumRequestsRunningWhenWaiting, m.KVCacheUsagePeak, m.TTFT.MeanMs, m.QueueTime.MeanMs)
		if m.NumRequestsRunningPeak != tc.runPeak || m.NumRequestsWaitingPeak < tc.waitPeakAtMin {
			t.Errorf("running peak %v (want %v), waiting peak %v", m.NumRequestsRunningPeak, tc.runPeak, m.NumRequestsWaitingPeak)
		}
		if m.KVCacheUsagePeak <= 0 || m.KVCacheUsagePeak > 0.5 || m.Preemptions != 0 {
			t.Errorf("KV peak %v, preemptions %v: 48 requests of 1152 tokens fit an H100's cache easily", m.KVCacheUsagePeak, m.Preemptions)
		}
		capped := m.WaitingShare > 0.5 && m.NumRequestsRunningWhenWaiting >= 0.9*m.NumRequestsRunningPeak
		if capped != tc.capped {
			t.Errorf("capped = %v, want %v", capped, tc.capped)
		}
		// Without a network, the client's TTFT is the engine's plus the
		// API server's front end, which the engine's own TTFT leaves out
		// (frontend_overhead_ms), as vLLM's does.
		sum := measure.Summarize(recs, measure.SummaryOptions{Bootstrap: 1})
		front := v.cfg.Constants.FrontendOverheadMs
		if d := m.TTFT.MeanMs + front - sum.TTFT.Mean; front <= 0 || d > 1e-6 || d < -1e-6 || m.TTFT.Count != 144 || !m.TTFT.Exact {
			t.Errorf("server TTFT %+v + front end %v ms, client mean %.3f", m.TTFT, front, sum.TTFT.Mean)
		}
		if m.ITL == nil || m.ITL.Count != 144*127 || m.GenerationTokens != 144*128 {
			t.Errorf("ITL %+v, generation tokens %v", m.ITL, m.GenerationTokens)
		}
	}
}

// TestVirtualEngineMetricsPreemptionsAndPrefixHits: a cache too small for
// the load preempts, and shared prefixes are hits.
func TestVirtualEngineMetricsPreemptionsAndPrefixHits(t *testing.T) {
	cfg, _ := smallKV(t)
	v, err := NewVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	virtualPhase(v, fixedReqs(64, 1000, 1000), 0, false)
	m := v.EngineMetrics()
	if m.Preemptions == 0 || m.KVCacheUsagePeak < 0.9 {
		t.Errorf("preemptions %v, KV peak %v: 64 × 2000 tokens overflow a 33k-token cache", m.Preemptions, m.KVCacheUsagePeak)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]measure.Request, 64)
	for i := range reqs {
		reqs[i] = measure.Request{Index: i, PromptTokens: 1024 + 64 + rng.IntN(64), MaxTokens: 8, PrefixID: i % 2, PrefixTokens: 1024}
	}
	virtualPhase(v, reqs, 4, false)
	m = v.EngineMetrics()
	if m.PrefixCacheHitRate == nil || *m.PrefixCacheHitRate < 0.8 {
		t.Errorf("prefix hit rate %v: 62 of 64 prompts share a cached 1024-token prefix", m.PrefixCacheHitRate)
	}
}

package whatif

import (
	"context"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/tuner/recommend"
)

// deepSeekQuestion is the large what-if question: DeepSeek-V3 over five
// GPU types up to 72 GPUs a replica, both deployment shapes, 10 req/s of
// 2,048-token prompts and 256-token answers.
func deepSeekQuestion() Options {
	return Options{
		Model: "deepseek-ai/DeepSeek-V3", GPUs: []string{"H200", "B200", "B300", "GB200", "MI355X"}, MaxGPUs: 72,
		Shapes:    []string{ShapeAggregated, ShapeDisaggregated},
		Dataset:   bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(2048), Output: fixed(256)},
		SLO:       recommend.SLO{{Metric: "ttft_p99", Max: 2000}, {Metric: "tpot_p99", Max: 50}},
		TargetRPS: 10, ReservedDiscount: 0.4,
	}
}

// BenchmarkWhatifCandidate is one candidate's study of the DeepSeek-V3
// question (12 trials, each a capacity search in virtual time): the unit
// Run spreads over its workers. The MoE candidates of 8 GPUs with and
// without data-parallel attention ranks stand for the rest.
func BenchmarkWhatifCandidate(b *testing.B) {
	for _, name := range []string{"GB200 x8 vllm TP8+EP8", "GB200 x64 vllm TP8xDP8+EP64"} {
		b.Run(name, func(b *testing.B) {
			o := deepSeekQuestion()
			m, gpus, err := o.normalize()
			if err != nil {
				b.Fatal(err)
			}
			cands := candidates(o, m, gpus)
			if err := checkFits(o, m, cands); err != nil {
				b.Fatal(err)
			}
			pruneBySLO(o, cands)
			var c *candidate
			for i := range cands {
				if cands[i].name() == name {
					c = &cands[i]
				}
			}
			if c == nil || c.anchor == nil {
				b.Fatalf("no candidate %s that fits", name)
			}
			for b.Loop() {
				row, err := searchCandidate(context.Background(), o, m, *c, func(string) {})
				if err != nil || !row.Fits {
					b.Fatal(err, row.Reason)
				}
				b.ReportMetric(row.CapacityRPS, "req/s")
			}
		})
	}
}

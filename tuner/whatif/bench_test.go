package whatif

import (
	"context"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/tuner/recommend"
)

// acceptance is the what-if issue's acceptance question: Llama-3.3-70B
// over five GPU types up to 8 GPUs, one engine, 20 req/s of 2,048-token
// prompts and 256-token answers (make whatif-bench runs the same from the
// command line).
func acceptance() Options {
	return Options{
		Model: "meta-llama/Llama-3.3-70B-Instruct", GPUs: []string{"H100-SXM", "H200", "B200", "L40S", "A100-80G"}, MaxGPUs: 8,
		Dataset:   bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(2048), Output: fixed(256)},
		SLO:       recommend.SLO{{Metric: "ttft_p99", Max: 2000}, {Metric: "tpot_p99", Max: 50}},
		TargetRPS: 20, ReservedDiscount: 0.4,
	}
}

// BenchmarkWhatifAcceptance reports the wall time of the acceptance
// question (the goal is under 60 s on a 2-core machine).
func BenchmarkWhatifAcceptance(b *testing.B) {
	for b.Loop() {
		rep, err := Run(context.Background(), acceptance())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.Wall.Seconds(), "wall-s")
		b.ReportMetric(float64(rep.TrialsRun), "trials")
	}
}

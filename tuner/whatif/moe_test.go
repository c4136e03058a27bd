package whatif

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/recommend"
)

// The shapes an MoE candidate compares, and none for a dense model or one
// GPU; each renders as both engines spell it.
func TestMoEShapes(t *testing.T) {
	moe, _, err := catalog.ResolveModel("Qwen/Qwen3-235B-A22B")
	if err != nil {
		t.Fatal(err)
	}
	dense, _, err := catalog.ResolveModel("meta-llama/Llama-3.3-70B-Instruct")
	if err != nil {
		t.Fatal(err)
	}
	names := func(ss []shape) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.String())
		}
		return strings.Join(out, " ")
	}
	if got, want := names(moeShapes(moe, 8)), "TP8 TP8+EP8 DP8+EP8 TP2xDP4+EP8 TP4xDP2+EP8"; got != want {
		t.Errorf("shapes of 8 GPUs: %s, want %s", got, want)
	}
	if got, want := names(moeShapes(moe, 2)), "TP2 TP2+EP2 DP2+EP2"; got != want {
		t.Errorf("shapes of 2 GPUs: %s, want %s", got, want)
	}
	if s := moeShapes(moe, 1); s != nil {
		t.Errorf("one GPU: %v, want none", s)
	}
	if s := moeShapes(dense, 8); s != nil {
		t.Errorf("dense model: %v, want none", s)
	}
	base := engine.Settings{"max_running_requests": 256}
	for _, tc := range []struct {
		sh     shape
		engine engine.Engine
		want   string
	}{
		{shape{tp: 8, dp: 1}, engine.VLLM, "--tensor-parallel-size 8 --max-num-seqs 256"},
		{shape{tp: 8, dp: 1, ep: true}, engine.SGLang, "--tp-size 8 --ep-size 8 --max-running-requests 256"},
		{shape{tp: 1, dp: 8, ep: true}, engine.VLLM, "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel --max-num-seqs 256"},
		{shape{tp: 2, dp: 4, ep: true}, engine.SGLang, "--tp-size 8 --dp-size 4 --ep-size 8 --enable-dp-attention --max-running-requests 256"},
	} {
		set := withLayout(base, 8, &tc.sh)
		got, err := engine.Render(tc.engine, set)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s on %s: %s, want %s", tc.sh, tc.engine, strings.Join(got, " "), tc.want)
		}
		if set.GPUs() != 8 {
			t.Errorf("%s: %d GPUs, want 8", tc.sh, set.GPUs())
		}
	}
}

// TestWhatifMoEExpertParallel: Qwen3-235B-A22B over H100, H200 and B200,
// long answers at high concurrency (512-token prompts and answers, a
// 100 ms TPOT bound): every MoE row names its shape, its settings and
// serve command carry the shape's layout, and on at least one GPU type
// the best row places the experts whole (expert_parallel) over
// data-parallel attention ranks (docs/reference.md, "Mixture of experts in
// what-if": DP attention keeps a whole KV cache per rank where TP8
// repeats the model's 4 KV heads on 8 GPUs, and EP keeps the expert
// weights per GPU at 1/8, so the KV cache holds more requests).
func TestWhatifMoEExpertParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("searches 39 candidates")
	}
	rep, err := Run(context.Background(), Options{
		Model: "Qwen/Qwen3-235B-A22B", GPUs: []string{"H100-SXM", "H200", "B200"}, MaxGPUs: 8,
		Dataset: bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(512), Output: fixed(512)},
		SLO:     recommend.SLO{{Metric: "ttft_p99", Max: 5000}, {Metric: "tpot_p99", Max: 100}},
		Trials:  2, RequestsPerLevel: 40, Precision: 0.1, ProbeSpan: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	best := map[string]Row{}
	for _, r := range rep.Rows {
		t.Logf("%2d %-28s cap %6.2f req/s, %5.0f tok/s/GPU, $%.3f/Mtok; %s", r.Rank, r.Name(), r.CapacityRPS, r.OutputTokensPerSPerGPU, r.CostPerMTok, r.Reason)
		if r.Shape == "" && r.GPUsPerReplica > 1 {
			t.Errorf("row %s of an MoE model without a shape", r.Name())
		}
		if r.Rank == 0 {
			continue
		}
		ep, _ := r.Settings.Bool("expert_parallel")
		if ep != r.ExpertParallel || r.ExpertParallel != strings.Contains(r.ServeCommand, "--enable-expert-parallel") {
			t.Errorf("%s: expert_parallel %v, settings %v, serve command %s", r.Name(), r.ExpertParallel, ep, r.ServeCommand)
		}
		if dp, _ := r.Settings.Int("data_parallel"); dp != r.DataParallel || (dp > 1) != strings.Contains(r.ServeCommand, "--data-parallel-size") {
			t.Errorf("%s: data_parallel %d, settings %d, serve command %s", r.Name(), r.DataParallel, dp, r.ServeCommand)
		}
		if _, ok := best[r.GPU]; !ok {
			best[r.GPU] = r // rows are ranked: the first of a GPU is its best
		}
	}
	won := false
	for g, r := range best {
		t.Logf("best on %s: %s: %s", g, r.Name(), r.ServeCommand)
		won = won || r.ExpertParallel
	}
	if !won {
		t.Errorf("expert parallelism wins on none of %d GPU types", len(best))
	}
}

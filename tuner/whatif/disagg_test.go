package whatif

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/tuner/recommend"
)

// llama70 is the disaggregation question: Llama-3.3-70B on H100 and H200,
// up to 8 GPUs, both shapes.
func llama70(input int, slo recommend.SLO) Options {
	return Options{
		Model: "meta-llama/Llama-3.3-70B-Instruct", GPUs: []string{"H100-SXM", "H200"}, MaxGPUs: 8,
		Dataset: bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(input), Output: fixed(500)},
		SLO:     slo, Shapes: []string{ShapeAggregated, ShapeDisaggregated},
	}
}

// TestWhatifDisaggregated: with 8,000-token prompts, 500-token answers and
// a 30 ms TPOT limit, each GPU type has a disaggregated row that serves,
// with its P:D split, each part's GPUs, settings and serve command (with
// the engine's KV connector), and the router's command; with 200-token
// prompts and a loose TTFT limit, an aggregated row ranks first.
func TestWhatifDisaggregated(t *testing.T) {
	rep, err := Run(context.Background(), llama70(8000, recommend.SLO{{Metric: "tpot_p99", Max: 30}}))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		t.Logf("%d %s %s: %.3g req/s, $%.2f/Mtok, TTFT p99 %.0f ms, TPOT p99 %.1f ms %s", r.Rank, r.Deployment, r.Name(), r.CapacityRPS, r.CostPerMTok, r.TTFTP99, r.TPOTP99, r.Reason)
		if r.Deployment == "" {
			t.Errorf("row %s: no deployment though both shapes were asked for", r.Name())
		}
		if r.Deployment != ShapeDisaggregated || r.Rank == 0 {
			continue
		}
		seen[r.GPU] = true
		p, d := r.Prefill, r.Decode
		if p == nil || d == nil || p.Replicas < 1 || d.Replicas < 1 || p.GPUs+d.GPUs != r.GPUsPerReplica || r.GPUsPerReplica > 8 {
			t.Fatalf("row %s: parts %+v %+v, %d GPUs", r.Name(), p, d, r.GPUsPerReplica)
		}
		if !strings.HasPrefix(r.Shape, "P") || !strings.Contains(r.Shape, ":D") {
			t.Errorf("row %s: shape %q is no P:D split", r.Name(), r.Shape)
		}
		for _, c := range []string{p.ServeCommand, d.ServeCommand} {
			if !strings.Contains(c, "vllm serve") || !strings.Contains(c, "--kv-transfer-config") || !strings.Contains(c, "--tensor-parallel-size") {
				t.Errorf("row %s: part command %q", r.Name(), c)
			}
		}
		if tp, _ := p.Settings.Int("tensor_parallel"); tp*p.Replicas != p.GPUs {
			t.Errorf("row %s: prefill settings %v on %d GPUs", r.Name(), p.Settings, p.GPUs)
		}
		if !strings.HasPrefix(r.RouterCommand, "vllm-router --vllm-pd-disaggregation") || !strings.Contains(r.RouterCommand, "--prefill PREFILL_0_URL") || r.KVLink != "nvlink" {
			t.Errorf("row %s: router %q, link %q", r.Name(), r.RouterCommand, r.KVLink)
		}
		b, _ := json.Marshal(r)
		var js map[string]any
		_ = json.Unmarshal(b, &js)
		for _, k := range []string{"deployment", "shape", "prefill", "decode", "router_command"} {
			if js[k] == nil {
				t.Errorf("row %s: JSON without %s", r.Name(), k)
			}
		}
	}
	if !seen["H100-SXM"] || !seen["H200"] {
		t.Errorf("disaggregated rows that serve on %v; want both GPU types", seen)
	}
	if v := rep.Verdict(); !strings.Contains(v, "wins for this workload and SLO") {
		t.Errorf("verdict %q", v)
	}

	rep, err = Run(context.Background(), llama70(200, recommend.SLO{{Metric: "ttft_p99", Max: 10000}, {Metric: "tpot_p99", Max: 30}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Rows[0]; r.Deployment != ShapeAggregated || r.Rank != 1 || !strings.HasPrefix(rep.Verdict(), "aggregated wins") {
		t.Errorf("200-token prompts: first row %s (%s), verdict %q; want aggregated", r.Name(), r.Deployment, rep.Verdict())
	}
	if !strings.Contains(rep.Verdict(), ShapeDisaggregated+"'s best") {
		t.Errorf("verdict %q names no disaggregated row", rep.Verdict())
	}
}

// TestWhatifShapesInput: the shapes and the link are checked; without
// --shapes no row is disaggregated and none names a deployment.
func TestWhatifShapesInput(t *testing.T) {
	for _, o := range []Options{
		func() Options { o := small(); o.Shapes = []string{"mixed"}; return o }(),
		func() Options { o := small(); o.KVLink = "carrier-pigeon"; return o }(),
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrInput) {
			t.Errorf("%v %q: %v, want a bad input", o.Shapes, o.KVLink, err)
		}
	}
	o := small()
	o.MaxGPUs, o.GPUs = 1, []string{"H100-SXM"}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Deployment != "" || r.Prefill != nil {
			t.Errorf("row %s: deployment %q without --shapes", r.Name(), r.Deployment)
		}
	}
	o.Shapes = []string{ShapeDisaggregated}
	if _, err := Run(context.Background(), o); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "at least 2 GPUs") {
		t.Errorf("disaggregated on one GPU: %v", err)
	}
}

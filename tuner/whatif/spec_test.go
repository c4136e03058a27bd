package whatif

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/tuner/recommend"
)

// latency is a small-batch latency question: Llama-3.1-8B on one or two
// H100s, long answers, and a TPOT limit below what one H100 decodes a
// lone request at without speculation (about 6.5 ms a token) but within
// what drafts accepted at 0.8 reach.
func latency() Options {
	return Options{
		Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []string{"H100-SXM"}, MaxGPUs: 2,
		Dataset: bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(128), Output: fixed(256)},
		SLO:     recommend.SLO{{Metric: "ttft_p99", Max: 1000}, {Metric: "tpot_p99", Max: 5}},
		Trials:  4, RequestsPerLevel: 40, Precision: 0.1, ReservedDiscount: 0.4,
	}
}

// TestSpeculationWinsAtSmallBatch runs the same question without and with
// speculative decoding offered: without, no row names it or prints it;
// with, the rows that serve take it, name it, print vLLM's
// --speculative-config, and rank above every row without it.
func TestSpeculationWinsAtSmallBatch(t *testing.T) {
	plain, err := Run(context.Background(), latency())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plain.Rows {
		t.Logf("plain: %d %s cap %.3g req/s TPOT p99 %.2f ms; %s", r.Rank, r.Name(), r.CapacityRPS, r.TPOTP99, r.Reason)
		if r.Speculative != "" || strings.Contains(r.ServeCommand, "speculative") || r.Settings["spec_method"] != nil {
			t.Errorf("without Spec, row %s speculates: %q %q", r.Name(), r.Speculative, r.ServeCommand)
		}
	}
	o := latency()
	o.Spec = &Speculation{Acceptance: 0.8, Draft: "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ranked, seenPlain := 0, false
	for _, r := range rep.Rows {
		t.Logf("spec: %d %s cap %.3g req/s TPOT p99 %.2f ms; %s; %s", r.Rank, r.Name(), r.CapacityRPS, r.TPOTP99, r.Reason, r.ServeCommand)
		if r.Rank == 0 {
			continue
		}
		ranked++
		if r.Speculative == "" {
			seenPlain = true
			continue
		}
		if seenPlain {
			t.Errorf("speculative row %s ranked %d below a plain one", r.Name(), r.Rank)
		}
		if r.Speculative != "eagle3 k=3 a=0.8" || !strings.HasSuffix(r.Name(), "+eagle3") {
			t.Errorf("row %s names its speculation %q", r.Name(), r.Speculative)
		}
		if !strings.Contains(r.ServeCommand, `--speculative-config '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}'`) ||
			strings.Contains(r.ServeCommand, "acceptance") {
			t.Errorf("row %s serve command %q", r.Name(), r.ServeCommand)
		}
	}
	if ranked == 0 || rep.Rows[0].Speculative == "" {
		t.Errorf("no speculative row serves the latency SLO first (%d ranked)", ranked)
	}
}

func TestSpeculationRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		s    Speculation
		want string
	}{
		{Speculation{Acceptance: 1.5, Draft: "d"}, "--spec-acceptance 1.5"},
		{Speculation{Acceptance: 0.7}, "needs --spec-draft"},
		{Speculation{Acceptance: 0.7, Method: "medusa"}, `--spec-method "medusa"`},
		{Speculation{Acceptance: 0.7, Method: "ngram", Tokens: -1}, "--spec-tokens -1"},
	} {
		o := latency()
		o.Spec = &tt.s
		_, err := Run(context.Background(), o)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err %v, want %q", tt.s, err, tt.want)
		}
	}
}

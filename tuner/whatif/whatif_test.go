package whatif

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/recommend"
)

func fixed(n int) bench.Dist { return bench.Dist{Kind: bench.DistFixed, Value: n} }

// small is a quick question: Llama-3.1-8B on H100 and L4, up to 2 GPUs.
func small() Options {
	return Options{
		Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []string{"H100-SXM", "L4"}, MaxGPUs: 2,
		Dataset:   bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(512), Output: fixed(64)},
		SLO:       recommend.SLO{{Metric: "ttft_p99", Max: 1000}, {Metric: "tpot_p99", Max: 40}},
		TargetRPS: 30, ReservedDiscount: 0.4, Trials: 4, RequestsPerLevel: 60, Precision: 0.1,
		Prices: map[string]float64{"L4": 0.7}, PriceDate: "2026-02-01",
	}
}

// TestRunSmall checks a whole answer: every candidate has a row; rows
// that serve are costed from their capacity and the prices used, ranked
// by $/month, carry a serve command and an error band; the JSON has the
// keys users script against.
func TestRunSmall(t *testing.T) {
	rep, err := Run(context.Background(), small())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 || rep.Candidates != 4 {
		t.Fatalf("%d rows for %d candidates, want 4", len(rep.Rows), rep.Candidates)
	}
	if p := rep.Prices["L4"]; p.PerGPUHour != 0.7 || p.Date != "2026-02-01" || !strings.Contains(p.Source, "--price") {
		t.Errorf("L4 price %+v: want the given one", p)
	}
	if p := rep.Prices["H100-SXM"]; p.PerGPUHour != 2.95 || p.Date == "" || !strings.Contains(p.Source, "catalog") {
		t.Errorf("H100 price %+v: want the catalog's, dated", p)
	}
	prev := 0.0
	for i, r := range rep.Rows {
		t.Logf("%d %-16s cap %.2f req/s, %d replicas (+%.0f%%), $%.0f/month, $%.3f/Mtok, ±%.0f%% %s ties %v; %s",
			r.Rank, r.Name(), r.CapacityRPS, r.Replicas, 100*r.Headroom, r.MonthlyCost, r.CostPerMTok, 100*r.ErrorBand, r.Regime, r.TiesWith, r.Reason)
		if r.Rank == 0 {
			if r.Reason == "" {
				t.Errorf("row %s neither ranked nor explained", r.Name())
			}
			continue
		}
		if r.Rank != i+1 || r.MonthlyCost < prev {
			t.Errorf("row %d (%s) ranked %d at $%.0f after $%.0f", i, r.Name(), r.Rank, r.MonthlyCost, prev)
		}
		prev = r.MonthlyCost
		price := rep.Prices[r.GPU].PerGPUHour
		if want := float64(r.Replicas*r.GPUsPerReplica) * price * HoursPerMonth; math.Abs(r.MonthlyCost-want) > 0.01 {
			t.Errorf("%s: $%.2f/month, want replicas x GPUs x price x %d h = $%.2f", r.Name(), r.MonthlyCost, HoursPerMonth, want)
		}
		if math.Abs(r.MonthlyCostReserved-0.6*r.MonthlyCost) > 0.01 {
			t.Errorf("%s: reserved $%.2f, want 60%% of $%.2f", r.Name(), r.MonthlyCostReserved, r.MonthlyCost)
		}
		if float64(r.Replicas)*r.CapacityRPS < 30 || float64(r.Replicas-1)*r.CapacityRPS >= 30 {
			t.Errorf("%s: %d replicas of %.2f req/s for 30 req/s", r.Name(), r.Replicas, r.CapacityRPS)
		}
		if r.TTFTP99 > 1000 || r.TPOTP99 > 40 {
			t.Errorf("%s: p99 TTFT %.0f ms, TPOT %.1f ms at capacity: past the SLOs", r.Name(), r.TTFTP99, r.TPOTP99)
		}
		if !strings.HasPrefix(r.ServeCommand, "vllm serve meta-llama/Llama-3.1-8B-Instruct") || !(r.ErrorBand > 0) || r.BandBasis == "" {
			t.Errorf("%s: serve command %q, band %v %q", r.Name(), r.ServeCommand, r.ErrorBand, r.BandBasis)
		}
		if tp, _ := r.Settings.Int("tensor_parallel"); tp*max(1, intOr(r.Settings, "pipeline_parallel"))*max(1, intOr(r.Settings, "data_parallel")) != r.GPUsPerReplica {
			t.Errorf("%s: settings %v do not fill %d GPUs", r.Name(), r.Settings, r.GPUsPerReplica)
		}
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rows", "prices", "calibration"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	row := doc["rows"].([]any)[0].(map[string]any)
	for _, k := range []string{"gpu", "gpus_per_replica", "engine", "settings", "capacity_rps", "output_tokens_per_s_per_gpu",
		"ttft_p99_ms", "tpot_p99_ms", "replicas", "monthly_cost", "cost_per_mtok", "serve_command", "error_band"} {
		if _, ok := row[k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
	// Deterministic: the same question gives the same answer.
	again, err := Run(context.Background(), small())
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Rows {
		a, b := rep.Rows[i], again.Rows[i]
		if a.Name() != b.Name() || a.CapacityRPS != b.CapacityRPS || a.ServeCommand != b.ServeCommand {
			t.Errorf("run 2 row %d: %s %.3f %q; run 1: %s %.3f %q", i, b.Name(), b.CapacityRPS, b.ServeCommand, a.Name(), a.CapacityRPS, a.ServeCommand)
		}
	}
}

func intOr(s engine.Settings, name string) int {
	v, _ := s.Int(name)
	return v
}

// TestRowsThatCannotServe: a 70B model in BF16 on L4s fits on none of
// them (bad input); on H100s the single GPU says why it does not fit.
func TestRowsThatCannotServe(t *testing.T) {
	o := small()
	o.Model, o.GPUs = "meta-llama/Llama-3.3-70B-Instruct", []string{"L4"}
	_, err := Run(context.Background(), o)
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "fits on none") || !strings.Contains(err.Error(), "weights > memory") {
		t.Errorf("70B on L4 x1..2: %v", err)
	}
	o.GPUs, o.MaxGPUs, o.Trials = []string{"H100-SXM"}, 2, 2
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.GPUsPerReplica == 1 && (r.Fits || !strings.Contains(r.Reason, "weights > memory: 131.4 GiB")) {
			t.Errorf("70B on one H100: fits %v, %q", r.Fits, r.Reason)
		}
	}
	o.MaxModelLen = 100000
	o.GPUs, o.MaxGPUs = []string{"H100-SXM"}, 2
	o.KVCacheDTypes = []string{"auto"}
	if _, err := Run(context.Background(), o); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "KV cache too small for max-model-len") {
		t.Errorf("100k context on 2 H100: %v", err)
	}
}

// TestBadOptions: each is an input error naming the problem.
func TestBadOptions(t *testing.T) {
	dir := t.TempDir()
	prof := sim.Profile{Version: 1, GPU: "H200", Engine: engine.VLLM, Constants: sim.StockConstants(engine.VLLM)}
	path := filepath.Join(dir, "h200.json")
	if err := prof.Save(path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"unknown GPU", func(o *Options) { o.GPUs = []string{"Z80"} }, `GPU "Z80"`},
		{"unknown model", func(o *Options) { o.Model = "acme/none" }, "not in the catalog"},
		{"no SLO", func(o *Options) { o.SLO = nil }, "--slo"},
		{"profile elsewhere", func(o *Options) { o.Calibrations = []Calibration{{path, prof}} }, "measured on H200"},
		{"bad quantization", func(o *Options) { o.Quantizations = []string{"int3"} }, "int3"},
		{"context past the model", func(o *Options) { o.MaxModelLen = 1 << 20 }, "positions"},
		{"absurd target", func(o *Options) { o.TargetRPS = 1e300 }, "--target-rps 1e+300"},
		{"infinite target", func(o *Options) { o.TargetRPS = math.Inf(1) }, "--target-rps"},
		{"model the simulator cannot cost", func(o *Options) { o.Model = "../../internal/serving/catalog/testdata/jamba-1.5-mini.json" }, "mamba_d_state"},
	} {
		o := small()
		tc.edit(&o)
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestRankAndTies: rows rank by cost; a row whose cost range over its
// error band overlaps a better row's ties with it.
func TestRankAndTies(t *testing.T) {
	row := func(gpu string, capacity, band float64, replicas int, cost float64) Row {
		return Row{GPU: gpu, GPUsPerReplica: 1, Engine: engine.VLLM, Fits: true, CapacityRPS: capacity,
			ErrorBand: band, Replicas: replicas, MonthlyCost: cost}
	}
	rows := []Row{
		row("C", 2, 0.1, 10, 3000),   // 10 x 300
		row("A", 5, 0.1, 4, 2000),    // 4 x 500; at +-10% 4..5 replicas: $2000-2500
		row("B", 10.5, 0.3, 2, 2200), // 2 x 1100; at +-30% 2..3 replicas: $2200-3300: overlaps A
		{GPU: "D", GPUsPerReplica: 1, Engine: engine.VLLM, Reason: "weights > memory"},
	}
	rank(rows, 20)
	var got []string
	for _, r := range rows {
		got = append(got, r.GPU)
	}
	if strings.Join(got, "") != "ABCD" || rows[3].Rank != 0 {
		t.Fatalf("order %v, last rank %d", got, rows[3].Rank)
	}
	if len(rows[1].TiesWith) != 1 || rows[1].TiesWith[0] != "A x1 vllm" {
		t.Errorf("B ties with %v, want A", rows[1].TiesWith)
	}
	if len(rows[2].TiesWith) != 1 || rows[2].TiesWith[0] != "B x1 vllm" {
		t.Errorf("C ties with %v, want only B", rows[2].TiesWith)
	}
	rep := &Report{Rows: rows}
	if ties := rep.Ties(); len(ties) != 2 || ties[1].GPU != "B" {
		t.Errorf("Ties() = %v, want A and B", ties)
	}
	// The decision: A is best, B within its error, C apart; D does not fit.
	d, ok := rep.Decide()
	if !ok || d.Best.GPU != "A" || len(d.Tied) != 1 || d.Tied[0].GPU != "B" || d.Separable != 1 || d.Fitting != 3 {
		t.Errorf("Decide() = %+v, %v; want best A, B tied, 1 of 2 others separable, 3 fitting", d, ok)
	}
	if _, ok := (&Report{Rows: rows[3:]}).Decide(); ok {
		t.Error("Decide() on rows none of which fit: ok")
	}
}

// TestModelDirAndCalibration: a model known only by its config.json (a
// directory, as vLLM's --model DIR) is served from that directory; a
// calibration profile applies to its GPU's rows, whose error band is then
// the profile's own fit error.
func TestModelDirAndCalibration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-8b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
		"intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prof := sim.Profile{Version: 1, GPU: "H100-SXM", Engine: engine.VLLM, EngineVersion: "v0.11.0",
		Constants: sim.StockConstants(engine.VLLM), Errors: []sim.MetricError{{Metric: "ttft_p99", MaxAfter: 0.07}, {Metric: "tpot_p99", MaxAfter: 0.03}}}
	prof.Constants.HBMEfficiency, prof.Constants.BF16GEMMEfficiency = 0.5, 0.45
	path := filepath.Join(t.TempDir(), "h100.json")
	if err := prof.Save(path); err != nil {
		t.Fatal(err)
	}
	o := small()
	o.Model, o.MaxGPUs = dir, 1
	o.Calibrations = []Calibration{{path, prof}}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	stock, err := Run(context.Background(), func() Options { o := small(); o.Model, o.MaxGPUs = dir, 1; return o }())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Rows {
		t.Logf("%s: %.2f req/s (stock constants %.2f), ±%.0f%% %s, %s", r.Name(), r.CapacityRPS, stock.Rows[i].CapacityRPS, 100*r.ErrorBand, r.BandBasis, r.ServeCommand)
		if r.Rank > 0 && !strings.HasPrefix(r.ServeCommand, "vllm serve "+dir+" ") {
			t.Errorf("%s: serve command %q does not serve the directory", r.Name(), r.ServeCommand)
		}
		switch r.GPU {
		case "H100-SXM":
			if r.Calibration != path || r.ErrorBand > 0.07 || !strings.Contains(r.BandBasis, "calibrated") {
				t.Errorf("H100 row: calibration %q, band %v (%s)", r.Calibration, r.ErrorBand, r.BandBasis)
			}
			if !(r.CapacityRPS < stock.Rows[i].CapacityRPS) {
				t.Errorf("H100 at half its stock efficiencies serves %.2f req/s, stock %.2f: want less", r.CapacityRPS, stock.Rows[i].CapacityRPS)
			}
		default:
			if r.Calibration != "" {
				t.Errorf("%s row uses the H100 profile", r.Name())
			}
		}
	}
	if rep.Calibration == nil {
		t.Error("report names no calibration")
	}
}

// TestCapacityIndependentOfTarget: a row's capacity is the candidate's
// alone: a target 1,000 times a candidate's capacity must not put the
// search's floor above it ("cannot serve"), nor an absurd one its ceiling
// past any rate.
func TestCapacityIndependentOfTarget(t *testing.T) {
	var caps []float64
	for _, target := range []float64{30, 100_000} {
		o := small()
		o.GPUs, o.MaxGPUs, o.TargetRPS = []string{"H100-SXM"}, 1, target
		o.MaxReplicas = 1_000_000 // the replica limit is TestUnusableRows's subject
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 1 || rep.Rows[0].Rank != 1 {
			t.Fatalf("target %g: rows %+v, want one ranked", target, rep.Rows)
		}
		caps = append(caps, rep.Rows[0].CapacityRPS)
	}
	if caps[0] != caps[1] {
		t.Errorf("capacity %.2f req/s at target 30, %.2f at target 100000: want the same", caps[0], caps[1])
	}
}

// TestUnusableRows: a row that serves the target only with more replicas
// or money than the question allows is marked unusable and not ranked;
// the verdict writes money as the table does.
func TestUnusableRows(t *testing.T) {
	o := Options{TargetRPS: 100, MaxReplicas: 100, MaxMonthlyCost: 200000}
	rows := []Row{
		{GPU: "A", GPUsPerReplica: 1, Engine: engine.VLLM, Fits: true, CapacityRPS: 0.1, Replicas: 966, MonthlyCost: 3349605},
		{GPU: "B", GPUsPerReplica: 8, Engine: engine.VLLM, Fits: true, CapacityRPS: 2, Replicas: 50, MonthlyCost: 250000},
		{GPU: "C", GPUsPerReplica: 8, Engine: engine.VLLM, Fits: true, CapacityRPS: 5, Replicas: 20, MonthlyCost: 51684.2, Deployment: ShapeAggregated},
		{GPU: "D", GPUsPerReplica: 8, Engine: engine.VLLM, Fits: true, CapacityRPS: 4, Replicas: 25, MonthlyCost: 60000, Deployment: ShapeDisaggregated},
	}
	for i := range rows {
		rows[i].limit(o)
	}
	rank(rows, o.TargetRPS)
	byGPU := map[string]Row{}
	for _, r := range rows {
		byGPU[r.GPU] = r
	}
	if r := byGPU["A"]; r.Rank != 0 || !strings.Contains(r.Unusable, "966 replicas") {
		t.Errorf("A: rank %d, unusable %q; want unranked, 966 replicas named", r.Rank, r.Unusable)
	}
	if r := byGPU["B"]; r.Rank != 0 || !strings.Contains(r.Unusable, "$250,000/month") {
		t.Errorf("B: rank %d, unusable %q; want unranked past the cost limit", r.Rank, r.Unusable)
	}
	if byGPU["C"].Rank != 1 || byGPU["D"].Rank != 2 {
		t.Errorf("C, D ranks %d, %d; want 1, 2", byGPU["C"].Rank, byGPU["D"].Rank)
	}
	v := (&Report{Rows: rows, TargetRPS: 100}).Verdict()
	if !strings.Contains(v, "$51,684/month") || !strings.Contains(v, "$60,000/month") || strings.Contains(v, "e+") {
		t.Errorf("verdict %q: want $51,684/month and $60,000/month", v)
	}
}

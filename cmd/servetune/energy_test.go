package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/store"
)

// TestEnergyShown: levels that carry NVML figures (as process and Docker
// trials on a GPU host store them) show tokens per joule and energy in
// `trials` and `pareto`, and in their JSON; levels without them show none.
func TestEnergyShown(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "e.db")
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	spec := `name: energy
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [8, 64]}
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [16]}
slo: {ttft_p99_ms: 5000}
objectives: [max output_throughput_per_gpu, max tokens_per_user]
`
	st, err := db.CreateStudy(ctx, store.Study{Name: "energy", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	for n, mrr := range []int{8, 64} {
		if err := db.StartTrial(ctx, st.ID, n, engine.Settings{"max_running_requests": mrr}, []int{0}); err != nil {
			t.Fatal(err)
		}
		sum := measure.Summary{Completed: 100, OutputThroughput: 1000 * float64(n+1), RequestThroughput: 5, RequestGoodput: 5,
			TotalOutputTokens: 3200, TTFT: measure.Stats{N: 100, P99: 100}, TPOT: measure.Stats{N: 100, Median: 10 + float64(10*(1-n)), P99: 20}}
		if n == 1 {
			sum.GPU = &measure.GPUUsage{GPUs: 1, Samples: 10, EnergyJ: 1600, OutputTokensPerJoule: 2, MeanPowerW: 400, MeanUtilPct: 90}
		}
		obj := sum.OutputThroughput
		if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: n, Status: measure.StatusOK, Objective: &obj,
			LoadPoints: []measure.Level{measure.NewLevel(measure.Load{MaxConcurrency: 16}, sum, nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	code, out, errs := runIn("trials", "energy", "--db", dbPath)
	if code != exitOK {
		t.Fatalf("trials: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "BEST TOK/J") || !strings.Contains(out, "ENERGY (J)") {
		t.Fatalf("trials lacks the energy columns:\n%s", out)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(rows[1]); f[4] != "-" || f[5] != "-" { // (the empty CONFIRMS column has no field)
		t.Errorf("trial 0 has no GPU figures, shows %q", rows[1])
	}
	if f := strings.Fields(rows[2]); f[4] != "2" || f[5] != "1600" {
		t.Errorf("trial 1: %q", rows[2])
	}
	code, out, _ = runIn("pareto", "energy", "--db", dbPath)
	if code != exitOK || !strings.Contains(out, "TOK/J") {
		t.Errorf("pareto: exit %d\n%s", code, out)
	}
	code, out, _ = runIn("pareto", "energy", "--json", "-", "--db", dbPath)
	if code != exitOK || !strings.Contains(out, `"output_tokens_per_joule": 2`) {
		t.Errorf("pareto --json: exit %d\n%s", code, out)
	}
	code, out, _ = runIn("trials", "energy", "--json", "-", "--db", dbPath)
	if code != exitOK || !strings.Contains(out, `"energy_j": 1600`) || strings.Count(out, `"gpu":`) != 1 {
		t.Errorf("trials --json: exit %d\n%s", code, out)
	}
}

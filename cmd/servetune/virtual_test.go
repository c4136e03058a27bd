package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/store"
)

// virtualStudy is one fixed configuration measured at one load level in
// virtual time.
const virtualStudy = `name: same
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: 32
  gpu_memory_fraction: 0.9
  max_model_len: 4096
workload:
  dataset: {kind: random, input: {lognormal: {median: 256, sigma: 0.5}}, output: {uniform: [32, 96]}}
  load: {concurrency: [8]}
  requests_per_level: 100
  warmup: 4
slo: {ttft_p99_ms: 500, tpot_p99_ms: 50}
tuner: {sampler: grid, trials: 1, seed: 1, confirm: false}
`

// TestSimRunMatchesVirtualStudy: `servetune sim run` and a study with
// `launcher: {kind: virtual}` go through the same path (bench.Run over the
// simulator's virtual clock), so the same settings, workload and seed give
// the same summary. Trial 0 of a study seeded 1 measures its first level
// with seed 1 (every search trial measures the same workload).
func TestSimRunMatchesVirtualStudy(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	if code, _, errs := runCLI(t, "tune", writeSpec(t, virtualStudy), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	if run, stored := simRunAndStudy(t, dir, db, "1"); !reflect.DeepEqual(run, stored) {
		t.Errorf("summaries differ:\nsim run %+v\nstudy   %+v", run, stored)
	}
	// The comparison can fail: another seed is another workload.
	if run, stored := simRunAndStudy(t, dir, db, "7"); reflect.DeepEqual(run, stored) {
		t.Error("seed 7 gave the study's summary")
	}
}

// simRunAndStudy returns the summary `sim run --seed seed` writes and the
// study's stored one, without meta, samples and date.
func simRunAndStudy(t *testing.T, dir, db, seed string) (measure.Summary, measure.Summary) {
	out := filepath.Join(dir, "run.json")
	code, _, errs := runCLI(t, "sim", "run", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM",
		"--max-num-seqs", "32", "--gpu-memory-utilization", "0.9", "--max-model-len", "4096",
		"--input-dist", "lognormal:median=256,sigma=0.5", "--output-dist", "uniform:32,96", "--max-concurrency", "8", "--num-requests", "100", "--warmup", "4",
		"--goodput", "ttft:500,tpot:50", "--seed", seed, "--json", out)
	if code != exitOK {
		t.Fatalf("sim run: exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var run measure.Summary
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatal(err)
	}

	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.GetStudy(context.Background(), "same")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := s.Trials(context.Background(), st.ID)
	if err != nil || len(trials) != 1 || len(trials[0].LoadPoints) != 1 {
		t.Fatalf("trials %+v, %v", trials, err)
	}
	stored := trials[0].LoadPoints[0].Summary
	// Date is the wall clock's second at the start: the two runs straddle
	// a second now and then, and it is no measured figure.
	for _, sum := range []*measure.Summary{&run, &stored} {
		sum.Meta, sum.Samples, sum.Detail, sum.Date = nil, nil, nil, ""
	}
	if stored.Completed != 100 {
		t.Fatalf("study completed %d", stored.Completed)
	}
	return run, stored
}

// virtualDisagg is examples/disagg-sim.yaml's question in virtual time:
// the virtual kind runs a disaggregated configuration itself (no router).
const virtualDisagg = `name: vdisagg
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0, 1, 2, 3]}
hardware: {gpu: H100-SXM}
space:
  disaggregated: [false, true]
  prefill_replicas: 1
  decode_replicas: 1
  tensor_parallel: 1
  max_running_requests: 128
disaggregation:
  router: ["{servetune}", sim, router, --port, "{port}", --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}",
           --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]
  kv_link: ethernet
workload:
  dataset: {kind: random, input: 6000, output: 200}
  load: {rate: [3]}
  requests_per_level: 80
slo: {tpot_p99_ms: 100}
tuner: {sampler: grid, trials: 2, seed: 1, confirm: false}
`

// TestVirtualDisaggregatedStudy: a study whose space holds both shapes
// runs each trial in virtual time; the disaggregated one, with long
// prompts arriving as the others decode, has the shorter TPOT (its decode
// engine never prefills) and a TTFT that holds the KV's transfer.
func TestVirtualDisaggregatedStudy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	if code, _, errs := runCLI(t, "tune", writeSpec(t, virtualDisagg), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.GetStudy(context.Background(), "vdisagg")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := s.Trials(context.Background(), st.ID)
	if err != nil {
		t.Fatal(err)
	}
	tpot := map[bool]float64{}
	for _, tr := range trials {
		if tr.Status != measure.StatusOK || len(tr.LoadPoints) != 1 {
			t.Fatalf("trial %d %v: %s %s", tr.Number, tr.Settings, tr.Status, tr.Failure)
		}
		tpot[tr.Settings.Disaggregated()] = tr.LoadPoints[0].Summary.TPOT.P99
	}
	if len(tpot) != 2 || !(tpot[true] < tpot[false]) {
		t.Errorf("TPOT p99 by disaggregated: %v; want both shapes, the disaggregated one's shorter", tpot)
	}
}

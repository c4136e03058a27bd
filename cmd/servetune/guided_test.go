package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// guidedRealSpec is the quick start's space on the simulated engine as a
// process (real HTTP, a real clock sped up by time_scale), with a short
// workload, a continuous objective and a TPOT limit that most of the
// space misses (the simulator forecasts 86%): the configurations worth
// measuring are few.
const guidedRealSpec = `name: guided-real
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher:
  kind: sim
  gpus: [0, 1]
  ready_timeout: 30s
  time_scale: 10
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  tensor_parallel: [1, 2]
  max_running_requests: {int: [16, 512], log: true}
  max_batched_tokens: [2048, 4096, 8192]
  gpu_memory_fraction: {float: [0.80, 0.95], step: 0.05}
  kv_cache_dtype: [auto, fp8]
workload:
  dataset: {kind: random, input: {lognormal: {median: 1024, sigma: 0.5, max: 4096}}, output: {uniform: [32, 96]}}
  load: {concurrency: [48]}
  requests_per_level: 96
  warmup: 8
slo: {ttft_p99_ms: 2000, tpot_p99_ms: 16}
tuner: {sampler: SAMPLER, trials: 14, seed: 1, objective: max output_throughput_per_gpu, confirm: false}
`

// TestGuidedRealPath runs the quick start's space with TPE and with the
// guided sampler against the simulated engine as a process: the guided
// study meets the SLOs at an earlier trial than TPE first does, and its
// best comes within 10% of TPE's best. The engine runs at ten times real
// speed on a shared machine, where one trial's value moves by more than a
// few percent: in one CI run TPE's 12th trial measured 1,262 tok/s/GPU,
// above all that three guided studies of the space measured (1,184-1,190),
// so "reaches TPE's best within 3%" is not a stable claim here. How many
// launches the guided sampler needs is measured in virtual time by
// make guided-bench.
func TestGuidedRealPath(t *testing.T) {
	bin := buildServetune(t)
	db := filepath.Join(t.TempDir(), "g.db")
	values := map[string][]float64{}
	for _, s := range []string{"tpe", "guided"} {
		spec := writeSpec(t, strings.ReplaceAll(strings.Replace(guidedRealSpec, "SAMPLER", s, 1), "guided-real", "guided-real-"+s))
		out, err := exec.Command(bin, "tune", spec, "--db", db).CombinedOutput()
		if err != nil {
			t.Fatalf("tune %s: %v\n%s", s, err, out)
		}
		if s == "guided" && !strings.Contains(string(out), "guided: ") {
			t.Errorf("the guided study printed nothing of what it decided:\n%s", out)
		}
		js, err := exec.Command(bin, "trials", "guided-real-"+s, "--db", db, "--json", "-").Output()
		if err != nil {
			t.Fatalf("trials %s: %v", s, err)
		}
		var doc struct {
			Trials []struct {
				Objective *float64 `json:"objective"`
			} `json:"trials"`
		}
		if err := json.Unmarshal(js, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tr := range doc.Trials {
			v := 0.0
			if tr.Objective != nil {
				v = *tr.Objective
			}
			values[s] = append(values[s], v)
		}
	}
	first := func(vs []float64) int { // the first trial meeting the SLOs, 1-based
		for i, v := range vs {
			if v > 0 {
				return i + 1
			}
		}
		return len(vs) + 1
	}
	best, guidedBest := slices.Max(values["tpe"]), slices.Max(values["guided"])
	t.Logf("TPE: first within the SLOs at trial %d, best %.1f tok/s/GPU of %v; guided: first at trial %d, best %.1f of %v",
		first(values["tpe"]), best, values["tpe"], first(values["guided"]), guidedBest, values["guided"])
	if best <= 0 {
		t.Fatal("TPE measured nothing that meets the SLOs")
	}
	if first(values["guided"]) >= first(values["tpe"]) {
		t.Errorf("guided first met the SLOs at trial %d, TPE at %d", first(values["guided"]), first(values["tpe"]))
	}
	if guidedBest < 0.9*best {
		t.Errorf("guided's best %.1f tok/s/GPU is below 90%% of TPE's %.1f", guidedBest, best)
	}
}

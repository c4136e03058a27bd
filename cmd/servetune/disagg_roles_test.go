package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// disaggRolesSpec is a disaggregated study on the sim launcher whose
// prefill and decode engines take batch limits of their own, the prefill
// engines' searched.
const disaggRolesSpec = `name: NAME
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: sim, gpus: [0, 1, 2, 3], ready_timeout: 60s, time_scale: 10, load_time: 1s}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  disaggregated: true
  tensor_parallel: 1
  max_running_requests: 32
  prefill_max_running_requests: [4, 16]
  decode_max_running_requests: 96
  prefill_max_batched_tokens: 8192
  decode_max_batched_tokens: 1024
disaggregation:
  router: ["{servetune}", sim, router, --host, "{host}", --port, "{port}",
           --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}",
           --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]
workload:
  dataset: {kind: random, input: 2048, output: 64}
  load: {concurrency: [8]}
  requests_per_level: 24
  warmup: 2
slo: {ttft_p99_ms: 30000}
tuner: {sampler: grid, trials: 2, seed: 1, objective: max output_throughput_per_gpu, parallel: 2, confirm: false}
`

// TestTuneDisaggRolesSearchedApart: the grid measures both prefill batch
// limits, each trial's prefill and decode engines start with their own
// role's limits, and the printed commands show them.
func TestTuneDisaggRolesSearchedApart(t *testing.T) {
	bin := buildServetune(t)
	name := fmt.Sprintf("roles-%d", os.Getpid())
	path := writeSpec(t, strings.Replace(disaggRolesSpec, "NAME", name, 1))
	db := t.TempDir() + "/st.db"
	if out, err := exec.Command(bin, "tune", path, "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "recommend", name, "--db", db, "--format", "json").Output()
	if err != nil {
		t.Fatalf("recommend: %v\n%s", err, out)
	}
	var doc struct {
		Settings map[string]any `json:"settings"`
		RunnerUp struct {
			Settings map[string]any `json:"settings"`
		} `json:"runner_up"`
		Parts []struct {
			Name    string   `json:"name"`
			Command []string `json:"command"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("recommend --format json: %v\n%s", err, out)
	}
	searched := map[any]bool{doc.Settings["prefill_max_running_requests"]: true, doc.RunnerUp.Settings["prefill_max_running_requests"]: true}
	if !searched[4.0] || !searched[16.0] {
		t.Errorf("prefill_max_running_requests measured: %v, want 4 and 16", searched)
	}
	seqs := fmt.Sprint(doc.Settings["prefill_max_running_requests"])
	want := map[string]string{
		"prefill 0": "--max-num-seqs " + seqs + " --max-num-batched-tokens 8192",
		"decode 0":  "--max-num-seqs 96 --max-num-batched-tokens 1024",
	}
	if len(doc.Parts) != 3 {
		t.Fatalf("parts %+v, want prefill, decode and the router", doc.Parts)
	}
	for _, p := range doc.Parts[:2] {
		if line := strings.Join(p.Command, " "); !strings.Contains(line, want[p.Name]) {
			t.Errorf("%s: %s, want %s", p.Name, line, want[p.Name])
		}
	}
	text, err := exec.Command(bin, "recommend", name, "--db", db).Output()
	if err != nil {
		t.Fatalf("recommend: %v\n%s", err, text)
	}
	for _, w := range want {
		if !strings.Contains(string(text), w) {
			t.Errorf("the printed commands lack %q:\n%s", w, text)
		}
	}
}

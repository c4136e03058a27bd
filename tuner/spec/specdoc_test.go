package spec_test

import (
	_ "github.com/servetune/servetune/launcher/kinds" // the launcher kinds of the specs these tests parse
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// kitchenSink reaches the parser's branches the examples do not.
var kitchenSink = []string{`name: ks
model: meta-llama/Llama-3.1-8B-Instruct
engine: sglang
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [8, 16]}
workload:
  dataset:
    kind: mix
    mix:
      - {weight: 1, spec: {kind: random, input: {lognormal: {median: 512, sigma: 0.5, min: 8, max: 4096}}, output: {fixed: 64}}}
      - {weight: 2, spec: {kind: prefix, prefix_groups: 4, prefix_len: 128, input: {normal: {mean: 256, sigma: 20}}, output: {uniform: [8, 16]}}}
  load: {rate: [1, 2], burstiness: 0.5, max_concurrency: 64}
  requests_per_level: 10
  warmup: 1
  timeout: 1m
slo: {ttft_p99_ms: 500}
objectives: [max output_throughput_per_gpu]
tuner: {sampler: random, trials: 3, seed: 2, objective: max request_goodput, parallel: 1, precheck: false, confirm: {top: 1, runs: 1}}
quality: {baseline: {max_running_requests: 8}, max_drop_pct: 2, items: 40}
`, `name: ks2
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: endpoint, base_url: "http://127.0.0.1:1"}
space: {max_running_requests: 8}
workload:
  dataset: {kind: jsonl, path: x.jsonl, output: 16}
  load: {capacity: true, max_concurrency: 64}
slo: {tpot_p99_ms: 50}
`, `name: ks3
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
space: {max_running_requests: 8}
workload:
  dataset: {kind: random, input: 128, output: 16}
  load: {capacity: rate, start_rate: 2, max_rate: 100, rate_precision: 0.1, burstiness: 1, probe_span: 10s}
slo: {tpot_p99_ms: 50}
tuner: {objective: max request_rate}
`, `name: ks4
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
space: {max_running_requests: 8}
workload:
  dataset: {kind: random, input: 128, output: 16}
  load: {concurrency: [1]}
slo: {tpot_p99_ms: 50}
whatif:
  gpus: [H100-SXM]
  shapes: [aggregated, disaggregated]
  kv_link: infiniband
  speculative: {acceptance: 0.7, tokens: 3, method: eagle3, draft: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B}
`}

// TestSpecDocCoversEveryKey walks the parser's keys (every mapping it
// checks, over the examples and specs that reach its other branches), the
// launcher kinds' keys and the engine settings, and fails when
// docs/spec.md does not name one.
func TestSpecDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	keys := map[string]bool{}
	dist := regexp.MustCompile(`^workload\.dataset(\.mix\.spec)?\.(input|output)(\.(lognormal|normal))?$`)
	onFields := func(field string, allowed []string) {
		for _, k := range allowed {
			switch {
			case field == "":
				keys[k] = true
			case dist.MatchString(field):
				keys[k] = true
			case strings.HasPrefix(field, "launcher.hosts"):
				keys["launcher.hosts"] = true
			default:
				keys[strings.Replace(field, "workload.dataset.mix.spec", "workload.dataset", 1)+"."+k] = true
			}
		}
	}
	srcs := map[string]string{}
	examples, _ := filepath.Glob("../../examples/*.yaml")
	for _, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = string(b)
	}
	for i, s := range kitchenSink {
		srcs[string(rune('a'+i))+".yaml"] = s
	}
	for name, src := range srcs {
		if _, err := spec.ParseSpecFields([]byte(src), name, onFields); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(keys) < 40 {
		t.Fatalf("only %d keys walked: the hook is not called", len(keys))
	}
	for _, k := range launcher.CommonKeys {
		keys["launcher."+k.Name] = true
	}
	for _, k := range launcher.Kinds() {
		keys[k.Name] = true
		for _, key := range k.Keys {
			keys["launcher."+key.Name] = true
		}
	}
	for _, n := range engine.Names() {
		keys[n] = true
	}
	for _, m := range recommend.Metrics {
		if i := strings.LastIndex(m, "_"); strings.HasPrefix(m, "ttft") || strings.HasPrefix(m, "tpot") || strings.HasPrefix(m, "itl") || strings.HasPrefix(m, "e2el") {
			keys[m[:i]+"_*"] = true
			continue
		}
		keys[m] = true
	}
	for k := range keys {
		if !strings.Contains(text, "`"+k+"`") {
			t.Errorf("docs/spec.md does not name `%s`", k)
		}
	}
}

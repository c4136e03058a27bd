package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The models of 2026 the simulated engine costs (issue 44): each is
// accepted by catalog id and by its config.json by `sim estimate`, `sim
// run`, `whatif` and `tune --dry-run`, on GPUs that hold its weights.
var newModels = []struct {
	id, config, gpu string
	gpus            int
}{
	{"Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b.json", "H200", 2},
	{"Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b.json", "H200", 8},
	{"deepseek-ai/DeepSeek-V3.2", "deepseek-v3.2.json", "H200", 8},
	{"zai-org/GLM-5", "glm-5.json", "B300", 8},
	{"openai/gpt-oss-20b", "gpt-oss-20b.json", "H100-SXM", 1},
	{"openai/gpt-oss-120b", "gpt-oss-120b.json", "H100-SXM", 1},
	{"meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout.json", "H100-SXM", 4},
	{"meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick.json", "B200", 8},
	{"moonshotai/Kimi-K2-Instruct", "kimi-k2-instruct.json", "B300", 8},
	{"moonshotai/Kimi-K2.5", "kimi-k2.5.json", "H200", 8},
	{"MiniMaxAI/MiniMax-M2.5", "minimax-m2.5.json", "H200", 4},
}

// modelDir writes the catalog's test config.json of a model into a
// directory of its own, which the commands take as MODEL.
func modelDir(t *testing.T, config string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../internal/serving/catalog/testdata", config))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const newModelSpec = `name: newmodel
model: MODEL
engine: vllm
launcher:
  kind: virtual
  gpus: [GPUS]
hardware: {gpu: GPU, price_per_gpu_hour: 3}
space:
  tensor_parallel: [TP]
  max_running_requests: [16, 64]
  max_model_len: [8192]
workload:
  dataset: {kind: random, input: 1024, output: 64}
  load: {concurrency: [8]}
  requests_per_level: 24
  warmup: 0
slo: {ttft_p99_ms: 10000}
tuner: {sampler: guided, trials: 2, seed: 1}
`

func TestNewModelsAccepted(t *testing.T) {
	for _, m := range newModels {
		dir := modelDir(t, m.config)
		tp := strconv.Itoa(m.gpus)
		for _, model := range []string{m.id, dir} {
			t.Run(filepath.Base(m.id)+"/"+map[bool]string{true: "id", false: "config.json"}[model == m.id], func(t *testing.T) {
				code, stdout, stderr := runCLI(t, "sim", "estimate", model, "-tp", tp, "--gpu", m.gpu, "--max-model-len", "8192", "--json", "-")
				var est struct {
					Weights float64 `json:"weights_gib"`
					KV      float64 `json:"kv_cache_gib"`
				}
				if code != exitOK || json.Unmarshal([]byte(stdout), &est) != nil || est.Weights <= 0 || est.KV <= 0 {
					t.Fatalf("sim estimate: exit %d, %s%s", code, stdout, stderr)
				}
				code, stdout, stderr = runCLI(t, "sim", "run", model, "-tp", tp, "--num-gpus", tp, "--gpu", m.gpu, "--max-model-len", "8192",
					"--input-len", "1024", "--output-len", "32", "--max-concurrency", "8", "--num-requests", "16", "--bootstrap", "5")
				if code != exitOK || !strings.Contains(stdout, "TPOT") {
					t.Fatalf("sim run: exit %d, %s%s", code, stdout, stderr)
				}
				code, stdout, stderr = runCLI(t, "whatif", "--model", model, "--gpus", m.gpu, "--max-gpus", tp, "--input-len", "1024", "--output-len", "64",
					"--slo", "tpot_p99_ms=100", "--target-rps", "1", "--trials", "2", "--requests", "40", "--no-progress")
				if code != exitOK || !strings.Contains(stdout, m.gpu) || !strings.Contains(stdout, "serve") {
					t.Fatalf("whatif: exit %d, %s%s", code, stdout, stderr)
				}
				gpus := make([]string, m.gpus)
				for i := range gpus {
					gpus[i] = strconv.Itoa(i)
				}
				spec := strings.NewReplacer("MODEL", model, "GPUS", strings.Join(gpus, ", "), "GPU", m.gpu, "TP", tp).Replace(newModelSpec)
				code, stdout, stderr = runCLI(t, "tune", "--dry-run", writeSpec(t, spec))
				if code != exitOK || !strings.Contains(stdout, "forecast") {
					t.Fatalf("tune --dry-run: exit %d, %s%s", code, stdout, stderr)
				}
			})
		}
	}
}

// A variant whose feature the simulated engine does not cost is refused
// by name, exit 2: GLM-5's config.json with GLM-5.2's shared indexers
// (every fourth layer runs the indexer, the others reuse its top-k).
func TestSharedIndexerRefused(t *testing.T) {
	raw, err := os.ReadFile("../../internal/serving/catalog/testdata/glm-5.json")
	if err != nil {
		t.Fatal(err)
	}
	shared := strings.Replace(string(raw), `"index_topk": 2048,`, `"index_topk": 2048, "index_topk_freq": 4, "index_skip_topk_offset": 3,`, 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(shared), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sim", "estimate", dir, "-tp", "8", "--gpu", "B300"},
		{"whatif", "--model", dir, "--gpus", "B300", "--slo", "tpot_p99_ms=50", "--target-rps", "1", "--no-progress"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "index_topk_freq 4") {
			t.Errorf("%s: exit %d, stderr %q: want exit 2 naming index_topk_freq", args[0], code, stderr)
		}
	}
}

package guided

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/spec"
)

// studySpec is tuner's test study (tuner/study_test.go).
const studySpec = `name: vt
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0, 1]}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 3}
space:
  tensor_parallel: [1, 2]
  max_running_requests: [8, 64]
  gpu_memory_fraction: [0.1, 0.9]
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4, 16]}
  requests_per_level: 24
  warmup: 0
slo: {ttft_p99_ms: 2000}
tuner: {sampler: tpe, trials: 6, seed: 3, confirm: false}
`

func mustSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	study, err := spec.ParseSpec([]byte(src), "vt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return study
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

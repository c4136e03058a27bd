package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// baselineStudy names a quality baseline whose own max_model_len (the
// model's whole context) does not fit an L4 beside the weights; every
// trial fixes 8,192, which does.
const baselineStudy = `name: qbase
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: L4}
space:
  quantization: [none, fp8]
  max_model_len: 8192
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4]}
  requests_per_level: 8
  warmup: 0
slo: {ttft_p99_ms: 60000}
tuner: {sampler: grid, trials: 2, seed: 5, confirm: false}
quality: {baseline: {quantization: none, max_model_len: 131072}}
`

// TestTuneQualityBaselineFails: a baseline that does not start is a failed
// measurement, not a failed study: the trials run, recommend says the
// gate had no baseline, and a second run of the same study is told of
// --fresh as well as --resume.
func TestTuneQualityBaselineFails(t *testing.T) {
	spec := writeSpec(t, baselineStudy)
	db := filepath.Join(t.TempDir(), "t.db")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"tune", spec, "--db", db}, &out, &errb); code != 0 {
		t.Fatalf("tune: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if all := out.String() + errb.String(); !strings.Contains(all, "quality gate not applied: the baseline did not start") || !strings.Contains(all, "KV cache is needed") {
		t.Errorf("tune did not say the baseline failed:\n%s", all)
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"recommend", "qbase", "--db", db}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "the gate was not applied: the baseline did not start") {
		t.Errorf("recommend: exit %d\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	code := run(context.Background(), []string{"tune", spec, "--db", db}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "already exists") || !strings.Contains(errb.String(), "--fresh") {
		t.Errorf("second run: exit %d, stderr %q; want exit 2 naming --fresh", code, errb.String())
	}
}

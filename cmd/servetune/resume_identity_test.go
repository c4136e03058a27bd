package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTuneResumeChangedModel: a local model is its config.json. The same
// directory holding another config.json (32 layers, now 16) is another
// model: --resume is refused in one line naming what changed, with or
// without --force-spec, and the study keeps only the first model's trials;
// --fresh starts over.
func TestTuneResumeChangedModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "my-model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../internal/serving/catalog/testdata/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		if err := os.WriteFile(filepath.Join(model, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg)
	db := filepath.Join(dir, "s.db")
	src := strings.Replace(vspec(40, 2), "meta-llama/Llama-3.1-8B-Instruct", model, 1)
	spec := writeSpec(t, src)
	if code, _, errs := runIn("tune", spec, "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	before := studiesJSON(t, db)
	write([]byte(strings.Replace(string(cfg), `"num_hidden_layers": 32`, `"num_hidden_layers": 16`, 1)))
	more := writeSpec(t, strings.Replace(src, "trials: 2,", "trials: 4,", 1))
	for _, extra := range [][]string{{"--resume"}, {"--resume", "--force-spec"}} {
		code, out, errs := runIn(append([]string{"tune", more, "--db", db}, extra...)...)
		if code != exitUsage || strings.Count(strings.TrimSpace(errs), "\n") != 0 ||
			!strings.Contains(errs, "config.json changed") || !strings.Contains(errs, "num_hidden_layers 32 -> 16") ||
			!strings.Contains(errs, "--fresh") {
			t.Errorf("resume with another config.json %v: exit %d\nstdout %s\nstderr %q", extra, code, out, errs)
		}
	}
	if doc := studiesJSON(t, db); len(doc) != 1 || doc[0] != before[0] {
		t.Fatalf("a refused resume changed the study: %+v, was %+v", doc, before)
	}
	if code, _, errs := runIn("tune", more, "--db", db, "--fresh"); code != exitOK {
		t.Errorf("--fresh with the new model: exit %d: %s", code, errs)
	}
}

// TestTuneForceSpecRecommendsMeasured: --force-spec takes no change of
// extra_args (the flags change what a trial measures, and no stored trial
// ran with the new ones): refused, exit 2, naming the key. A space
// narrowed under --force-spec (tensor_parallel [1, 2] to [2]) is what
// recommend answers: no configuration outside it is recommended.
func TestTuneForceSpecRecommendsMeasured(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	src := strings.Replace(vspec(40, 4), "gpu_memory_fraction: [0.85, 0.9]", "tensor_parallel: [1, 2]", 1)
	src = strings.Replace(src, "max_running_requests: [8, 32, 128]", "max_running_requests: [32, 128]", 1)
	if code, _, errs := runIn("tune", writeSpec(t, src), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	eager := strings.Replace(src, "tensor_parallel: [1, 2]", "tensor_parallel: [1, 2]\n  extra_args: [\"--enforce-eager\"]", 1)
	code, _, errs := runIn("tune", writeSpec(t, eager), "--db", db, "--resume", "--force-spec")
	if code != exitUsage || !strings.Contains(errs, "space.extra_args changed") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("--force-spec with new extra_args: exit %d, %q", code, errs)
	}
	if _, out, _ := runIn("recommend", "vstudy", "--db", db); strings.Contains(out, "enforce-eager") {
		t.Errorf("recommend prints a flag no trial ran with:\n%s", out)
	}
	narrow := strings.Replace(src, "tensor_parallel: [1, 2]", "tensor_parallel: [2]", 1)
	if code, _, errs := runIn("tune", writeSpec(t, narrow), "--db", db, "--resume", "--force-spec"); code != exitOK {
		t.Fatalf("--force-spec with a narrower space: exit %d: %s", code, errs)
	}
	for _, format := range []string{"vllm", "json"} {
		code, out, errs := runIn("recommend", "vstudy", "--db", db, "--format", format)
		if code != exitOK {
			t.Fatalf("recommend --format %s: exit %d: %s", format, code, errs)
		}
		if format == "vllm" && !strings.Contains(lastLine(out), "--tensor-parallel-size 2") {
			t.Errorf("recommend after narrowing to tensor_parallel [2]: %s", lastLine(out))
		}
		if format == "json" && !strings.Contains(out, `"tensor_parallel": 2`) {
			t.Errorf("recommend --format json after narrowing:\n%s", out)
		}
	}
}

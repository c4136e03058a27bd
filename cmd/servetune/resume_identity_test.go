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
	cfg, err := os.ReadFile("../../catalog/testdata/llama-3.1-8b.json")
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

package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseGenerationConfig(t *testing.T) {
	for _, tt := range []struct {
		json string
		want *Sampling
	}{
		{`{"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95}`, &Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20}},
		{`{"bos_token_id": 1, "eos_token_id": 2}`, nil}, // Mixtral-8x7B-Instruct's: no sampling
		{`{"top_p": 0.9}`, &Sampling{Temperature: 1, TopP: 0.9}},
	} {
		got, err := ParseGenerationConfig(strings.NewReader(tt.json))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: %+v, want %+v", tt.json, got, tt.want)
		}
	}
}

// A config.json's generation_config.json beside it gives the model's
// sampling defaults; the catalog's Llama 3.1 has Meta's.
func TestGenerationDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg, err := os.ReadFile("testdata/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"x.config.json": string(cfg), "x.generation_config.json": `{"temperature": 0.6, "top_p": 0.9}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := LoadHFConfig(filepath.Join(dir, "x.config.json"), "x/y")
	if err != nil {
		t.Fatal(err)
	}
	if m.Generation == nil || *m.Generation != (Sampling{Temperature: 0.6, TopP: 0.9}) || !m.Generation.Filters() {
		t.Errorf("beside x.config.json: %+v", m.Generation)
	}
	if m, _ := LoadHFConfig("testdata/llama-3.1-8b.json", "x/y"); m.Generation != nil {
		t.Errorf("no generation_config.json: %+v", m.Generation)
	}
	l, err := LookupModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	l.Generation.TopP = 1 // a copy: the table keeps its own
	if l2, _ := LookupModel("llama-3.1-8b"); l2.Generation.TopP != 0.9 {
		t.Errorf("the catalog's defaults changed through a lookup: %+v", l2.Generation)
	}
}

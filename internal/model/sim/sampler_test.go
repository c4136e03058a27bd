package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/internal/serving/catalog"
)

// The native sampler's sort is the table's own figure on the H200 it was
// timed on, at the table's rows and vocabularies, and scales with HBM
// bandwidth to other GPUs.
func TestSamplerSortTable(t *testing.T) {
	for _, tt := range []struct {
		args []string
		rows float64
		want float64 // ms
	}{
		{[]string{"llama-3.1-8b", "--gpu", "H200", "--sampler-sort"}, 16, 0.497},
		{[]string{"llama-3.1-8b", "--gpu", "H200", "--sampler-sort"}, 128, 2.383},
		{[]string{"llama-3.1-8b", "--gpu", "H200", "--sampler-sort"}, 96, (1.081 + 2.383) / 2},
		{[]string{"mixtral-8x7b", "--gpu", "H200", "--tensor-parallel-size", "2", "--sampler-sort"}, 64, 0.337},
		{[]string{"llama-3.1-8b", "--gpu", "H100", "--sampler-sort"}, 16, 0.497 * 4.8 / 3.35},
	} {
		s := newStepModel(mustParse(t, tt.args...))
		if got := 1e3 * s.samplerSeconds(tt.rows); math.Abs(got-tt.want) > 1e-3 {
			t.Errorf("%v, %v rows: %.4f ms, want %.4f", tt.args, tt.rows, got, tt.want)
		}
	}
}

// The sort is vLLM's, under --sampler-sort, and a step pays it only when
// a sampled request filters.
func TestSamplerSortGated(t *testing.T) {
	b := batchShape{tokens: 16, seqs: 16, sampled: 16, decodeCtx: 16 * 1000}
	sorted := b
	sorted.filtered = true
	on := newStepModel(mustParse(t, "llama-3.1-8b", "--sampler-sort"))
	if d := on.gpuSeconds(sorted) - on.gpuSeconds(b); math.Abs(d-on.samplerSeconds(16)) > 1e-12 || d <= 0 {
		t.Errorf("a filtering step costs %.4f ms more, want the sort's %.4f", 1e3*d, 1e3*on.samplerSeconds(16))
	}
	for _, args := range [][]string{
		{"llama-3.1-8b"}, // FlashInfer or Triton: no sort
		{"--model-path", "llama-3.1-8b", "--engine", "sglang"},
	} {
		cfg, err := ParseArgs(args, nil)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		s := newStepModel(cfg)
		if s.gpuSeconds(sorted) != s.gpuSeconds(b) {
			t.Errorf("%v: the step pays a sort", args)
		}
	}
}

// A request that sets no sampling takes the model's generation defaults
// unless --generation-config says otherwise; the fields it sets win.
func TestRequestSampling(t *testing.T) {
	one, zero, k := 1.0, 0.0, 20
	cfg := mustParse(t, "llama-3.1-8b")
	if got := cfg.DefaultSampling(); got != (catalog.Sampling{Temperature: 0.6, TopP: 0.9}) || !got.Filters() {
		t.Errorf("Llama-3.1-8B-Instruct's defaults: %+v", got)
	}
	if got := cfg.RequestSampling(nil, &one, nil); got.Filters() {
		t.Errorf("top_p 1: %+v filters", got)
	}
	if got := cfg.RequestSampling(&zero, nil, nil); got.Filters() {
		t.Errorf("greedy: %+v filters", got)
	}
	plain := mustParse(t, "llama-3.1-8b", "--generation-config", "vllm")
	if got := plain.DefaultSampling(); got.Filters() {
		t.Errorf("--generation-config vllm: %+v filters", got)
	}
	mixtral := mustParse(t, "mixtral-8x7b", "--tensor-parallel-size", "2")
	if got := mixtral.DefaultSampling(); got.Filters() {
		t.Errorf("Mixtral (no sampling in its generation_config.json): %+v filters", got)
	}
	if got := mixtral.RequestSampling(nil, nil, &k); !got.Filters() {
		t.Errorf("top_k 20: %+v does not filter", got)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"temperature": 0.7, "top_p": 0.8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	folder := mustParse(t, "mixtral-8x7b", "--tensor-parallel-size", "2", "--generation-config", dir)
	if got := folder.DefaultSampling(); got != (catalog.Sampling{Temperature: 0.7, TopP: 0.8}) {
		t.Errorf("--generation-config %s: %+v", dir, got)
	}
}

// The sampler's settings survive a round trip through Settings, as the
// engine's flags do (what-if rebuilds configurations from them).
func TestSamplerSettingsRoundTrip(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--sampler-sort", "--generation-config", "vllm")
	back, err := FromSettings(cfg.Engine, "llama-3.1-8b", "", cfg.GPU.ID, 0, cfg.Settings())
	if err != nil {
		t.Fatal(err)
	}
	if !back.SamplerSort || back.GenerationConfig != "vllm" {
		t.Errorf("round trip: sampler sort %v, generation config %q", back.SamplerSort, back.GenerationConfig)
	}
}

package catalog

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParamsMatchPublishedCounts(t *testing.T) {
	tests := []struct {
		id            string
		total, active float64 // billions, from docs/reference.md (Models)
		kvKiB         float64
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 8.03, 8.03, 128},
		{"meta-llama/Llama-3.3-70B-Instruct", 70.6, 70.6, 320},
		{"Qwen/Qwen2.5-7B-Instruct", 7.6, 7.6, 56},
		{"Qwen/Qwen2.5-32B-Instruct", 32.8, 32.8, 256},
		{"Qwen/Qwen2.5-72B-Instruct", 72.7, 72.7, 320},
		{"mistralai/Mistral-7B-Instruct-v0.3", 7.2, 7.2, 128},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7, 12.9, 128},
		{"Qwen/Qwen3-30B-A3B", 30.5, 3.3, 96},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, err := LookupModel(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Params() / 1e9; math.Abs(got-tt.total)/tt.total > 0.03 {
				t.Errorf("Params = %.2fB, want %.2fB", got, tt.total)
			}
			if got := m.ActiveParams() / 1e9; math.Abs(got-tt.active)/tt.active > 0.05 {
				t.Errorf("ActiveParams = %.2fB, want %.2fB", got, tt.active)
			}
			if got := m.KVBytesPerToken(2) / 1024; got != tt.kvKiB {
				t.Errorf("KV per token = %v KiB, want %v", got, tt.kvKiB)
			}
		})
	}
}

func TestLookupModel(t *testing.T) {
	tests := []struct {
		in, wantBase, wantQuant string
	}{
		{"llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", ""},
		{"META-LLAMA/llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", ""},
		{"meta-llama/Llama-3.3-70B-Instruct-FP8", "meta-llama/Llama-3.3-70B-Instruct-FP8", "fp8"},
		{"RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "fp8"},
		{"Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct-AWQ", "awq"},
		{"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := LookupModel(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tt.wantBase || m.Quantization != tt.wantQuant {
				t.Errorf("got (%q, %q), want (%q, %q)", m.ID, m.Quantization, tt.wantBase, tt.wantQuant)
			}
		})
	}
	if _, err := LookupModel("nobody/nothing-1b"); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown model: err = %v, want ErrUnknown", err)
	}
}

func TestLookupGPU(t *testing.T) {
	tests := []struct {
		in, want string
		fp8      bool
		nvlink   bool
	}{
		{"H100-SXM", "H100-SXM", true, true},
		{"h100", "H100-SXM", true, true},
		{"h100-pcie", "H100-PCIe", true, false},
		{"A100-80G", "A100-80G", false, true},
		{"l40s", "L40S", true, false},
		{"MI300X", "MI300X", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, err := LookupGPU(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if g.ID != tt.want || g.HasFP8() != tt.fp8 || g.NVLink() != tt.nvlink {
				t.Errorf("got %s fp8=%v nvlink=%v", g.ID, g.HasFP8(), g.NVLink())
			}
			if g.Price.PerGPUHour <= 0 || g.Price.Date == "" || g.Price.Source == "" {
				t.Errorf("price lacks figure, date or source: %+v", g.Price)
			}
		})
	}
	if _, err := LookupGPU("TPU-v5"); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown GPU: err = %v", err)
	}
	// Lookups return copies.
	g, _ := LookupGPU("H100-SXM")
	g.MemoryGiB = 1
	if g2, _ := LookupGPU("H100-SXM"); g2.MemoryGiB != 79.18 {
		t.Errorf("catalog modified through a lookup result: %v", g2.MemoryGiB)
	}
}

func TestLoadHFConfig(t *testing.T) {
	tests := []struct {
		file    string
		builtin string
	}{
		{"testdata/llama-3.1-8b.json", "llama-3.1-8b"},
		{"testdata/qwen3-30b-a3b.json", "qwen3-30b-a3b"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := LoadHFConfig(tt.file, "x/y")
			if err != nil {
				t.Fatal(err)
			}
			want, _ := LookupModel(tt.builtin)
			if got.Params() != want.Params() || got.KVBytesPerToken(2) != want.KVBytesPerToken(2) || got.ActiveParams() != want.ActiveParams() {
				t.Errorf("imported shape differs from the catalog: %+v vs %+v", got, want)
			}
			if got.ID != "x/y" {
				t.Errorf("ID = %q", got.ID)
			}
		})
	}
}

func TestParseHFConfigErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "parse config.json"},
		{"no layers", `{"hidden_size":4096,"num_attention_heads":32,"intermediate_size":1,"vocab_size":10}`, "num_hidden_layers"},
		{"bad gqa", `{"num_hidden_layers":2,"hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":5,"intermediate_size":1,"vocab_size":10}`, "multiple"},
		{"bad topk", `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"intermediate_size":1,"vocab_size":10,"num_experts":4,"num_experts_per_tok":9}`, "num_experts_per_tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHFConfig(strings.NewReader(tt.json), "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want mention of %q", err, tt.want)
			}
		})
	}
}

func FuzzParseHFConfig(f *testing.F) {
	f.Add(`{"num_hidden_layers":32,"hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256}`)
	f.Add(`{"text_config":{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"intermediate_size":8,"vocab_size":10}}`)
	f.Add(`{"num_experts":0,"head_dim":-1}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseHFConfig(strings.NewReader(s), "")
		if err != nil {
			return
		}
		if m.Validate() != nil || m.Params() <= 0 || m.KVBytesPerToken(2) <= 0 {
			t.Fatalf("accepted an unusable model: %+v", m)
		}
	})
}

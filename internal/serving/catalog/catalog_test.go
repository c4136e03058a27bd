package catalog

import (
	"errors"
	"fmt"
	"math"
	"reflect"
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
		{"Qwen/Qwen3-235B-A22B", 235, 22, 188},
		{"mistralai/Mixtral-8x22B-Instruct-v0.1", 141, 39, 224},
		// MLA: 61 layers of kv_lora_rank 512 + qk_rope_head_dim 64.
		{"deepseek-ai/DeepSeek-V3", 671, 37, 61 * (512 + 64) * 2 / 1024.0},
		// gpt-oss-120b's card counts 5.1B active without the input
		// embedding; ActiveParams counts it (0.58B). Its KV grows in the
		// 18 full-attention layers only (KVSpans holds the others).
		{"openai/gpt-oss-120b", 116.8, 5.13 + 0.58, 36},
		{"openai/gpt-oss-20b", 20.9, 3.61 + 0.58, 24},
		// MiniMax-M2.5's card: 229B total, 10B active (the active count
		// here includes the 0.6B input embedding).
		{"MiniMaxAI/MiniMax-M2.5", 229, 10 + 0.6, 62 * 8 * 128 * 2 * 2 / 1024.0},
		// Kimi-K2's card: 1T total, 32B activated; MLA's latent.
		{"moonshotai/Kimi-K2-Instruct", 1026, 32.9, 61 * (512 + 64) * 2 / 1024.0},
		{"moonshotai/Kimi-K2.5", 1026, 32.9, 61 * (512 + 64) * 2 / 1024.0},
		// Llama-4's cards: 109B (Scout) and 400B (Maverick) total with the
		// vision tower, 17B active; KV grows in the 12 NoPE layers.
		{"meta-llama/Llama-4-Scout-17B-16E-Instruct", 109, 17, 12 * 8 * 128 * 2 * 2 / 1024.0},
		{"meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400, 17, 12 * 8 * 128 * 2 * 2 / 1024.0},
		// Qwen3-Next: Hugging Face's 81.3B total counts the MTP layer the
		// engines do not load (Qwen3-Coder-Next, the same shape without
		// it, publishes 79.67B); 3.87B active is that total less the
		// experts a token does not take. KV grows in the 12 full layers.
		{"Qwen/Qwen3-Next-80B-A3B-Instruct", 81.32, 3.87, 12 * 2 * 256 * 2 * 2 / 1024.0},
		// Qwen3.5-397B-A17B's card: 397B, 17B active (the vision tower
		// under 0.2%); 15 full layers.
		{"Qwen/Qwen3.5-397B-A17B", 397, 17, 15 * 2 * 256 * 2 * 2 / 1024.0},
		// DeepSeek-V3.2: Hugging Face's 685.4B with the MTP layer; the
		// latent and the 132-byte FP8 indexer key in every layer.
		{"deepseek-ai/DeepSeek-V3.2", 685.4, 37, 61 * ((512+64)*2 + 132) / 1024.0},
		// GLM-5: Hugging Face's 753.9B with the MTP layer; the card's
		// 744B and 40B active without it.
		{"zai-org/GLM-5", 753.9, 40, 78 * ((512+64)*2 + 132) / 1024.0},
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
		wantBlock               int // weight_block_size
	}{
		{"llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "", 0},
		{"META-LLAMA/llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "", 0},
		{"meta-llama/Llama-3.3-70B-Instruct-FP8", "meta-llama/Llama-3.3-70B-Instruct-FP8", "fp8", 0},
		{"RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "fp8", 0},
		{"Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct-AWQ", "awq", 0},
		{"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "", 0},
		// Qwen's own FP8 checkpoints are block-scaled; others' re-uploads are not.
		{"Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8", "fp8", 128},
		{"RedHatAI/Qwen3-32B-FP8-dynamic", "RedHatAI/Qwen3-32B-FP8-dynamic", "fp8", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := LookupModel(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tt.wantBase || m.Quantization != tt.wantQuant || m.WeightBlock != tt.wantBlock {
				t.Errorf("got (%q, %q, block %d), want (%q, %q, block %d)", m.ID, m.Quantization, m.WeightBlock,
					tt.wantBase, tt.wantQuant, tt.wantBlock)
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
		{"testdata/mixtral-8x7b.json", "mixtral-8x7b"},
		{"testdata/deepseek-v3.json", "deepseek-v3"},
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
			if err := got.Simulable(); err != nil {
				t.Errorf("Simulable: %v", err)
			}
		})
	}
}

// DeepSeek-V3 (testdata/deepseek-v3.json, its published config.json less
// rope scaling): 671B parameters, 37B active (its model card); its MLA,
// shared expert and leading dense layers are read and modelled.
func TestDeepSeekV3Sized(t *testing.T) {
	m, err := LoadHFConfig("testdata/deepseek-v3.json", "deepseek-ai/DeepSeek-V3")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params() / 1e9; math.Abs(got-671)/671 > 0.01 {
		t.Errorf("Params = %.1fB, want 671B", got)
	}
	if got := m.ActiveParams() / 1e9; math.Abs(got-37)/37 > 0.03 {
		t.Errorf("ActiveParams = %.1fB, want 37B", got)
	}
	// The latent cache: 61 layers of kv_lora_rank + qk_rope_head_dim.
	if got := m.KVBytesPerToken(2); got != 61*(512+64)*2 {
		t.Errorf("KV per token = %v bytes", got)
	}
	if m.Quantization != "fp8" {
		t.Errorf("Quantization = %q", m.Quantization)
	}
	want := MLA{KVLoRARank: 512, QLoRARank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}
	if m.MLA == nil || *m.MLA != want {
		t.Errorf("MLA = %+v, want %+v", m.MLA, want)
	}
	if m.Experts != 256 || m.ExpertsPerTok != 8 || m.Intermediate != 2048 || m.SharedIntermediate != 2048 ||
		m.DenseLayers != 3 || m.DenseIntermediate != 18432 {
		t.Errorf("MoE shape: %d experts top %d of %d, shared %d, %d dense layers of %d", m.Experts, m.ExpertsPerTok,
			m.Intermediate, m.SharedIntermediate, m.DenseLayers, m.DenseIntermediate)
	}
	if err := m.Simulable(); err != nil {
		t.Errorf("Simulable: %v", err)
	}
}

// The MoE keys of each family: Qwen3-MoE's num_experts, Mixtral's
// num_local_experts, gpt-oss's experts_per_token (its sliding window and
// architecture refused by name, its size read).
func TestMoEConfigKeys(t *testing.T) {
	m, err := LoadHFConfig("testdata/qwen3-30b-a3b.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Experts != 128 || m.ExpertsPerTok != 8 || m.Intermediate != 768 || m.MLA != nil || m.SharedIntermediate != 0 {
		t.Errorf("Qwen3-MoE: %+v", m)
	}
	g, err := LoadHFConfig("testdata/gpt-oss-120b.json", "openai/gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := LookupModel("gpt-oss-120b")
	if g.Experts != 128 || g.ExpertsPerTok != 4 || g.Quantization != "mxfp4" || g.Params() != cat.Params() {
		t.Errorf("gpt-oss: %d experts top %d, %q, %.1fB (catalog %.1fB)", g.Experts, g.ExpertsPerTok, g.Quantization, g.Params()/1e9, cat.Params()/1e9)
	}
	for _, mm := range []Model{g, cat} {
		if err := mm.Simulable(); err != nil || mm.SlidingLayers != 18 || mm.SlidingWindow != 128 || !mm.AttentionSinks {
			t.Errorf("%s: Simulable %v, %d sliding layers of %d tokens, sinks %v; want 18 of 128, sinks", mm.ID, err, mm.SlidingLayers, mm.SlidingWindow, mm.AttentionSinks)
		}
	}
	// experts_per_token alone is enough.
	const cfg = `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"intermediate_size":32,"vocab_size":10,"num_local_experts":8,"experts_per_token":2}`
	if m, err := ParseHFConfig(strings.NewReader(cfg), ""); err != nil || m.ExpertsPerTok != 2 {
		t.Errorf("experts_per_token: %+v, %v", m, err)
	}
}

// Every field that changes a model's size or cost is either modelled or
// named by Simulable.
func TestParseHFConfigUnmodelled(t *testing.T) {
	const base = `"num_hidden_layers":4,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"vocab_size":100,"max_position_embeddings":4096`
	tests := []struct {
		name, extra, want string // want "" when simulable
	}{
		{"mistral v0.1 window", `"sliding_window":1024`, "sliding_window 1024"},
		{"window off", `"sliding_window":1024,"use_sliding_window":false`, ""},
		{"window past the context", `"sliding_window":131072`, ""},
		{"window null", `"sliding_window":null`, ""},
		{"layer types", `"layer_types":["sliding_attention","full_attention"]`, `layer_types "sliding_attention"`},
		{"full layer types", `"layer_types":["full_attention","full_attention"]`, ""},
		{"linear layer types named once", `"layer_types":["linear_attention","linear_attention","linear_attention","full_attention"]`, `not model layer_types "linear_attention"`},
		{"mamba hybrid", `"layers_block_type":["mamba","attention"]`, "layers_block_type"},
		{"linear attention hybrid", `"full_attention_interval":4`, "full_attention_interval"},
		{"unknown architecture", `"architectures":["Gemma3ForCausalLM"]`, `architectures "Gemma3ForCausalLM"`},
		{"known architecture", `"architectures":["Qwen2ForCausalLM"]`, ""},
		{"qwen2 moe shared", `"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":256`, ""},
		{"sparse step", `"num_experts":4,"num_experts_per_tok":2,"decoder_sparse_step":2`, "decoder_sparse_step 2"},
		{"mlp only layers", `"num_experts":4,"num_experts_per_tok":2,"mlp_only_layers":[0]`, "mlp_only_layers"},
		{"moe layer freq", `"n_routed_experts":4,"num_experts_per_tok":2,"moe_layer_freq":2`, "moe_layer_freq 2"},
		{"mla without q lora", `"kv_lora_rank":32,"qk_rope_head_dim":8,"qk_nope_head_dim":16,"v_head_dim":16`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseHFConfig(strings.NewReader("{"+base+","+tt.extra+"}"), "")
			if err != nil {
				t.Fatal(err)
			}
			err = m.Simulable()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Simulable: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Simulable = %v, want mention of %s", err, tt.want)
			}
		})
	}
	// A layer kind is named once, however many layers have it.
	if m, err := ParseHFConfig(strings.NewReader(`{`+base+`,"layer_types":["linear_attention","linear_attention","linear_attention","full_attention"]}`), ""); err != nil ||
		strings.Count(fmt.Sprint(m.Simulable()), "linear_attention") != 1 {
		t.Errorf("layer kinds named: %v, %v", m.Simulable(), err)
	}
	// Qwen2-MoE's shared expert counts in the size.
	m, _ := ParseHFConfig(strings.NewReader(`{`+base+`,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":256}`), "")
	noShared := m
	noShared.SharedIntermediate = 0
	if d := m.Params() - noShared.Params(); d != 4*3*64*256 {
		t.Errorf("shared expert adds %v parameters, want %v", d, 4*3*64*256)
	}
	// A multimodal wrapper's architecture is the top level's.
	m, _ = ParseHFConfig(strings.NewReader(`{"architectures":["LlavaForConditionalGeneration"],"text_config":{`+base+`}}`), "")
	if err := m.Simulable(); err == nil || !strings.Contains(err.Error(), "LlavaForConditionalGeneration") {
		t.Errorf("Simulable of a multimodal wrapper = %v", err)
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
	f.Add(`{"num_hidden_layers":4,"hidden_size":64,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"n_routed_experts":8,"num_experts_per_tok":2,"n_shared_experts":1,"first_k_dense_replace":1,"kv_lora_rank":16,"q_lora_rank":32,"qk_rope_head_dim":8,"qk_nope_head_dim":16,"v_head_dim":16}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseHFConfig(strings.NewReader(s), "")
		if err != nil {
			return
		}
		if m.Validate() != nil || m.Params() <= 0 || m.ActiveParams() <= 0 || m.ActiveParams() > m.Params() || m.KVBytesPerToken(2) <= 0 {
			t.Fatalf("accepted an unusable model: %+v", m)
		}
	})
}

// Each model's config.json reads as its catalog entry, simulable, and
// its weights are within 3% of its published checkpoint where the
// checkpoint's size is published (model.safetensors.index.json's
// total_size: tensor bytes without the file headers; testdata/SOURCES.md);
// bytes 0: no published size was found.
func TestWeightsMatchPublishedCheckpoints(t *testing.T) {
	tests := []struct {
		config, id string
		bytes      float64
	}{
		{"testdata/gpt-oss-120b.json", "openai/gpt-oss-120b", 65_248_815_744},
		{"testdata/gpt-oss-20b.json", "openai/gpt-oss-20b", 13_761_264_768},
		{"testdata/minimax-m2.5.json", "MiniMaxAI/MiniMax-M2.5", 0},
		{"testdata/kimi-k2-instruct.json", "moonshotai/Kimi-K2-Instruct", 0},
		{"testdata/kimi-k2.5.json", "moonshotai/Kimi-K2.5", 0},
		{"testdata/llama-4-scout.json", "meta-llama/Llama-4-Scout-17B-16E-Instruct", 0},
		{"testdata/llama-4-maverick.json", "meta-llama/Llama-4-Maverick-17B-128E-Instruct", 0},
		// BF16 checkpoints: twice their published parameter counts,
		// which include a multi-token-prediction layer the engines do
		// not load (testdata/SOURCES.md).
		{"testdata/qwen3-next-80b-a3b.json", "Qwen/Qwen3-Next-80B-A3B-Instruct", 2 * 81_324_862_720},
		{"testdata/qwen3.5-397b-a17b.json", "Qwen/Qwen3.5-397B-A17B", 0},
		{"testdata/deepseek-v3.2.json", "deepseek-ai/DeepSeek-V3.2", 0},
		{"testdata/glm-5.json", "zai-org/GLM-5", 2 * 753_864_139_008},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			fromConfig, err := LoadHFConfig(tt.config, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			cat, err := LookupModel(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []Model{fromConfig, cat} {
				if err := m.Simulable(); err != nil {
					t.Errorf("Simulable: %v", err)
				}
				got := m.WeightBytes("")
				if tt.bytes > 0 {
					t.Logf("%s: %.0f B, %+.2f%% from the checkpoint", m.ID, got, 100*(got/tt.bytes-1))
				}
				if tt.bytes > 0 && math.Abs(got/tt.bytes-1) > 0.03 {
					t.Errorf("%s: weights %.0f B, want %.0f B within 3%% (%+.1f%%)", m.ID, got, tt.bytes, 100*(got/tt.bytes-1))
				}
			}
			// The whole shape, layer kinds and format agree.
			a, b := fromConfig, cat
			a.ID, a.Aliases, b.ID, b.Aliases = "", nil, "", nil
			if !reflect.DeepEqual(a, b) {
				t.Errorf("config.json and catalog differ:\n%+v\n%+v", a, b)
			}
		})
	}
}

// Llama-4's layer kinds from config.json: NoPE layers where
// no_rope_layers has a 0 (every 4th when it is empty), chunked local
// attention in the others, dense layers between interleaved MoE ones.
func TestLlama4LayerKinds(t *testing.T) {
	const base = `"architectures":["Llama4ForConditionalGeneration"],"text_config":{"num_hidden_layers":8,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":32,"intermediate_size_mlp":128,"vocab_size":100,"max_position_embeddings":65536,"num_local_experts":4,"num_experts_per_tok":1,"attention_chunk_size":8192`
	for _, tt := range []struct {
		extra                      string
		chunked, dense, denseInter int
	}{
		{`,"interleave_moe_layer_step":1,"no_rope_layers":[]`, 6, 0, 0},
		{`,"interleave_moe_layer_step":2,"no_rope_layers":[1,0,1,0,1,1,1,1]`, 6, 4, 128},
		{`,"interleave_moe_layer_step":4`, 6, 6, 128},
	} {
		m, err := ParseHFConfig(strings.NewReader(`{`+base+tt.extra+`}}`), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Simulable(); err != nil || m.ChunkedLayers != tt.chunked || m.AttentionChunk != 8192 || m.DenseLayers != tt.dense ||
			m.DenseIntermediate != tt.denseInter || m.SharedIntermediate != 32 {
			t.Errorf("%s: %v; %d chunked layers of %d, %d dense of %d, shared %d; want %d chunked, %d dense of %d, shared 32",
				tt.extra, err, m.ChunkedLayers, m.AttentionChunk, m.DenseLayers, m.DenseIntermediate, m.SharedIntermediate, tt.chunked, tt.dense, tt.denseInter)
		}
	}
	if _, err := ParseHFConfig(strings.NewReader(`{`+base+`,"no_rope_layers":[1,0]}}`), ""); err == nil || !strings.Contains(err.Error(), "no_rope_layers") {
		t.Errorf("a short no_rope_layers: %v", err)
	}
}

// The 2026 systems are in the catalog with their domain and scale-out
// link; rates are dense and FP4 at least FP8 where there is FP4.
func TestGPUs2026Systems(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		domain int
		nicGBs float64
		fp4    bool
	}{
		{"B300", "B300", 8, 100, true},
		{"gb200-nvl72", "GB200", 72, 50, true},
		{"GB300", "GB300", 72, 100, true},
		{"MI325X", "MI325X", 8, 50, false},
		{"mi355", "MI355X", 8, 50, true},
		{"rtx-pro-6000", "RTXPRO6000", 8, 25, true},
		{"H100-SXM", "H100-SXM", 8, 50, false}, // defaults: HGX board, NDR 400G
		{"L40S", "L40S", 8, 50, false},
	}
	for _, tt := range tests {
		g, err := LookupGPU(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if g.ID != tt.want || g.DomainOf() != tt.domain || g.ScaleOut() != tt.nicGBs || (g.FP4TFLOPS > 0) != tt.fp4 {
			t.Errorf("%s: got %s domain %d scale-out %g GB/s fp4 %g", tt.in, g.ID, g.DomainOf(), g.ScaleOut(), g.FP4TFLOPS)
		}
		if g.FP4TFLOPS > 0 && g.FP4TFLOPS < g.FP8TFLOPS || g.FP8TFLOPS < g.BF16TFLOPS || g.MemoryGiB > g.NominalGB || g.TDPWatts <= 0 {
			t.Errorf("%s: inconsistent rates or memory: %+v", g.ID, g)
		}
		if g.Price.PerGPUHour <= 0 || g.Price.Date == "" || g.Price.Source == "" {
			t.Errorf("%s: price lacks figure, date or source: %+v", g.ID, g.Price)
		}
	}
}

// Kimi-K2.5's compressed-tensors W4A16 scheme: 4.5 bits a routed expert's
// weight (group 32, BF16 scales), everything its ignore list names in
// BF16: about 594 GB (Kimi-K2-Thinking, the same scheme, is quoted at
// 594 GB), against Kimi-K2's FP8 1,029 GB.
func TestKimiK25INT4Experts(t *testing.T) {
	m, err := LoadHFConfig("testdata/kimi-k2.5.json", "moonshotai/Kimi-K2.5")
	if err != nil {
		t.Fatal(err)
	}
	bits, expertsOnly := m.QuantBits(m.Quantization)
	got := m.WeightBytes("")
	t.Logf("Kimi-K2.5: %.1f GB at %.2f bits a routed expert's weight (experts only: %v)", got/1e9, bits, expertsOnly)
	if m.Quantization != "compressed-tensors" || bits != 4.5 || !expertsOnly || math.Abs(got/594e9-1) > 0.03 {
		t.Errorf("Kimi-K2.5: %q, %.2f bits, experts only %v, %.1f GB", m.Quantization, bits, expertsOnly, got/1e9)
	}
	// A W8A8 compressed-tensors checkpoint stays FP8.
	const w8a8 = `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"intermediate_size":128,"vocab_size":10,"quantization_config":{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":8,"type":"float"},"input_activations":{"num_bits":8,"type":"float"}}}}}`
	if m, err := ParseHFConfig(strings.NewReader(w8a8), ""); err != nil || m.Quantization != "fp8" || m.WeightBits != 0 {
		t.Errorf("W8A8 compressed-tensors: %q, %v bits, %v", m.Quantization, m.WeightBits, err)
	}
}

// The catalog lists no model every command refuses: each entry is
// simulable.
func TestCatalogModelsSimulable(t *testing.T) {
	for _, m := range Models() {
		if err := m.Simulable(); err != nil {
			t.Errorf("%s: %v", m.ID, err)
		}
	}
}

// Qwen3-Next and Qwen3.5's layer kinds from config.json: linear
// attention where layer_types says so, else in all but every
// full_attention_interval-th layer; the attention layers' output gate
// unless attn_output_gate is false. Another architecture's linear-
// attention fields stay refused by name.
func TestLinearAttentionLayerKinds(t *testing.T) {
	const base = `"num_hidden_layers":8,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":32,"vocab_size":100,` +
		`"linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":8,"linear_value_head_dim":8,"linear_conv_kernel_dim":4`
	for _, tt := range []struct {
		extra        string
		linear, full int
		gate         bool
	}{
		{`"architectures":["Qwen3NextForCausalLM"],"full_attention_interval":4`, 6, 2, true},
		{`"architectures":["Qwen3NextForCausalLM"],"full_attention_interval":2,"attn_output_gate":false`, 4, 4, false},
		{`"architectures":["Qwen3_5MoeForCausalLM"],"full_attention_interval":4,"layer_types":["linear_attention","full_attention","linear_attention","full_attention","linear_attention","full_attention","linear_attention","full_attention"]`, 4, 4, true},
	} {
		m, err := ParseHFConfig(strings.NewReader(`{`+base+`,`+tt.extra+`}`), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Simulable(); err != nil || m.Linear == nil || m.Linear.Layers != tt.linear || m.FullLayers() != tt.full || m.AttnOutputGate != tt.gate {
			t.Errorf("%s: %v; linear %+v, %d full layers, gate %v; want %d linear, %d full, gate %v", tt.extra, err, m.Linear, m.FullLayers(), m.AttnOutputGate, tt.linear, tt.full, tt.gate)
		}
	}
	// The gate doubles the query projection; the linear layers have their own.
	m, _ := ParseHFConfig(strings.NewReader(`{`+base+`,"architectures":["Qwen3NextForCausalLM"],"full_attention_interval":4}`), "")
	if got, want := m.AttentionParams(), 64.0*16*(2*4+2*2)+4*16*64; got != want {
		t.Errorf("gated attention: %v parameters, want %v", got, want)
	}
	// in_proj_qkvz, in_proj_ba, the convolution over q, k, v and out_proj.
	if got, want := m.Linear.Params(64), 64.0*(2*16+2*32)+64*2*4+(2*16+32)*4+32*64; got != want {
		t.Errorf("Gated DeltaNet layer: %v parameters, want %v", got, want)
	}
	if _, err := ParseHFConfig(strings.NewReader(`{`+base+`,"architectures":["Qwen3NextForCausalLM"],"layer_types":["linear_attention"]}`), ""); err == nil || !strings.Contains(err.Error(), "layer_types") {
		t.Errorf("a short layer_types: %v", err)
	}
	// The same fields under an architecture whose linear attention is not Gated DeltaNet.
	m, _ = ParseHFConfig(strings.NewReader(`{`+base+`,"architectures":["KimiLinearForCausalLM"],"full_attention_interval":4}`), "")
	if err := m.Simulable(); err == nil || !strings.Contains(err.Error(), "full_attention_interval") || !strings.Contains(err.Error(), "KimiLinearForCausalLM") {
		t.Errorf("another linear attention: %v", err)
	}
}

// DeepSeek Sparse Attention from config.json: MLA with index_topk has
// an indexer in every layer, whose FP8 keys (132 bytes for 128
// dimensions) sit beside the latent; an FP8 latent is vLLM's 656-byte
// fp8_ds_mla record. Shared indexers (GLM-5.2's index_topk_freq) and an
// indexer without MLA are refused by name.
func TestSparseAttention(t *testing.T) {
	m, err := LoadHFConfig("testdata/deepseek-v3.2.json", "")
	if err != nil {
		t.Fatal(err)
	}
	want := SparseAttention{TopK: 2048, IndexHeads: 64, IndexHeadDim: 128}
	if m.Sparse == nil || *m.Sparse != want {
		t.Fatalf("Sparse = %+v, want %+v", m.Sparse, want)
	}
	if got := m.KVBytesPerLayerToken(1); got != 656+132 {
		t.Errorf("FP8 KV a token and layer: %v bytes, want 656 + 132", got)
	}
	if got := m.KVBytesPerLayerToken(2); got != 1152+132 {
		t.Errorf("BF16 KV a token and layer: %v bytes, want 1152 + 132", got)
	}
	// wq_b from the query latent, wk and weights_proj from the hidden state.
	if got := m.Sparse.IndexerParams(7168, 1536); got != 1536*64*128+7168*128+7168*64 {
		t.Errorf("indexer parameters %v", got)
	}
	const mla = `"num_hidden_layers":4,"hidden_size":64,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"kv_lora_rank":32,"q_lora_rank":32,"qk_rope_head_dim":8,"qk_nope_head_dim":16,"v_head_dim":16,"index_n_heads":4,"index_head_dim":16,"index_topk":64`
	for _, tt := range []struct{ cfg, want string }{
		{`{` + mla + `,"architectures":["GlmMoeDsaForCausalLM"]}`, ""},
		{`{` + mla + `,"architectures":["GlmMoeDsaForCausalLM"],"index_topk_freq":4,"index_skip_topk_offset":3}`, "index_topk_freq 4"},
		{`{` + mla + `,"architectures":["GlmMoeDsaForCausalLM"],"index_topk_pattern":"FSSS"}`, "index_topk_pattern"},
		{`{"num_hidden_layers":4,"hidden_size":64,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"index_topk":64}`, "index_topk 64 without multi-head latent attention"},
	} {
		m, err := ParseHFConfig(strings.NewReader(tt.cfg), "")
		if err != nil {
			t.Fatal(err)
		}
		err = m.Simulable()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: Simulable = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

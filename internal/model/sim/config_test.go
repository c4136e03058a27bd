package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

func TestParseArgs(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"vllm positional", []string{"serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "2", "--max-num-seqs=64", "--gpu-memory-utilization", "0.85"}, nil,
			func(t *testing.T, c Config) {
				if c.Engine != engine.VLLM || c.TP != 2 || c.MaxRunningRequests != 64 || c.MemFraction != 0.85 || c.NumGPUs != 2 || c.MaxBatchedTokens != 8192 {
					t.Errorf("%+v", c)
				}
			}},
		{"vllm --model with sim env", []string{"--model", "llama-3.1-8b", "--enforce-eager", "--no-enable-prefix-caching", "--disable-log-requests"},
			map[string]string{engine.EnvSimGPU: "A100-80G", engine.EnvSimNumGPUs: "4", engine.EnvSimTimeScale: "10"},
			func(t *testing.T, c Config) {
				// A100: the small defaults (256 seqs, 2048 tokens).
				if c.GPU.ID != "A100-80G" || c.NumGPUs != 4 || c.TimeScale != 10 || c.CUDAGraphs || c.PrefixCaching || c.MaxRunningRequests != 256 || c.MaxBatchedTokens != 2048 {
					t.Errorf("%+v", c)
				}
			}},
		{"flag beats env", []string{"llama-3.1-8b", "--gpu", "H200"}, map[string]string{engine.EnvSimGPU: "L4"},
			func(t *testing.T, c Config) {
				if c.GPU.ID != "H200" {
					t.Errorf("GPU %s", c.GPU.ID)
				}
			}},
		{"sglang", []string{"--model-path", "Qwen/Qwen2.5-7B-Instruct", "--tp-size", "2", "--mem-fraction-static", "0.8", "--max-running-requests", "128", "--chunked-prefill-size", "4096", "--disable-radix-cache", "--context-length", "8192", "--port", "30000"}, nil,
			func(t *testing.T, c Config) {
				if c.Engine != engine.SGLang || c.TP != 2 || c.MemFraction != 0.8 || c.MaxRunningRequests != 128 || c.MaxBatchedTokens != 4096 || c.PrefixCaching || c.MaxModelLen != 8192 || c.Port != 30000 || c.BlockSize != 1 {
					t.Errorf("%+v", c)
				}
			}},
		{"sglang defaults and --model from the launcher", []string{"--model", "qwen2.5-7b", "--engine", "sglang", "--tp-size", "4"}, nil,
			func(t *testing.T, c Config) {
				if c.Engine != engine.SGLang || c.MemFraction != 0.823 || !c.ChunkedPrefill || c.MaxBatchedTokens != 8192 || c.CUDAGraphMaxBS != 512 {
					t.Errorf("%+v", c)
				}
			}},
		{"sglang chunked prefill off", []string{"--model-path", "qwen2.5-7b", "--chunked-prefill-size", "-1", "--context-length", "4096"}, nil,
			func(t *testing.T, c Config) {
				if c.ChunkedPrefill || c.MaxBatchedTokens < 4096 {
					t.Errorf("%+v", c)
				}
			}},
		// SGLang profiles no prefill at start-up (TestSGLangStartsWithoutPrefillProfile):
		// a whole-context prefill batch is accepted and the engine starts.
		{"sglang chunked prefill off at 131072", []string{"--model-path", "llama-3.1-8b", "--chunked-prefill-size", "-1", "--context-length", "131072", "--gpu", "H100-SXM"}, nil,
			func(t *testing.T, c Config) {
				if c.ChunkedPrefill || c.MaxBatchedTokens != 131072 {
					t.Errorf("%+v", c)
				}
				if _, err := Estimate(c); err != nil {
					t.Errorf("does not start: %v", err)
				}
			}},
		{"fp8 id and kv", []string{"meta-llama/Llama-3.3-70B-Instruct-FP8", "-tp", "4", "--kv-cache-dtype", "fp8"}, nil,
			func(t *testing.T, c Config) {
				if c.Quantization != "fp8" || c.kvBytesPerElem() != 1 || c.ModelID != "meta-llama/Llama-3.3-70B-Instruct-FP8" {
					t.Errorf("%+v", c)
				}
			}},
		{"served name and load time", []string{"llama-3.1-8b", "--served-model-name", "m", "--sim-load-time", "250ms"}, nil,
			func(t *testing.T, c Config) {
				if c.ModelID != "m" || c.LoadTime != 250*time.Millisecond {
					t.Errorf("%+v", c)
				}
			}},
		{"model config file", []string{"my/model", "--model-config", "../../serving/catalog/testdata/qwen3-30b-a3b.json"}, nil,
			func(t *testing.T, c Config) {
				if !c.Model.MoE() || c.Model.ID != "my/model" {
					t.Errorf("%+v", c.Model)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clear(env)
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := ParseArgs(tt.args, getenv)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"--max-num-seqs", "8"}, "no model"},
		{"unknown flag", []string{"llama-3.1-8b", "--max-num-seq", "8"}, "unrecognized arguments: --max-num-seq"},
		{"missing value", []string{"llama-3.1-8b", "--max-model-len"}, "expected one argument"},
		{"bad int", []string{"llama-3.1-8b", "--max-num-seqs", "many"}, "invalid int value"},
		{"mixed engines", []string{"llama-3.1-8b", "--max-num-seqs", "8", "--tp-size", "2"}, "one command line is one engine's"},
		{"tp divides heads", []string{"llama-3.1-8b", "-tp", "3", "--num-gpus", "3"}, "divisible by tensor parallel size"},
		{"too few GPUs", []string{"llama-3.1-8b", "-tp", "4", "--num-gpus", "2"}, "World size (4) is larger than the number of available GPUs (2)"},
		{"budget below seqs", []string{"llama-3.1-8b", "--max-num-seqs", "512", "--max-num-batched-tokens", "256"}, "must be greater than or equal to max_num_seqs"},
		{"len over model", []string{"qwen2.5-7b", "--max-model-len", "100000"}, "greater than the derived max_model_len"},
		{"quant mismatch", []string{"meta-llama/Llama-3.3-70B-Instruct-FP8", "-q", "awq"}, "does not match"},
		{"unknown quant", []string{"llama-3.1-8b", "-q", "bitsandbytes"}, "models fp8, awq, gptq, mxfp4 and modelopt_fp4 (nvfp4)"},
		{"bad kv dtype", []string{"llama-3.1-8b", "--kv-cache-dtype", "int4"}, "kv-cache-dtype"},
		{"bad time scale", []string{"llama-3.1-8b", "--time-scale", "0"}, "--time-scale"},
		{"absurd time scale", []string{"llama-3.1-8b", "--time-scale", "1e30"}, "at most 1000"},
		{"bad fraction", []string{"llama-3.1-8b", "--gpu-memory-utilization", "1.5"}, "memory fraction"},
		{"two models", []string{"a", "b"}, "unrecognized arguments: b"},
		{"bool with value", []string{"llama-3.1-8b", "--enforce-eager=yes"}, "ignored explicit argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseArgs(tt.args, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrBadArgs) {
				t.Fatalf("err = %v, want ErrBadArgs mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
		})
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	_, err := ParseArgs([]string{"llama-3.1-8b", "--api-key", "sk-secret-123", "--max-num-seqs", "x"}, nil)
	if err == nil || strings.Contains(err.Error(), "sk-secret-123") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("llama-3.1-8b --max-num-seqs 8 -tp 2")
	f.Add("--model-path qwen2.5-7b --tp-size 2 --mem-fraction-static 0.8")
	f.Add("serve llama-3.1-8b --max-model-len=4096 --kv-cache-dtype fp8 --gpu L4")
	f.Fuzz(func(t *testing.T, line string) {
		cfg, err := ParseArgs(strings.Fields(line), nil)
		if err != nil {
			if !errors.Is(err, ErrBadArgs) && !errors.Is(err, ErrOOM) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if cfg.TP < 1 || cfg.MaxModelLen < 1 || cfg.BlockSize < 1 || cfg.MaxBatchedTokens < 1 || cfg.TimeScale <= 0 {
			t.Fatalf("accepted an unusable config: %+v", cfg)
		}
		_, _ = Estimate(cfg)
	})
}

func TestCountTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0}, {"a", 1}, {"four", 1}, {"hello", 2}, {"a b  c\n", 3}, {"abcdefghi", 3}, {"héllo", 2},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := CountTokens(tt.in); got != tt.want || len(TokenIDs(tt.in, 100)) != tt.want {
				t.Errorf("CountTokens(%q) = %d, ids %d, want %d", tt.in, got, len(TokenIDs(tt.in, 100)), tt.want)
			}
		})
	}
	for i := range 40 {
		if CountTokens(outputText(i)) != 1 {
			t.Fatalf("output token %d %q is not one token", i, outputText(i))
		}
	}
}

// TestSettingsRoundTrip: every setting of the table reads back what it
// wrote, and a Config's Settings build the same Config again; every name
// they hold is one the engine's flag table knows for the engine.
func TestSettingsRoundTrip(t *testing.T) {
	samples := []any{7, 0.7, "fp8", true, false, 250 * time.Millisecond}
	for _, st := range settings {
		if engine.Flag(engine.VLLM, st.name) == "" && engine.Flag(engine.SGLang, st.name) == "" {
			if _, ok := engine.TypeOf(st.name); !ok {
				t.Errorf("%s: not a setting of the engine's flag table", st.name)
			}
		}
		read := 0
		for _, v := range samples {
			got, ok := st.parse(engine.Settings{st.name: v}, st.name)
			if !ok {
				continue
			}
			read++
			var c, def Config
			switchesOn(&c)
			switchesOn(&def)
			st.apply(&c, got)
			back, ok := st.value(&c)
			if !ok && reflect.DeepEqual(c, def) { // a switch at its default writes nothing (whenOn, whenOff)
				continue
			}
			if !ok || fmt.Sprint(back) != fmt.Sprint(v) { // a float setting reads 7 as 7.0
				t.Errorf("%s: %v applied reads back %v (%v)", st.name, v, back, ok)
			}
		}
		if read == 0 {
			t.Errorf("%s: reads none of %v", st.name, samples)
		}
	}
	for _, tc := range []struct {
		e   engine.Engine
		set engine.Settings
	}{
		{engine.VLLM, engine.Settings{}},
		{engine.VLLM, engine.Settings{"tensor_parallel": 2, "max_running_requests": 64, "max_batched_tokens": 8192,
			"gpu_memory_fraction": 0.85, "max_model_len": 8192, "kv_cache_dtype": "fp8", "prefix_caching": false,
			"chunked_prefill": false, "block_size": 32, "cuda_graphs": false, "async_scheduling": false}},
		{engine.SGLang, engine.Settings{}},
		{engine.SGLang, engine.Settings{"tensor_parallel": 2, "max_running_requests": 128, "max_batched_tokens": 4096,
			"max_prefill_tokens": 8192, "gpu_memory_fraction": 0.8, "quantization": "fp8", "mixed_chunk": true,
			"cuda_graph_max_bs": 64, "chunked_prefill": false}},
	} {
		c, err := FromSettings(tc.e, "meta-llama/Llama-3.1-8B-Instruct", "", "H100-SXM", 0, tc.set)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.e, tc.set, err)
		}
		set := c.Settings()
		for name, v := range tc.set {
			if set[name] != v {
				t.Errorf("%s: %s %v renders %v", tc.e, name, v, set[name])
			}
		}
		again, err := FromSettings(tc.e, "meta-llama/Llama-3.1-8B-Instruct", "", "H100-SXM", 0, set)
		if err != nil {
			t.Fatalf("%s: %v: %v", tc.e, set, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Errorf("%s: %v builds\n%+v, want\n%+v", tc.e, set, again, c)
		}
		tunable := engine.Settings{}
		for name, v := range set {
			if _, ok := engine.TypeOf(name); ok {
				tunable[name] = v
			} else if engine.Flag(tc.e, name) == "" {
				t.Errorf("%s: %s has no flag of this engine", tc.e, name)
			}
		}
		if _, err := engine.Render(tc.e, tunable); err != nil {
			t.Errorf("%s: %v", tc.e, err)
		}
	}
}

// TestFromModel: a model passed by content builds the engine its
// config.json's path does.
func TestFromModel(t *testing.T) {
	const path = "../../serving/catalog/testdata/qwen3-30b-a3b.json"
	set := engine.Settings{"tensor_parallel": 2, "max_model_len": 8192}
	want, err := FromSettings(engine.VLLM, "my/model", path, "H100-SXM", 0, set)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := catalog.ParseHFConfig(bytes.NewReader(raw), "my/model")
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromModel(engine.VLLM, "my/model", m, "H100-SXM", 0, set)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromModel\n%+v, FromSettings\n%+v", got, want)
	}
}

// TestSGLangMemoryDefaults: SGLang's chunk, CUDA graph batch and memory
// fraction by the GPU's memory (sgl-project/sglang PR #10975), worked by
// hand from server_args.py's rule.
func TestSGLangMemoryDefaults(t *testing.T) {
	for _, tt := range []struct {
		gpu         string
		tp          int
		chunk, bs   int
		frac        float64
		dpAttention int
	}{
		{"H100-SXM", 1, 8192, 256, 0.834, 1}, // 512 + 12,288 + 512 + 128 MiB of 81,080
		{"H100-SXM", 4, 8192, 512, 0.823, 1}, // 512 + 12,288 + 1,024 + 512
		{"H200", 8, 8192, 512, 0.896, 1},     // 512 + 12,288 + 1,024 + 1,024 of 143,155
		{"B200", 4, 16384, 512, 0.855, 1},    // 512 + 24,576 + 1,024 + 512 of 183,357
		{"L40S", 1, 4096, 32, 0.850, 1},      // 512 + 6,144 + 64 + 128 of 45,599
		{"A100-80G", 2, 8192, 256, 0.834, 1}, // 512 + 12,288 + 512 + 256 of 81,050: 0.8335
	} {
		g, err := catalog.LookupGPU(tt.gpu)
		if err != nil {
			t.Fatal(err)
		}
		chunk, bs, frac := sglangMemoryDefaults(g.MemoryGiB*1024, tt.tp, 1, tt.dpAttention, false, 0, 0)
		if chunk != tt.chunk || bs != tt.bs || math.Abs(frac-tt.frac) > 0.0011 {
			t.Errorf("%s TP%d: chunk %d, graph batch %d, fraction %.3f; want %d, %d, %.3f", tt.gpu, tt.tp, chunk, bs, frac, tt.chunk, tt.bs, tt.frac)
		}
	}
	// A user's chunk sets the reserve: 1.5 MiB a token of it.
	if _, _, frac := sglangMemoryDefaults(81080, 1, 1, 1, false, 16384, 0); frac != 0.683 {
		t.Errorf("H100 TP1 with a 16K chunk: fraction %.3f, want 0.683 (512 + 24,576 + 512 + 128 MiB of 81,080)", frac)
	}
}

// TestKVCacheDTypes: the simulator takes every kv_cache_dtype of the engine
// flag table and knows its element size (auto the model's two bytes, each
// fp8 spelling one), and refuses another value naming the table's.
func TestKVCacheDTypes(t *testing.T) {
	kn, ok := engine.LookupKnob("kv_cache_dtype")
	if !ok || len(kn.Choices) < 2 {
		t.Fatalf("kv_cache_dtype knob %+v", kn)
	}
	for _, d := range kn.Choices {
		c, err := FromSettings(engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct", "", "H100-SXM", 0, engine.Settings{"kv_cache_dtype": d})
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		want := 1.0
		if d == "auto" {
			want = 2
		}
		if got := c.kvBytesPerElem(); got != want {
			t.Errorf("%s: %v bytes per KV element, want %v", d, got, want)
		}
	}
	_, err := FromSettings(engine.VLLM, "meta-llama/Llama-3.1-8B-Instruct", "", "H100-SXM", 0, engine.Settings{"kv_cache_dtype": "int4"})
	if err == nil || !strings.Contains(err.Error(), strings.Join(kn.Choices[:len(kn.Choices)-1], ", ")) {
		t.Errorf("int4: %v", err)
	}
}

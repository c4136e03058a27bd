package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSettingsAccessorsAfterJSON(t *testing.T) {
	in := Settings{"tensor_parallel": 2, "gpu_memory_fraction": 0.9, "quantization": "fp8", "prefix_caching": true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Settings
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Int("tensor_parallel"); !ok || v != 2 {
		t.Errorf("Int = %v, %v", v, ok)
	}
	if v, ok := out.Float("gpu_memory_fraction"); !ok || v != 0.9 {
		t.Errorf("Float = %v, %v", v, ok)
	}
	if v, ok := out.String("quantization"); !ok || v != "fp8" {
		t.Errorf("String = %v, %v", v, ok)
	}
	if v, ok := out.Bool("prefix_caching"); !ok || !v {
		t.Errorf("Bool = %v, %v", v, ok)
	}
	if _, ok := out.Int("gpu_memory_fraction"); ok {
		t.Error("Int accepted 0.9")
	}
	if _, ok := out.Int("missing"); ok {
		t.Error("Int accepted a missing setting")
	}
	// Rendering is the same before and after the round trip.
	a, _ := Render(VLLM, in)
	c, err := Render(VLLM, out)
	if err != nil || !reflect.DeepEqual(a, c) {
		t.Errorf("render after JSON: %q (%v), before %q", c, err, a)
	}
}

func TestRender(t *testing.T) {
	full := Settings{
		"tensor_parallel": 2, "pipeline_parallel": 1, "data_parallel": 1,
		"max_running_requests": 256, "max_batched_tokens": 8192,
		"gpu_memory_fraction": 0.9, "max_model_len": 16000,
		"quantization": "fp8", "kv_cache_dtype": "fp8",
		"prefix_caching": false, "chunked_prefill": true,
		"block_size": 16, "cuda_graphs": false,
	}
	tests := []struct {
		name   string
		engine Engine
		s      Settings
		want   string
	}{
		{"vllm full", VLLM, full, "--tensor-parallel-size 2 --pipeline-parallel-size 1 --data-parallel-size 1 --max-num-seqs 256 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 --max-model-len 16000 --quantization fp8 --kv-cache-dtype fp8 --no-enable-prefix-caching --enable-chunked-prefill --block-size 16 --enforce-eager"},
		{"sglang full", SGLang, full, "--tp-size 2 --pp-size 1 --dp-size 1 --max-running-requests 256 --chunked-prefill-size 8192 --max-prefill-tokens 8192 --mem-fraction-static 0.9 --context-length 16000 --quantization fp8 --kv-cache-dtype fp8_e4m3 --disable-radix-cache --page-size 16 --disable-cuda-graph"},
		{"vllm defaults render nothing", VLLM, Settings{"quantization": "none", "kv_cache_dtype": "auto", "cuda_graphs": true}, ""},
		{"vllm prefix caching on", VLLM, Settings{"prefix_caching": true}, "--enable-prefix-caching"},
		{"sglang prefix caching on", SGLang, Settings{"prefix_caching": true, "cuda_graphs": true}, ""},
		{"sglang chunked prefill off", SGLang, Settings{"chunked_prefill": false}, "--chunked-prefill-size -1"},
		{"sglang chunked prefill off with budget", SGLang, Settings{"chunked_prefill": false, "max_batched_tokens": 4096}, "--max-prefill-tokens 4096 --chunked-prefill-size -1"},
		{"vllm chunked prefill off", VLLM, Settings{"chunked_prefill": false}, "--no-enable-chunked-prefill"},
		{"json floats", VLLM, Settings{"tensor_parallel": 4.0}, "--tensor-parallel-size 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.engine, tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("\n got %s\nwant %s", strings.Join(got, " "), tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		engine Engine
		s      Settings
		want   error
		text   string
	}{
		{"unknown engine", "trtllm", Settings{}, ErrBadValue, `bad value: engine "trtllm" (want vllm or sglang)`},
		{"unknown setting", VLLM, Settings{"temperature": 8}, ErrUnknownName, `unknown setting "temperature"`},
		{"vllm flag name", VLLM, Settings{"max_num_seqs": 8}, ErrUnknownName, `unknown setting "max_num_seqs" (did you mean max_running_requests? --max-num-seqs is vLLM's flag)`},
		{"sglang flag name", VLLM, Settings{"mem-fraction-static": 0.8}, ErrUnknownName, `unknown setting "mem-fraction-static" (did you mean gpu_memory_fraction? --mem-fraction-static is SGLang's flag)`},
		{"sglang custom flag name", VLLM, Settings{"chunked_prefill_size": 8}, ErrUnknownName, `unknown setting "chunked_prefill_size" (did you mean max_batched_tokens? --chunked-prefill-size is SGLang's flag)`},
		{"vllm bool flag name", VLLM, Settings{"enforce_eager": true}, ErrUnknownName, `unknown setting "enforce_eager" (did you mean cuda_graphs? --enforce-eager is vLLM's flag)`},
		{"close setting", VLLM, Settings{"block_sizes": 8}, ErrUnknownName, `unknown setting "block_sizes" (did you mean block_size?)`},
		{"role tensor parallel, vLLM's suffix", VLLM, Settings{"prefill_tensor_parallel_size": 2}, ErrUnknownName, `unknown setting "prefill_tensor_parallel_size" (did you mean prefill_tensor_parallel?)`},
		{"wrong type", VLLM, Settings{"prefix_caching": "yes"}, ErrBadValue, "bad value: prefix_caching must be true or false, not \"yes\""},
		{"out of range", SGLang, Settings{"gpu_memory_fraction": 1.5}, ErrBadValue, "bad value: gpu_memory_fraction 1.5 is outside (0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.engine, tt.s)
			if !errors.Is(err, tt.want) || err.Error() != tt.text {
				t.Errorf("got %v, want %q (%v)", err, tt.text, tt.want)
			}
		})
	}
}

func TestServeCommand(t *testing.T) {
	s := Settings{"tensor_parallel": 2, "quantization": "none", "max_running_requests": 64}
	extra := []string{"--disable-log-requests"}
	tests := []struct {
		engine Engine
		want   string
	}{
		{VLLM, "vllm serve m/x --tensor-parallel-size 2 --max-num-seqs 64 --disable-log-requests"},
		{SGLang, "python3 -m sglang.launch_server --model-path m/x --tp-size 2 --max-running-requests 64 --disable-log-requests"},
		{"other", ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine), func(t *testing.T) {
			got := strings.Join(ServeCommand(tt.engine, "m/x", s, extra), " ")
			if got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

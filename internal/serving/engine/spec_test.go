package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestRenderSpeculative: speculative decoding renders as vLLM's one JSON
// flag and as SGLang's chain of flags, quoted as one shell word, and reads
// back to the same settings.
func TestRenderSpeculative(t *testing.T) {
	s := Settings{"spec_method": "eagle", "spec_tokens": 3, "spec_draft_model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}
	tests := []struct {
		engine Engine
		want   string
	}{
		{VLLM, `vllm serve m/x --speculative-config '{"method":"eagle","model":"yuhuili/EAGLE-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}'`},
		{SGLang, "python3 -m sglang.launch_server --model-path m/x --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B"},
	}
	for _, tt := range tests {
		t.Run(string(tt.engine), func(t *testing.T) {
			argv := ServeCommand(tt.engine, "m/x", s, nil)
			if got := ShellJoin(argv); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			start := 2
			if tt.engine == SGLang {
				start = 3
			}
			c, err := ParseCommand(argv[start:], nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Settings, s) && tt.engine == VLLM {
				t.Errorf("read back %v, want %v", c.Settings, s)
			}
			if tt.engine == SGLang {
				want := Settings{"spec_method": "eagle", "spec_tokens": 3, "spec_draft_model": s["spec_draft_model"], "spec_eagle_topk": 1, "spec_verify_tokens": 4}
				if !reflect.DeepEqual(c.Settings, want) {
					t.Errorf("read back %v, want %v", c.Settings, want)
				}
			}
		})
	}
	// Off, or tokens without a method, renders nothing.
	for _, s := range []Settings{{"spec_method": "none", "spec_tokens": 3}, {"spec_tokens": 2}} {
		for _, e := range Engines {
			if got, err := Render(e, s); err != nil || len(got) != 0 {
				t.Errorf("%s %v: %q, %v", e, s, got, err)
			}
		}
	}
	if got, _ := Render(SGLang, Settings{"spec_method": "mtp", "spec_tokens": 1}); strings.Join(got, " ") != "--speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2" {
		t.Errorf("sglang mtp: %q", got)
	}
	if got, _ := Render(VLLM, Settings{"spec_method": "ngram", "spec_tokens": 4}); strings.Join(got, " ") != `--speculative-config {"method":"ngram","num_speculative_tokens":4}` {
		t.Errorf("vllm ngram: %q", got)
	}
}

func TestParseSpeculativeConfig(t *testing.T) {
	tests := []struct {
		arg  string
		want Settings
		err  string
	}{
		{`{"method":"deepseek_mtp","num_speculative_tokens":1}`, Settings{"spec_method": "mtp", "spec_tokens": 1}, ""},
		{`{"model":"RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3","num_speculative_tokens":2}`, Settings{"spec_method": "eagle3", "spec_tokens": 2, "spec_draft_model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"}, ""},
		{`{"model":"meta-llama/Llama-3.2-1B-Instruct","num_speculative_tokens":5,"draft_tensor_parallel_size":1}`, Settings{"spec_method": "draft_model", "spec_tokens": 5, "spec_draft_model": "meta-llama/Llama-3.2-1B-Instruct"}, ""},
		{`{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}`, Settings{"spec_method": "ngram", "spec_tokens": 4}, ""},
		{`{"method":"medusa","num_speculative_tokens":4}`, nil, `method "medusa": servetune models`},
		{`{"method":"eagle","num_speculative_tokens":1.5}`, nil, "num_speculative_tokens: want a positive integer"},
		{`eagle`, nil, "invalid JSON object"},
		{`{}`, nil, "neither method nor model given"},
	}
	for _, tt := range tests {
		c, err := ParseCommand([]string{"m/x", "--speculative-config", tt.arg}, nil)
		if tt.err != "" {
			if !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(c.Settings, tt.want) || c.Engine != VLLM {
			t.Errorf("%s: %v %v (%s), want %v", tt.arg, c.Settings, err, c.Engine, tt.want)
		}
	}
	c, err := ParseCommand([]string{"--model-path", "m/x", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5", "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32", "--spec-acceptance", "0.6"}, nil)
	want := Settings{"spec_method": "eagle3", "spec_tokens": 5, "spec_eagle_topk": 8, "spec_verify_tokens": 32, "sim_spec_acceptance": 0.6}
	if err != nil || !reflect.DeepEqual(c.Settings, want) || c.Engine != SGLang {
		t.Errorf("sglang: %v %v (%s), want %v", c.Settings, err, c.Engine, want)
	}
	if _, err := ParseCommand([]string{"--model-path", "m/x", "--speculative-algorithm", "MEDUSA"}, nil); err == nil || !strings.Contains(err.Error(), "EAGLE, EAGLE3, NEXTN, NGRAM, STANDALONE") {
		t.Errorf("sglang MEDUSA: %v", err)
	}
}

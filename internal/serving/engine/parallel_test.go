package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Expert and data parallelism as each engine spells them: vLLM's
// --enable-expert-parallel over --tensor-parallel-size × --data-parallel-size;
// SGLang's --tp-size spanning the server under --enable-dp-attention, and
// --ep-size.
func TestRenderExpertAndDataParallel(t *testing.T) {
	tests := []struct {
		name   string
		engine Engine
		s      Settings
		want   string
	}{
		{"vllm dp8 ep", VLLM, Settings{"tensor_parallel": 1, "data_parallel": 8, "expert_parallel": true, "dp_attention": true},
			"--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"},
		{"vllm tp8 ep", VLLM, Settings{"tensor_parallel": 8, "expert_parallel": true}, "--tensor-parallel-size 8 --enable-expert-parallel"},
		{"vllm ep off", VLLM, Settings{"tensor_parallel": 8, "expert_parallel": false, "dp_attention": false}, "--tensor-parallel-size 8"},
		{"sglang dp8 ep", SGLang, Settings{"tensor_parallel": 1, "data_parallel": 8, "expert_parallel": true, "dp_attention": true},
			"--tp-size 8 --dp-size 8 --ep-size 8 --enable-dp-attention"},
		{"sglang tp2 dp4 attention", SGLang, Settings{"tensor_parallel": 2, "data_parallel": 4, "dp_attention": true},
			"--tp-size 8 --dp-size 4 --enable-dp-attention"},
		{"sglang tp8 ep", SGLang, Settings{"tensor_parallel": 8, "expert_parallel": true}, "--tp-size 8 --ep-size 8"},
		{"sglang dp replicas", SGLang, Settings{"tensor_parallel": 4, "data_parallel": 2}, "--tp-size 4 --dp-size 2"},
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
			// The rendered flags read back as the same settings, less
			// those the engine has no flag for or renders nothing at.
			back, err := ParseFlags(tt.engine, got)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.s.Clone()
			for k, v := range want {
				if b, ok := v.(bool); ok && !b || k == "dp_attention" && tt.engine == VLLM {
					delete(want, k)
				}
			}
			if back.Key() != want.Key() {
				t.Errorf("read back %s, want %s", back.Line(), want.Line())
			}
		})
	}
}

func TestParseExpertAndDataParallel(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Settings
		gpus int
	}{
		{"sglang dp attention", []string{"--model-path", "m", "--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep", "8"},
			Settings{"tensor_parallel": 1, "data_parallel": 8, "dp_attention": true, "expert_parallel": true}, 8},
		{"sglang ep size 1", []string{"--model-path", "m", "--tp-size", "8", "--ep-size", "1"},
			Settings{"tensor_parallel": 8, "expert_parallel": false}, 8},
		{"vllm", []string{"serve", "m", "-tp", "1", "-dp", "8", "--enable-expert-parallel"},
			Settings{"tensor_parallel": 1, "data_parallel": 8, "expert_parallel": true}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCommand(tt.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Settings, tt.want) {
				t.Errorf("settings %s, want %s", c.Settings.Line(), tt.want.Line())
			}
			if c.Settings.GPUs() != tt.gpus {
				t.Errorf("GPUs = %d, want %d", c.Settings.GPUs(), tt.gpus)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-path", "m", "--tp-size", "8", "--dp-size", "3", "--enable-dp-attention"}, "argument --dp-size: 3 does not divide --tp-size 8 (with --enable-dp-attention)"},
		{[]string{"--model-path", "m", "--ep-size", "x"}, `argument --ep-size: invalid int value: "x"`},
		{[]string{"serve", "m", "--enable-expert-parallel", "--enable-dp-attention"}, "--enable-expert-parallel is vLLM's flag and --enable-dp-attention is SGLang's"},
		// An engine named by the simulator's engine flag: the other engine's flag is named
		// with the named engine's own spelling of the setting.
		{[]string{"serve", "m", "--engine", "vllm", "--tp", "8"}, "--tp is SGLang's flag, not vLLM's (vLLM's is --tensor-parallel-size)"},
		{[]string{"--model-path", "m", "--engine", "sglang", "--max-num-seqs", "8"}, "--max-num-seqs is vLLM's flag, not SGLang's (SGLang's is --max-running-requests)"},
	} {
		_, err := ParseCommand(tc.args, nil)
		if !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCommand(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

package launcher

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestSimEnv(t *testing.T) {
	tests := []struct {
		name string
		s    Sim
		spec Spec
		want []string
	}{
		{"defaults", Sim{}, Spec{}, nil},
		{"count from GPUs", Sim{GPU: "H100-SXM", TimeScale: 20}, Spec{GPUs: []int{4, 5}}, []string{"SERVETUNE_SIM_GPU=H100-SXM", "SERVETUNE_SIM_NUM_GPUS=2", "SERVETUNE_SIM_TIME_SCALE=20"}},
		{"explicit count wins", Sim{NumGPUs: 8, TimeScale: 0.5}, Spec{GPUs: []int{0}}, []string{"SERVETUNE_SIM_NUM_GPUS=8", "SERVETUNE_SIM_TIME_SCALE=0.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.env(tt.spec); !slices.Equal(got, tt.want) {
				t.Errorf("env = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSimBadSpec(t *testing.T) {
	tests := []struct {
		name string
		s    Sim
		spec Spec
	}{
		{"no model", Sim{}, Spec{}},
		{"negative scale", Sim{TimeScale: -1}, Spec{Model: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.Launch(context.Background(), tt.spec); !errors.Is(err, ErrBadSpec) {
				t.Fatalf("Launch = %v, want ErrBadSpec", err)
			}
		})
	}
}

// TestSimServe runs the real `servetune sim serve` through the Sim launcher.
func TestSimServe(t *testing.T) {
	bin := requireSimServe(t)
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	s := &Sim{Binary: bin, GPU: "H100-SXM", TimeScale: 50, LoadTime: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := s.Launch(ctx, Spec{Model: model, GPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\nlogs:\n%s", err, in.Logs())
	}
	streamCompletion(t, in.Endpoint(), model)
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSimStartupOOM: a config that does not fit exits with vLLM's message.
func TestSimStartupOOM(t *testing.T) {
	bin := requireSimServe(t)
	s := &Sim{Binary: bin, GPU: "H100-SXM", NumGPUs: 1, TimeScale: 50, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := s.Launch(ctx, Spec{Model: "meta-llama/Llama-3.3-70B-Instruct", Args: []string{"--quantization", "fp8"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	err = in.Ready(ctx)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Ready = %v, want ErrExited\nlogs:\n%s", err, in.Logs())
	}
	ex := in.(Exiter)
	if got := Classify(ex.ExitCode(), false, in.Logs()); got != FailureOOM {
		t.Errorf("Classify = %q, want oom; exit %d, logs:\n%s", got, ex.ExitCode(), in.Logs())
	}
}

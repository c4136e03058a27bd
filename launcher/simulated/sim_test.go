package simulated

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

func TestSimBadSpec(t *testing.T) {
	tests := []struct {
		name string
		s    Sim
		spec launcher.Spec
	}{
		{"no model", Sim{}, launcher.Spec{}},
		{"negative scale", Sim{Scale: -1}, launcher.Spec{Model: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.Launch(context.Background(), tt.spec); !errors.Is(err, launcher.ErrBadSpec) {
				t.Fatalf("Launch = %v, want ErrBadSpec", err)
			}
		})
	}
}

// TestSimServe runs the real `servetune sim serve` through the Sim launcher.
func TestSimServe(t *testing.T) {
	bin := testengine.Binary(t)
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	s := &Sim{Binary: bin, GPU: "H100-SXM", Scale: 50, LoadTime: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := s.Launch(ctx, launcher.Spec{Model: model, GPUs: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\nlogs:\n%s", err, in.Logs())
	}
	testengine.StreamCompletion(t, in.Endpoint(), model)
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSimStartupOOM: a config that does not fit exits with vLLM's message.
func TestSimStartupOOM(t *testing.T) {
	bin := testengine.Binary(t)
	s := &Sim{Binary: bin, GPU: "H100-SXM", NumGPUs: 1, Scale: 50, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := s.Launch(ctx, launcher.Spec{Model: "meta-llama/Llama-3.3-70B-Instruct", Extra: []string{"--quantization", "fp8"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	err = in.Ready(ctx)
	if !errors.Is(err, launcher.ErrExited) {
		t.Fatalf("Ready = %v, want ErrExited\nlogs:\n%s", err, in.Logs())
	}
	ex := in.(launcher.Exiter)
	if got, _ := engine.Classify(ex.Exit(), false, in.Logs()); got != engine.FailOOM {
		t.Errorf("Classify = %q, want oom; exit %d, logs:\n%s", got, ex.Exit().Code, in.Logs())
	}
}

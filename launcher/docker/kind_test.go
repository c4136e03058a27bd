package docker

import (
	"errors"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
)

// decodeSection reads a launcher section through the registry.
func decodeSection(t *testing.T, src string) (launcher.Launcher, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	d := &yamlpos.Decoder{File: "l.yaml"}
	l, _ := launcher.Decode(d, doc.Content[0], launcher.Common{Engine: engine.VLLM, Model: "m", GPU: "H100-SXM", Study: "s"})
	return l, d.Err()
}

func TestDecodeHosts(t *testing.T) {
	l, err := decodeSection(t, `kind: docker
image: servetune-sim:dev
time_scale: 5
hosts:
  - {docker_host: "ssh://me@gpu-a:2222", address: 10.0.0.7, gpus: [0, 1]}
  - {docker_host: "unix:///var/run/docker.sock", gpus: [3]}
`)
	if err != nil {
		t.Fatal(err)
	}
	h := l.(*Hosts)
	if len(h.hosts) != 2 || h.hosts[0].Host != "ssh://me@gpu-a:2222" || h.hosts[0].Address != "10.0.0.7" || !h.hosts[1].NoGPU {
		t.Fatalf("hosts = %+v", h.hosts)
	}
	if c := h.Capabilities(); !slices.Equal(c.GPUs, []int{0, 1, 103}) || c.HostOf(103) != 1 || c.LocalGPUs || c.TimeScale != 5 {
		t.Errorf("GPUs %v, HostOf(103) %d, local %v, scale %v", c.GPUs, c.HostOf(103), c.LocalGPUs, c.TimeScale)
	}
	if !slices.Contains(h.hosts[0].Env, engine.EnvSimTimeScale+"=5") || !slices.Contains(h.hosts[0].Env, engine.EnvSimGPU+"=H100-SXM") {
		t.Errorf("sim env = %v", h.hosts[0].Env)
	}

	l, err = decodeSection(t, "kind: docker\nimage: vllm/vllm-openai:v0.11.0\ndocker_host: tcp://127.0.0.1:2375\ngpus: [0, 1]\n")
	if err != nil {
		t.Fatal(err)
	}
	h = l.(*Hosts)
	if c := h.Capabilities(); len(h.hosts) != 1 || h.hosts[0].Host != "tcp://127.0.0.1:2375" || h.hosts[0].NoGPU || !c.LocalGPUs || !slices.Equal(c.GPUs, []int{0, 1}) {
		t.Errorf("one host: %+v, local %v, GPUs %v", h.hosts[0], c.LocalGPUs, c.GPUs)
	}
	if _, err := decodeSection(t, "kind: docker\nimage: vllm/vllm-openai:v0.11.0\ntime_scale: 5\n"); err == nil {
		t.Error("time_scale accepted for a real engine's image")
	}
}

func TestHostsRejects(t *testing.T) {
	h := NewHosts([]*Docker{{Image: "x"}, {Image: "y"}}, [][]int{{0, 1}, {0}})
	for name, gpus := range map[string][]int{"span": {1, 100}, "no such host": {200}} {
		t.Run(name, func(t *testing.T) {
			if _, err := h.Launch(t.Context(), launcher.Spec{Model: "m", GPUs: gpus}); !errors.Is(err, launcher.ErrBadSpec) {
				t.Fatalf("Launch(%v) = %v, want ErrBadSpec", gpus, err)
			}
		})
	}
}

package tuner

import (
	"github.com/servetune/servetune/internal/testspec"

	"context"
	"github.com/servetune/servetune/tuner/memory"
	"slices"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/docker"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
)

var goodSpec = testspec.Sim

func TestSpecLaunchers(t *testing.T) {
	tests := []struct {
		name    string
		replace string
		check   func(t *testing.T, l launcher.Launcher)
	}{
		{"sim", "kind: sim\n  gpus: [0, 1]\n  ready_timeout: 30s\n  time_scale: 50", func(t *testing.T, l launcher.Launcher) {
			s, ok := l.(*simulated.Sim)
			if !ok || s.GPU != "H100-SXM" || s.Capabilities().TimeScale != 50 {
				t.Errorf("%#v", l)
			}
		}},
		{"docker", "kind: docker\n  image: vllm/vllm-openai:v0.11.0\n  env: [HF_TOKEN]\n  gpus: [0, 1]", func(t *testing.T, l launcher.Launcher) {
			d, ok := l.(*docker.Hosts)
			if !ok || d.Image() != "vllm/vllm-openai:v0.11.0" || !slices.Equal(d.Capabilities().GPUs, []int{0, 1}) || d.Capabilities().TimeScale != 1 {
				t.Errorf("%#v", l)
			}
		}},
		{"process", "kind: process\n  command: [vllm, serve, '{model}', --port, '{port}']\n  gpus: [0, 1]", func(t *testing.T, l launcher.Launcher) {
			p, ok := l.(*launcher.Process)
			if !ok || len(p.Command) != 5 || !p.Capabilities().LocalGPUs {
				t.Errorf("%#v", l)
			}
		}},
		{"virtual", "kind: virtual\n  gpus: [0, 1]", func(t *testing.T, l launcher.Launcher) {
			v, ok := l.(*simulated.Virtual)
			if !ok || v.GPU != "H100-SXM" {
				t.Errorf("%#v", l)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodSpec, "kind: sim\n  gpus: [0, 1]\n  ready_timeout: 30s\n  time_scale: 50", tc.replace, 1)
			study, l, err := ParseSpec([]byte(src), "l.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, launcherFor(study, l))
		})
	}
}

// The memory precheck rejects a configuration that cannot start without
// launching anything: stored infeasible (as docs/spec.md says, not oom,
// which is an engine that ran out of memory), with the engine's own message.
func TestTrialRunnerPrecheck(t *testing.T) {
	study := mustSpec(t, studySpec)
	r := &TrialRunner{Spec: study, Memory: memory.Model{}}
	res := r.Evaluate(context.Background(), 0, space.Settings{"tensor_parallel": 1, "max_running_requests": 8, "gpu_memory_fraction": 0.1}, []int{0})
	if res.Status != measure.StatusFailed || res.Failure != engine.FailInfeasible || !strings.Contains(res.Message, "memory precheck: ") {
		t.Fatalf("%s/%s: %s", res.Status, res.Failure, res.Message)
	}
	res = r.Evaluate(context.Background(), 1, space.Settings{"tensor_parallel": 2, "max_running_requests": 8, "gpu_memory_fraction": 0.9}, []int{0})
	if res.Status != measure.StatusFailed || res.Failure != engine.FailInfeasible || !strings.Contains(res.Message, "needs 2 GPUs") {
		t.Fatalf("%s/%s: %s", res.Status, res.Failure, res.Message)
	}
}

// TestPrecheckSeesExtraArgs: space.extra_args are part of the launched
// command line, so the memory precheck and the virtual evaluator see them:
// the 8B model's 128k context does not fit an L4 at 0.95, 4096 does.
func TestPrecheckSeesExtraArgs(t *testing.T) {
	src := strings.Replace(studySpec, "hardware: {gpu: H100-SXM, price_per_gpu_hour: 3}", "hardware: {gpu: L4}", 1)
	src = strings.Replace(src, "  gpu_memory_fraction: [0.1, 0.9]\n", "  gpu_memory_fraction: [0.95]\n  extra_args: [\"--max-model-len\", \"4096\"]\n", 1)
	study := mustSpec(t, src)
	set := space.Settings{"tensor_parallel": 1, "max_running_requests": 8, "gpu_memory_fraction": 0.95}
	r := &TrialRunner{Spec: study, Memory: memory.Model{}}
	ls := r.LaunchSpec(0, set, []int{0})
	if err := r.checkContext(ls).Fits(set); err != nil {
		t.Errorf("precheck with --max-model-len 4096: %v", err)
	}
	res := (&TrialRunner{Spec: study, Memory: memory.Model{}}).Evaluate(context.Background(), 0, set, nil)
	if res.Status != measure.StatusOK {
		t.Errorf("virtual trial with --max-model-len 4096: %s/%s %s", res.Status, res.Failure, res.Message)
	}
	// Without the extra argument the default context does not fit.
	study.Space.Extra = nil
	ls.Extra = nil
	if err := r.checkContext(ls).Fits(set); err == nil {
		t.Error("precheck passed the 128k default context on an L4")
	}
}

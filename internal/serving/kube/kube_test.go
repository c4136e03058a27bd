package kube

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Docs splits a YAML stream at its document markers, dropping comments
// and empty documents.
func docs(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, d := range strings.Split("\n"+string(stream), "\n---\n") {
		var lines []string
		for _, l := range strings.Split(d, "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		if s := strings.TrimSpace(strings.Join(lines, "\n")); s != "" {
			out = append(out, []byte(s+"\n"))
		}
	}
	return out
}

// strict decodes one manifest, rejecting unknown and duplicate fields.
func strict(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("strict decode into %T: %v\n%s", into, err, doc)
	}
}

var serves = []Serve{
	{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: 2, GPU: "H100-SXM", HFSecret: "hf-token",
		Settings: engine.Settings{"tensor_parallel": 2, "max_running_requests": 128, "max_batched_tokens": 8192,
			"gpu_memory_fraction": 0.92, "kv_cache_dtype": "fp8", "prefix_caching": true},
		Extra: []string{"--disable-log-requests"}, Study: "quickstart", Trial: 7},
	{Engine: engine.SGLang, Model: "Qwen/Qwen2.5-7B-Instruct", GPUs: 1, GPU: "A100-80G",
		Settings: engine.Settings{"max_running_requests": 64, "gpu_memory_fraction": 0.85, "max_batched_tokens": 4096, "tensor_parallel": 1}},
}

// serveCommand reads `recommend`'s serve command back.
func serveCommand(t *testing.T, s Serve) engine.Command {
	t.Helper()
	argv := engine.ServeCommand(s.Engine, s.Model, s.Settings, s.Extra)
	skip := 1 // vllm
	if s.Engine == engine.SGLang {
		skip = 3 // python3 -m sglang.launch_server
	}
	cmd, err := engine.ParseCommand(argv[skip:], nil)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// containerCommand reads a container's command line back: vLLM's image
// runs `vllm serve` before the args, SGLang's command is in the manifest.
func containerCommand(t *testing.T, e engine.Engine, command, args []string) engine.Command {
	t.Helper()
	argv := append(append([]string(nil), command...), args...)
	lastArgv = argv
	switch e {
	case engine.VLLM:
		if len(command) != 0 {
			t.Errorf("vLLM container has a command %v: the image's entry point is vllm serve", command)
		}
	case engine.SGLang:
		if !reflect.DeepEqual(command, []string{"python3", "-m", "sglang.launch_server"}) {
			t.Errorf("SGLang command %v", command)
		}
		argv = argv[3:]
	}
	cmd, err := engine.ParseCommand(argv, nil)
	if err != nil {
		t.Fatalf("container command %v: %v", argv, err)
	}
	return cmd
}

// lastArgv is the last command line containerCommand read.
var lastArgv []string

// sameServe compares a container's command line with the serve command
// field by field: engine, model and every setting; host and port are the
// container's own.
func sameServe(t *testing.T, s Serve, got engine.Command, port int) {
	t.Helper()
	want := serveCommand(t, s)
	// Flags the engines have but servetune does not model (extra_args)
	// are not settings: they must be there verbatim.
	if x := strings.Join(s.Extra, " "); x != "" && !strings.Contains(" "+strings.Join(lastArgv, " ")+" ", " "+x+" ") {
		t.Errorf("extra flags %q missing from %v", x, lastArgv)
	}
	if got.Model != want.Model || got.Engine != want.Engine && got.Engine != "" {
		t.Errorf("model %q engine %q, want %q %q", got.Model, got.Engine, want.Model, want.Engine)
	}
	if p, _ := got.Settings.Int("port"); p != port && !(p == 0 && port == engine.ContainerPort && s.Engine == engine.VLLM) {
		t.Errorf("port %d, want %d", p, port)
	}
	delete(got.Settings, "port")
	delete(got.Settings, "host")
	if len(got.Settings) != len(want.Settings) {
		t.Errorf("settings %v, want %v", got.Settings, want.Settings)
	}
	for k, v := range want.Settings {
		if engine.FormatValue(got.Settings[k]) != engine.FormatValue(v) {
			t.Errorf("%s = %v, want %v", k, got.Settings[k], v)
		}
	}
}

// checkPod checks what every engine pod needs: image, GPUs, /dev/shm,
// probes on the health endpoint, the token's Secret by name, the GPU
// product's nodes.
func checkPod(t *testing.T, s Serve, c corev1.Container, gpus corev1.ResourceRequirements, env []corev1.EnvVar,
	vols []corev1.Volume, sel map[string]string, port int) {
	t.Helper()
	if c.Image != engine.DefaultImage(s.Engine) {
		t.Errorf("image %s", c.Image)
	}
	if q := gpus.Limits[GPUResource]; q.Cmp(*resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)) != 0 {
		t.Errorf("GPU limit %v, want %d", gpus.Limits, s.GPUs)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != int32(port) || c.Ports[0].Name != "http" {
		t.Errorf("ports %+v", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != engine.HealthPath || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v", name, p)
		}
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/dev/shm" || len(vols) != 1 ||
		vols[0].Name != c.VolumeMounts[0].Name || vols[0].EmptyDir == nil || vols[0].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("shm: mounts %+v volumes %+v", c.VolumeMounts, vols)
	}
	switch {
	case s.HFSecret == "" && len(env) != 0:
		t.Errorf("env without a secret: %+v", env)
	case s.HFSecret != "" && (len(env) != 1 || env[0].Name != "HF_TOKEN" || env[0].Value != "" || env[0].ValueFrom == nil ||
		env[0].ValueFrom.SecretKeyRef.Name != s.HFSecret || env[0].ValueFrom.SecretKeyRef.Key != HFSecretKey):
		t.Errorf("HF token env %+v", env)
	}
	want := map[string]string{"H100-SXM": "NVIDIA-H100-80GB-HBM3", "A100-80G": "NVIDIA-A100-SXM4-80GB"}[s.GPU]
	if sel[GPUProductLabel] != want || len(sel) != 1 {
		t.Errorf("node selector %v, want %s=%s", sel, GPUProductLabel, want)
	}
}

// TestDeployment: the Deployment and Service of a vLLM and an SGLang
// configuration decode strictly back into k8s.io/api's types and match
// the serve command field by field.
func TestDeployment(t *testing.T) {
	for _, s := range serves {
		t.Run(string(s.Engine), func(t *testing.T) {
			d, svc, err := Deployment(s)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Write(&b, d, svc); err != nil {
				t.Fatal(err)
			}
			ds := docs(t, b.Bytes())
			if len(ds) != 2 {
				t.Fatalf("%d documents:\n%s", len(ds), b.String())
			}
			var dep appsv1.Deployment
			var service corev1.Service
			strict(t, ds[0], &dep)
			strict(t, ds[1], &service)
			if dep.Kind != "Deployment" || dep.APIVersion != "apps/v1" || service.Kind != "Service" || service.APIVersion != "v1" {
				t.Errorf("kinds %s %s / %s %s", dep.APIVersion, dep.Kind, service.APIVersion, service.Kind)
			}
			pod := dep.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			sameServe(t, s, containerCommand(t, s.Engine, c.Command, c.Args), engine.ContainerPort)
			checkPod(t, s, c, c.Resources, c.Env, pod.Volumes, pod.NodeSelector, engine.ContainerPort)
			if !reflect.DeepEqual(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) || !reflect.DeepEqual(service.Spec.Selector, dep.Spec.Template.Labels) {
				t.Errorf("selectors %v %v, pod labels %v", dep.Spec.Selector.MatchLabels, service.Spec.Selector, dep.Spec.Template.Labels)
			}
			if len(service.Spec.Ports) != 1 || service.Spec.Ports[0].TargetPort.String() != "http" {
				t.Errorf("service ports %+v", service.Spec.Ports)
			}
		})
	}
}

// TestKServe: the ServingRuntime and InferenceService decode strictly
// back into their types; the runtime's args followed by the model's (as
// KServe merges them) match the serve command field by field.
func TestKServe(t *testing.T) {
	for _, s := range serves {
		t.Run(string(s.Engine), func(t *testing.T) {
			rt, isvc, err := KServe(s)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Write(&b, rt, isvc); err != nil {
				t.Fatal(err)
			}
			ds := docs(t, b.Bytes())
			if len(ds) != 2 {
				t.Fatalf("%d documents", len(ds))
			}
			var runtime ServingRuntime
			var svc InferenceService
			strict(t, ds[0], &runtime)
			strict(t, ds[1], &svc)
			if runtime.Kind != "ServingRuntime" || runtime.APIVersion != "serving.kserve.io/v1alpha1" ||
				svc.Kind != "InferenceService" || svc.APIVersion != "serving.kserve.io/v1beta1" {
				t.Errorf("kinds %s %s / %s %s", runtime.APIVersion, runtime.Kind, svc.APIVersion, svc.Kind)
			}
			m := svc.Spec.Predictor.Model
			if m == nil || m.Runtime == nil || *m.Runtime != runtime.Name || len(runtime.Spec.SupportedModelFormats) != 1 ||
				m.ModelFormat.Name != runtime.Spec.SupportedModelFormats[0].Name {
				t.Fatalf("model %+v does not name runtime %s and its format", m, runtime.Name)
			}
			if len(runtime.Spec.Containers) != 1 || runtime.Spec.Containers[0].Name != KServeContainer {
				t.Fatalf("runtime containers %+v", runtime.Spec.Containers)
			}
			c := runtime.Spec.Containers[0]
			sameServe(t, s, containerCommand(t, s.Engine, c.Command, append(append([]string(nil), c.Args...), m.Args...)), KServePort)
			checkPod(t, s, c, m.Resources, m.Env, runtime.Spec.Volumes, svc.Spec.Predictor.NodeSelector, KServePort)
		})
	}
}

// TestStrictRejects: the decoding the tests rely on does reject a field
// the types do not have.
func TestStrictRejects(t *testing.T) {
	d, _, err := Deployment(serves[0])
	if err != nil {
		t.Fatal(err)
	}
	y, _ := yaml.Marshal(d)
	bad := strings.Replace(string(y), "  replicas: 1\n", "  replicas: 1\n  replica: 2\n", 1)
	if err := yaml.UnmarshalStrict([]byte(bad), &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("unknown field accepted: %v", err)
	}
	var rt ServingRuntime
	if err := yaml.UnmarshalStrict([]byte("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nspec:\n  containers: []\n  grpcEndpoint: x\n"), &rt); err == nil {
		t.Error("unknown ServingRuntime field accepted")
	}
}

func TestBadServe(t *testing.T) {
	for _, s := range []Serve{
		{Engine: "tgi", Model: "m", GPUs: 1},
		{Engine: engine.VLLM, GPUs: 1},
		{Engine: engine.VLLM, Model: "m", GPUs: 0},
		{Engine: engine.VLLM, Model: "m", GPUs: 1, GPU: "MI300X"},
		{Engine: engine.VLLM, Model: "m", GPUs: 1, GPU: "TPU-v9"},
	} {
		if _, _, err := Deployment(s); !errors.Is(err, ErrBadServe) {
			t.Errorf("%+v: %v", s, err)
		}
		if _, _, err := KServe(s); !errors.Is(err, ErrBadServe) {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// TestExpertAndDataParallelArgs: an MoE layout (data-parallel attention
// ranks with expert parallelism) reaches the container's arguments in
// each engine's spelling, and the pod asks for every GPU of the layout.
func TestExpertAndDataParallelArgs(t *testing.T) {
	set := engine.Settings{"tensor_parallel": 1, "data_parallel": 8, "dp_attention": true, "expert_parallel": true}
	for _, tc := range []struct {
		engine engine.Engine
		want   string
	}{
		{engine.VLLM, "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"},
		{engine.SGLang, "--tp-size 8 --dp-size 8 --ep-size 8 --enable-dp-attention"},
	} {
		s := Serve{Engine: tc.engine, Model: "deepseek-ai/DeepSeek-V3", GPUs: set.GPUs(), GPU: "H200", Settings: set}
		d, _, err := Deployment(s)
		if err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if args := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " "); !strings.Contains(args, tc.want) {
			t.Errorf("%s: container %q, want %q in it", tc.engine, args, tc.want)
		}
		if q := c.Resources.Limits[GPUResource]; q.Value() != 8 {
			t.Errorf("%s: GPU limit %v, want 8", tc.engine, c.Resources.Limits)
		}
		sameServe(t, s, containerCommand(t, s.Engine, c.Command, c.Args), engine.ContainerPort)
	}
}

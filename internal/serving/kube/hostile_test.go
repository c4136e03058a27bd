package kube

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	yamlv3 "gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/servetune/servetune/internal/hostile"
	"github.com/servetune/servetune/internal/serving/engine"
)

// split reads a stream as kubectl does (apimachinery's YAML reader), and
// checks that a YAML parser sees the same number of documents.
func split(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out [][]byte
	for {
		d, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var n yamlv3.Node
		if yamlv3.Unmarshal(d, &n) == nil && n.Kind != 0 {
			out = append(out, d)
		}
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(stream))
	n := 0
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the stream does not parse: %v\n%s", err, stream)
		}
		if v != nil {
			n++
		}
	}
	if n != len(out) {
		t.Errorf("kubectl reads %d documents, a YAML parser %d:\n%s", len(out), n, stream)
	}
	return out
}

// TestHostileServe: every hostile string in every field of a Serve that
// reaches a manifest (the model, a local model's path, extra flags, the
// study's name, the image) and in the comment above them gives exactly
// the two expected documents, decoding strictly into their types, with
// the string back whole where it was put.
func TestHostileServe(t *testing.T) {
	for _, h := range hostile.Strings {
		for _, local := range []bool{false, true} {
			s := Serve{Engine: engine.VLLM, Model: "m/" + h, Local: local, Extra: []string{"--chat-template", h, h},
				GPUs: 1, Study: h, Image: "img:" + h, HFSecret: "hf-token"}
			if strings.ContainsFunc(h, Unwritable) || !utf8.ValidString(h) {
				if _, _, err := Deployment(s); !errors.Is(err, ErrBadServe) {
					t.Errorf("%q: %v, want it refused", h, err)
				}
				continue
			}
			for _, format := range []string{"k8s", "kserve"} {
				var b bytes.Buffer
				if err := Comment(&b, "as a command:\n  "+engine.ShellJoin(engine.ServeCommand(s.Engine, s.Model, nil, s.Extra))+"\n"+h); err != nil {
					t.Fatal(err)
				}
				var objs []any
				if format == "k8s" {
					d, svc, err := Deployment(s)
					if err != nil {
						t.Fatal(err)
					}
					objs = []any{d, svc}
				} else {
					rt, isvc, err := KServe(s)
					if err != nil {
						t.Fatal(err)
					}
					objs = []any{rt, isvc}
				}
				if err := Write(&b, objs...); err != nil {
					t.Fatal(err)
				}
				ds := split(t, b.Bytes())
				if len(ds) != 2 {
					t.Fatalf("%s %q: %d documents:\n%s", format, h, len(ds), b.String())
				}
				var args []string
				var ann map[string]string
				var image string
				if format == "k8s" {
					var d appsv1.Deployment
					var svc corev1.Service
					strict(t, ds[0], &d)
					strict(t, ds[1], &svc)
					if d.Kind != "Deployment" || svc.Kind != "Service" {
						t.Errorf("kinds %s %s", d.Kind, svc.Kind)
					}
					c := d.Spec.Template.Spec.Containers[0]
					args, ann, image = c.Args, d.Annotations, c.Image
				} else {
					var rt ServingRuntime
					var isvc InferenceService
					strict(t, ds[0], &rt)
					strict(t, ds[1], &isvc)
					if rt.Kind != "ServingRuntime" || isvc.Kind != "InferenceService" {
						t.Errorf("kinds %s %s", rt.Kind, isvc.Kind)
					}
					args, ann, image = isvc.Spec.Predictor.Model.Args, isvc.Annotations, rt.Spec.Containers[0].Image
				}
				want := []string{"--model", "m/" + h}
				if local {
					want = []string{"--model", ModelMount, "--served-model-name", "m/" + h}
				}
				want = append(want, s.Extra...)
				if !reflect.DeepEqual(args, want) {
					t.Errorf("%s %q: args %q, want %q", format, h, args, want)
				}
				if ann["servetune.io/study"] != h || image != "img:"+h {
					t.Errorf("%s %q: study annotation %q, image %q", format, h, ann["servetune.io/study"], image)
				}
			}
		}
	}
}

// TestBadNames: a secret or claim name that is no DNS-1123 name is refused
// (kubectl would refuse the objects).
func TestBadNames(t *testing.T) {
	for _, h := range hostile.Strings {
		for _, s := range []Serve{{HFSecret: h}, {ModelClaim: h, Local: true}} {
			s.Engine, s.Model, s.GPUs = engine.VLLM, "m", 1
			if h == "" || h == "plain" {
				continue
			}
			if _, _, err := Deployment(s); !errors.Is(err, ErrBadServe) {
				t.Errorf("%+v: %v", s, err)
			}
		}
	}
}

// TestLocalModel: a model on this host is read from its claim (a
// read-only volume for the Deployment, a pvc:// storageUri for KServe,
// both at ModelMount), served under the name the study measured it by.
func TestLocalModel(t *testing.T) {
	s := Serve{Engine: engine.VLLM, Model: "/data/models/my-llama", Local: true, GPUs: 2, GPU: "H100-SXM",
		Settings: engine.Settings{"tensor_parallel": 2}}
	d, _, err := Deployment(s)
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	claim := "vllm-my-llama-model"
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
	if i < 0 || pod.Volumes[i].PersistentVolumeClaim.ClaimName != claim || !pod.Volumes[i].PersistentVolumeClaim.ReadOnly {
		t.Fatalf("volumes %+v, want the claim %s", pod.Volumes, claim)
	}
	j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == pod.Volumes[i].Name })
	if j < 0 || c.VolumeMounts[j].MountPath != ModelMount || !c.VolumeMounts[j].ReadOnly {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	cmd, err := engine.ParseCommand(c.Args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Model != ModelMount || cmd.Settings["served_model_name"] != s.Model || strings.Contains(strings.Join(c.Args, " "), "--model /data") {
		t.Errorf("args %v", c.Args)
	}
	_, isvc, err := KServe(s)
	if err != nil {
		t.Fatal(err)
	}
	m := isvc.Spec.Predictor.Model
	if m.StorageURI == nil || *m.StorageURI != "pvc://"+claim || m.Args[1] != ModelMount {
		t.Errorf("KServe model %+v", m)
	}
	s.ModelClaim = "weights"
	if _, isvc, _ := KServe(s); *isvc.Spec.Predictor.Model.StorageURI != "pvc://weights" {
		t.Errorf("storageUri %s", *isvc.Spec.Predictor.Model.StorageURI)
	}
}

// TestRequests: a pod requests CPUs and memory by its GPUs, and runs a
// pinned image, never latest.
func TestRequests(t *testing.T) {
	for _, gpus := range []int{1, 4} {
		d, _, err := Deployment(Serve{Engine: engine.SGLang, Model: "m", GPUs: gpus})
		if err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]
		wantCPU, wantMem := CPUBase.Value()+int64(gpus)*CPUPerGPU.Value(), MemoryBase.Value()+int64(gpus)*MemoryPerGPU.Value()
		if cpu.Value() != wantCPU || mem.Value() != wantMem {
			t.Errorf("%d GPUs: requests cpu %v memory %v, want %d and %d", gpus, cpu.String(), mem.String(), wantCPU, wantMem)
		}
		if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":") {
			t.Errorf("image %s is not pinned", c.Image)
		}
	}
}

// TestRouterImage: the router's image is an image reference or refused.
func TestRouterImage(t *testing.T) {
	s := Serve{Engine: engine.VLLM, Model: "m", GPUs: 1}
	parts := []Part{{Role: engine.Prefill, GPUs: 1}, {Role: engine.Decode, GPUs: 1}}
	for img, ok := range map[string]bool{"ghcr.io/org/router:1.2": true, "nginx": true, "localhost:5000/r@sha256:" + strings.Repeat("a", 64): true,
		"not an image": false, "UPPER/Case": false, "r:": false} {
		_, err := Disaggregated(s, parts, Router{Argv: []string{"router"}, Image: img})
		if ok != (err == nil) || (!ok && !errors.Is(err, ErrBadServe)) {
			t.Errorf("%q: %v", img, err)
		}
	}
}

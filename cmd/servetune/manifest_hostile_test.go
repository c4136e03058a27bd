package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/kube"
)

// TestRecommendManifestsHostile: a local model whose directory name holds
// a YAML document, and extra_args holding another, give exactly the two
// manifests of each format, as kubectl splits the stream; the Deployment
// reads the model from its claim, runs a pinned image and requests CPUs
// and memory.
func TestRecommendManifestsHostile(t *testing.T) {
	dir := t.TempDir()
	evil := "x\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: evil\nspec:\n  containers:\n  - name: c\n    image: busybox\n    securityContext:\n      privileged: true\n"
	model := filepath.Join(dir, "m\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: evil2}")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../internal/serving/catalog/testdata/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	src := strings.Replace(virtualStudy, "meta-llama/Llama-3.1-8B-Instruct", q(model), 1)
	src = strings.Replace(src, "  max_running_requests: 32\n", "  max_running_requests: 32\n  extra_args: [--served-model-name, "+q(evil)+"]\n", 1)
	db := filepath.Join(dir, "s.db")
	if code, _, errs := runCLI(t, "tune", writeSpec(t, src), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	for _, format := range []string{"k8s", "kserve"} {
		code, out, errs := runCLI(t, "recommend", "same", "--db", db, "--format", format)
		if code != exitOK {
			t.Fatalf("--format %s: exit %d: %s", format, code, errs)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
		var docs [][]byte
		for {
			d, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := yaml.Unmarshal(d, &m); err != nil {
				t.Fatalf("--format %s: %v\n%s", format, err, out)
			}
			if m != nil {
				docs = append(docs, d)
			}
		}
		if len(docs) != 2 || bytes.Contains(docs[0], []byte("\nkind: Pod")) {
			t.Fatalf("--format %s: %d documents:\n%s", format, len(docs), out)
		}
		if format != "k8s" {
			var isvc kube.InferenceService
			if err := yaml.UnmarshalStrict(docs[1], &isvc); err != nil {
				t.Fatal(err)
			}
			if u := isvc.Spec.Predictor.Model.StorageURI; u == nil || *u != "pvc://vllm-m-----apiversion-v1-kind-pod-metadata-name-evil2-model" {
				t.Errorf("storageUri %v", *u)
			}
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(docs[0], &d); err != nil {
			t.Fatal(err)
		}
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		if c.Args[0] != "--model" || c.Args[1] != kube.ModelMount || !slices.Contains(c.Args, evil) || slices.Contains(c.Args, model) {
			t.Errorf("args %q", c.Args)
		}
		claim := false
		for _, v := range pod.Volumes {
			claim = claim || v.PersistentVolumeClaim != nil
		}
		if !claim || strings.HasSuffix(c.Image, ":latest") {
			t.Errorf("volumes %+v image %s", pod.Volumes, c.Image)
		}
		if cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]; cpu.IsZero() || mem.IsZero() {
			t.Errorf("requests %v", c.Resources.Requests)
		}
	}
}

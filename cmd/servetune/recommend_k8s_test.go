package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	lws "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
)

// manifestDocs splits a YAML stream into its documents without comments.
func manifestDocs(stream string) [][]byte {
	var out [][]byte
	for _, d := range strings.Split("\n"+stream, "\n---\n") {
		var keep []string
		for _, l := range strings.Split(d, "\n") {
			if !strings.HasPrefix(l, "#") {
				keep = append(keep, l)
			}
		}
		if s := strings.TrimSpace(strings.Join(keep, "\n")); s != "" {
			out = append(out, []byte(s+"\n"))
		}
	}
	return out
}

// TestRecommendManifests: `recommend --format k8s` and `--format kserve`
// of a vLLM and an SGLang study decode strictly into their types and run
// the engine `recommend` prints, with the same model and settings, on the
// trial's GPUs.
func TestRecommendManifests(t *testing.T) {
	for _, e := range []engine.Engine{engine.VLLM, engine.SGLang} {
		t.Run(string(e), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			src := strings.Replace(virtualStudy, "engine: vllm", "engine: "+string(e), 1)
			src = strings.Replace(src, "  max_running_requests: 32\n", "  max_running_requests: 32\n  tensor_parallel: 2\n  extra_args: [--disable-log-requests]\n", 1)
			if code, _, errs := runCLI(t, "tune", writeSpec(t, src), "--db", db); code != exitOK {
				t.Fatalf("tune: exit %d: %s", code, errs)
			}
			code, line, errs := runCLI(t, "recommend", "same", "--db", db, "--format", string(e))
			if code != exitOK {
				t.Fatalf("recommend: %s", errs)
			}
			lines := strings.Split(strings.TrimSpace(line), "\n")
			serve := strings.Fields(lines[len(lines)-1])
			skip := map[engine.Engine]int{engine.VLLM: 1, engine.SGLang: 3}[e]
			want, err := engine.ParseCommand(serve[skip:], nil)
			if err != nil {
				t.Fatalf("serve command %v: %v", serve, err)
			}
			for _, format := range []string{"k8s", "kserve"} {
				code, out, errs := runCLI(t, "recommend", "same", "--db", db, "--format", format, "--hf-secret", "my-hf")
				if code != exitOK {
					t.Fatalf("--format %s: %s", format, errs)
				}
				docs := manifestDocs(out)
				if len(docs) != 2 {
					t.Fatalf("--format %s: %d documents:\n%s", format, len(docs), out)
				}
				var c corev1.Container
				var gpus corev1.ResourceRequirements
				var env []corev1.EnvVar
				if format == "k8s" {
					var d appsv1.Deployment
					var svc corev1.Service
					if err := yaml.UnmarshalStrict(docs[0], &d); err != nil {
						t.Fatal(err)
					}
					if err := yaml.UnmarshalStrict(docs[1], &svc); err != nil {
						t.Fatal(err)
					}
					c = d.Spec.Template.Spec.Containers[0]
					gpus, env = c.Resources, c.Env
				} else {
					var rt kube.ServingRuntime
					var isvc kube.InferenceService
					if err := yaml.UnmarshalStrict(docs[0], &rt); err != nil {
						t.Fatal(err)
					}
					if err := yaml.UnmarshalStrict(docs[1], &isvc); err != nil {
						t.Fatal(err)
					}
					c = rt.Spec.Containers[0]
					c.Args = append(c.Args, isvc.Spec.Predictor.Model.Args...)
					gpus, env = isvc.Spec.Predictor.Model.Resources, isvc.Spec.Predictor.Model.Env
				}
				argv := append(append([]string(nil), c.Command...), c.Args...)
				if e == engine.SGLang {
					argv = argv[3:]
				}
				got, err := engine.ParseCommand(argv, nil)
				if err != nil {
					t.Fatalf("--format %s: container %v: %v", format, argv, err)
				}
				delete(got.Settings, "host")
				delete(got.Settings, "port")
				if got.Model != want.Model || !reflect.DeepEqual(got.Settings, want.Settings) {
					t.Errorf("--format %s runs %s %v, recommend prints %s %v", format, got.Model, got.Settings, want.Model, want.Settings)
				}
				if !strings.Contains(strings.Join(argv, " "), "--disable-log-requests") {
					t.Errorf("--format %s: extra_args missing: %v", format, argv)
				}
				if q := gpus.Limits[kube.GPUResource]; q.Value() != 2 {
					t.Errorf("--format %s: GPU limit %v, want 2", format, gpus.Limits)
				}
				if len(env) != 1 || env[0].ValueFrom.SecretKeyRef.Name != "my-hf" {
					t.Errorf("--format %s: env %+v", format, env)
				}
				if c.Image != engine.DefaultImage(e) {
					t.Errorf("--format %s: image %s", format, c.Image)
				}
			}
		})
	}
}

// TestRecommendManifestsMoE: a study of an MoE model on 4 GPUs as two
// data-parallel attention ranks of TP2 with expert parallelism prints,
// and writes into both kinds of manifest, each engine's spelling of that
// layout (vLLM: --data-parallel-size 2 --enable-expert-parallel; SGLang:
// --tp-size 4 --dp-size 2 --ep-size 4 --enable-dp-attention), and asks
// for all 4 GPUs.
func TestRecommendManifestsMoE(t *testing.T) {
	want := map[engine.Engine][]string{
		engine.VLLM:   {"--tensor-parallel-size 2", "--data-parallel-size 2", "--enable-expert-parallel"},
		engine.SGLang: {"--tp-size 4", "--dp-size 2", "--ep-size 4", "--enable-dp-attention"},
	}
	for _, e := range []engine.Engine{engine.VLLM, engine.SGLang} {
		t.Run(string(e), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			src := strings.Replace(virtualStudy, "engine: vllm", "engine: "+string(e), 1)
			src = strings.Replace(src, "model: meta-llama/Llama-3.1-8B-Instruct", "model: Qwen/Qwen3-30B-A3B", 1)
			src = strings.Replace(src, "  max_running_requests: 32\n",
				"  max_running_requests: 32\n  tensor_parallel: 2\n  data_parallel: 2\n  dp_attention: true\n  expert_parallel: true\n", 1)
			if code, _, errs := runCLI(t, "tune", writeSpec(t, src), "--db", db); code != exitOK {
				t.Fatalf("tune: exit %d: %s", code, errs)
			}
			code, line, errs := runCLI(t, "recommend", "same", "--db", db, "--format", string(e))
			if code != exitOK {
				t.Fatalf("recommend: %s", errs)
			}
			for _, f := range want[e] {
				if !strings.Contains(line, f) {
					t.Errorf("recommend prints %q, without %s", line, f)
				}
			}
			for _, format := range []string{"k8s", "kserve"} {
				code, out, errs := runCLI(t, "recommend", "same", "--db", db, "--format", format)
				if code != exitOK {
					t.Fatalf("--format %s: %s", format, errs)
				}
				docs := manifestDocs(out)
				if len(docs) != 2 {
					t.Fatalf("--format %s: %d documents:\n%s", format, len(docs), out)
				}
				var c corev1.Container
				var res corev1.ResourceRequirements
				if format == "k8s" {
					var d appsv1.Deployment
					if err := yaml.UnmarshalStrict(docs[0], &d); err != nil {
						t.Fatal(err)
					}
					c = d.Spec.Template.Spec.Containers[0]
					res = c.Resources
				} else {
					var rt kube.ServingRuntime
					var isvc kube.InferenceService
					if err := yaml.UnmarshalStrict(docs[0], &rt); err != nil {
						t.Fatal(err)
					}
					if err := yaml.UnmarshalStrict(docs[1], &isvc); err != nil {
						t.Fatal(err)
					}
					c = rt.Spec.Containers[0]
					c.Args = append(c.Args, isvc.Spec.Predictor.Model.Args...)
					res = isvc.Spec.Predictor.Model.Resources
				}
				args := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
				for _, f := range want[e] {
					if !strings.Contains(args, f) {
						t.Errorf("--format %s: container %q, without %s", format, args, f)
					}
				}
				if q := res.Limits[kube.GPUResource]; q.Value() != 4 {
					t.Errorf("--format %s: GPU limit %v, want 4", format, res.Limits)
				}
			}
		})
	}
}

// TestRecommendRouterImage: --router-image takes an image reference only,
// refused with exit 2 before the study is read (any string was written
// into the router's Deployment).
func TestRecommendRouterImage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, bad := range []string{"not an image", "UPPER/Case:1", "ghcr.io/org/router:", "a@sha256:xyz", "$(reboot)"} {
		code, _, errs := runCLI(t, "recommend", "same", "--db", db, "--format", "k8s", "--router-image", bad)
		if code != exitUsage || !strings.Contains(errs, "--router-image") || !strings.Contains(errs, "is not an image reference") {
			t.Errorf("%q: exit %d: %s", bad, code, errs)
		}
	}
}

// A recommendation of 16 H100s (two 8-GPU hosts) writes a LeaderWorkerSet
// of two pods that strict-decodes into the LWS v0.9.0 types; with a
// control plane, LWS's CRD installed, the server accepts it.
func TestRecommendManifestsMultiHost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	src := strings.Replace(virtualStudy, "model: meta-llama/Llama-3.1-8B-Instruct", "model: Qwen/Qwen3-30B-A3B", 1)
	src = strings.Replace(src, "  max_running_requests: 32\n",
		"  max_running_requests: 32\n  tensor_parallel: 2\n  data_parallel: 8\n  expert_parallel: true\n", 1)
	if code, _, errs := runCLI(t, "tune", writeSpec(t, src), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, "recommend", "same", "--db", db, "--format", "k8s")
	if code != exitOK {
		t.Fatalf("recommend: %s", errs)
	}
	docs := manifestDocs(out)
	if len(docs) != 2 {
		t.Fatalf("%d documents:\n%s", len(docs), out)
	}
	var set lws.LeaderWorkerSet
	if err := yaml.UnmarshalStrict(docs[0], &set); err != nil {
		t.Fatalf("%v\n%s", err, docs[0])
	}
	tpl := set.Spec.LeaderWorkerTemplate
	if set.Kind != "LeaderWorkerSet" || *tpl.Size != 2 || tpl.LeaderTemplate == nil {
		t.Fatalf("%+v", set)
	}
	c := tpl.LeaderTemplate.Spec.Containers[0]
	if args := strings.Join(c.Args, " "); !strings.Contains(args, "--data-parallel-size 8") || !strings.Contains(args, "--data-parallel-size-local 4") {
		t.Errorf("leader args %s", args)
	}
	if q := c.Resources.Limits[kube.GPUResource]; q.Value() != 8 {
		t.Errorf("leader GPUs %v", q.Value())
	}
	t.Run("server dry run", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "lws.yaml")
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		serverDryRun(t, file, leaderWorkerSetCRD)
	})
}

// A docker command and a manifest start the release their flags were
// checked against: the image's tag is the version the header names, the
// newest by default, --engine-version's when given.
func TestRecommendImageIsTheRelease(t *testing.T) {
	db := quickstartDB(t)
	newest := engine.NewestVersion(engine.VLLM).String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, newest},
		{[]string{"--engine-version", "0.11.0"}, "0.11.0"},
	} {
		code, out, errs := runCLI(t, append([]string{"recommend", "quickstart", "--db", db, "--format", "docker"}, tc.args...)...)
		if code != exitOK {
			t.Fatalf("recommend %v: exit %d: %s", tc.args, code, errs)
		}
		if !strings.Contains(out, "# for vllm "+tc.want+" ") || !strings.Contains(out, " vllm/vllm-openai:v"+tc.want+" ") {
			t.Errorf("recommend %v: want the header and the image both at %s:\n%s", tc.args, tc.want, out)
		}
		code, out, errs = runCLI(t, append([]string{"recommend", "quickstart", "--db", db, "--format", "k8s"}, tc.args...)...)
		if code != exitOK {
			t.Fatalf("recommend --format k8s %v: exit %d: %s", tc.args, code, errs)
		}
		if !strings.Contains(out, "# for vllm "+tc.want+": the image vllm/vllm-openai:v"+tc.want) || !strings.Contains(out, "image: vllm/vllm-openai:v"+tc.want) {
			t.Errorf("recommend --format k8s %v: want the header and the container's image at %s:\n%s", tc.args, tc.want, out)
		}
	}
}

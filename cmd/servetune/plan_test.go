package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/browser"
	"github.com/servetune/servetune/internal/testspec"
)

// planArgs plan half an hour of conversations on L40S replicas.
func planArgs(extra ...string) []string {
	return append([]string{"plan", "--model", "llama-3.1-8b", "--gpu", "L40S", "--max-model-len", "16384",
		"--synth", "conversation", "--hours", "0.5", "--mean-rate", "10", "--slo", "ttft_p99_ms=2000,tpot_p99_ms=50"}, extra...)
}

func TestPlanJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), planArgs("--json", out), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Policies) != 4 {
		t.Fatalf("%d policies, want 3 routers and static", len(rep.Policies))
	}
	hits := map[string]float64{}
	for _, p := range rep.Policies {
		for _, k := range []string{"router", "autoscaler", "slo_attainment", "peak_replicas", "mean_replicas", "gpu_hours", "cost_per_day", "prefix_hit_rate"} {
			if _, ok := p[k]; !ok {
				t.Errorf("policy %v: no %s", p["router"], k)
			}
		}
		if p["autoscaler"] != "static" {
			hits[p["router"].(string)] = p["prefix_hit_rate"].(float64)
		}
	}
	if hits["prefix"]-hits["round-robin"] < 0.2 {
		t.Errorf("prefix hits %.3f, round-robin %.3f: want 20 points more", hits["prefix"], hits["round-robin"])
	}
	for _, want := range []string{"round-robin", "least-load", "prefix", "static (peak)", "SLO met", "$/day"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

// planManifests runs plan --format k8s with args and returns the file
// and its YAML documents.
func planManifests(t *testing.T, args ...string) (string, []string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plan.yaml")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), planArgs(append([]string{"--format", "k8s", "--output", out, "--router", "round-robin,prefix"}, args...)...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("%d documents, want Deployment, Service, one autoscaler, ConfigMap:\n%s", len(docs), b)
	}
	return out, docs
}

// The manifests decode back into their typed objects, with one
// autoscaler; with a control plane (SERVETUNE_REQUIRE_KUBE), the server
// accepts them.
func TestPlanK8s(t *testing.T) {
	out, docs := planManifests(t)
	var d appsv1.Deployment
	var svc corev1.Service
	var hpa autoscalingv2.HorizontalPodAutoscaler
	var cm corev1.ConfigMap
	for i, into := range []any{&d, &svc, &hpa, &cm} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
	if d.Kind != "Deployment" || svc.Kind != "Service" || hpa.Kind != "HorizontalPodAutoscaler" || cm.Kind != "ConfigMap" {
		t.Fatalf("kinds %s %s %s %s", d.Kind, svc.Kind, hpa.Kind, cm.Kind)
	}
	if hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.Metrics[0].Pods.Metric.Name != "vllm_num_requests_running" {
		t.Errorf("HPA scales %s on %s", hpa.Spec.ScaleTargetRef.Name, hpa.Spec.Metrics[0].Pods.Metric.Name)
	}
	if v := hpa.Spec.Metrics[0].Pods.Target.AverageValue.AsApproximateFloat64(); !(v > 1) {
		t.Errorf("HPA target %g running requests per replica", v)
	}
	if !strings.Contains(cm.Data["router.yaml"], "policy: prefix") {
		t.Errorf("router config %q: want the prefix router, the plan's cheapest", cm.Data["router.yaml"])
	}
	t.Run("server dry run", func(t *testing.T) { serverDryRun(t, out) })
}

// --autoscaler keda writes a ScaledObject in the HPA's place, its
// Prometheus trigger querying the engine's metric for the served model;
// with a control plane, KEDA's own CRD (from its module) installed, the
// server accepts the manifests.
func TestPlanK8sKEDA(t *testing.T) {
	out, docs := planManifests(t, "--autoscaler", "keda")
	var so unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(docs[2]), &so.Object); err != nil {
		t.Fatal(err)
	}
	if so.GetKind() != "ScaledObject" || so.GetAPIVersion() != "keda.sh/v1alpha1" {
		t.Fatalf("document 3 is %s %s, want a keda.sh/v1alpha1 ScaledObject", so.GetAPIVersion(), so.GetKind())
	}
	trig, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	meta := trig[0].(map[string]any)["metadata"].(map[string]any)
	if !strings.Contains(meta["query"].(string), `vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"}`) {
		t.Errorf("KEDA query %v", meta["query"])
	}
	t.Run("server dry run", func(t *testing.T) { serverDryRun(t, out, kedaScaledObjectCRD) })
}

func TestPlanBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--slo", "tpot_p99_ms=50"}, "one of --trace, --rate-curve or --synth"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--synth", "day"}, "--slo: required"},
		{planArgs("--router", "random"), `unknown router "random"`},
		{planArgs("--scale-on", "gpu"), `unknown scaling signal "gpu"`},
		{planArgs("--max-replicas", "5000"), "max <= 1024"},
		{planArgs("--hours", "200"), "--hours 200"},
		{planArgs("--format", "helm"), "--format"},
		{planArgs("--format", "k8s", "--autoscaler", "both"), "--autoscaler"},
		{planArgs("--replay", "--replay-speed", "0"), "--replay-speed 0: want more than 0 and at most 1000"},
		{planArgs("--replay", "--replay-speed", "5000"), "at most 1000"},
		{planArgs("--replay", "--format", "k8s"), "--replay runs the fleet on this machine"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--trace", "nope.csv", "--trace-format", "azure", "--slo", "tpot_p99_ms=50"}, "--trace"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--rate-curve", "nope.csv", "--slo", "tpot_p99_ms=50"}, "--rate-curve"},
		// The trace window is checked as bench checks it (traceWindow).
		{[]string{"plan", "--model", "llama-3.1-8b", "--trace", "nope.csv", "--trace-format", "azure", "--trace-speed", "0", "--slo", "tpot_p99_ms=50"}, "--trace-speed 0: want a number > 0"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--trace", "nope.csv", "--trace-format", "azure", "--trace-start", "-1s", "--slo", "tpot_p99_ms=50"}, "--trace-start -1s: must be >= 0"},
		{[]string{"plan", "--model", "llama-3.1-8b", "--trace", "nope.csv", "--slo", "tpot_p99_ms=50"}, "--trace-format: missing"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line naming %q", tc.args[1:], code, msg, tc.want)
		}
	}
}

// --from-study plans replicas of the stored study's recommendation: its
// model, GPU, engine and settings, with no engine flags given; engine
// flags beside it, or a study that is not there, are usage errors.
func TestPlanFromStudy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	if code, _, errs := runCLI(t, "tune", writeSpec(t, testspec.Virtual), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	traffic := []string{"--synth", "day", "--hours", "0.5", "--mean-rate", "2", "--slo", "ttft_p99_ms=2000,tpot_p99_ms=50"}
	code, out, errs := runCLI(t, append([]string{"plan", "--from-study", "vt", "--db", db}, traffic...)...)
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "a replica is study vt, trial ") || !strings.Contains(out, "meta-llama/Llama-3.1-8B-Instruct on ") || !strings.Contains(out, "H100-SXM") {
		t.Errorf("plan of study vt:\n%s\n%s", errs, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--from-study", "vt", "--db", db, "--model", "llama-3.1-8b"}, "give no engine flags"},
		{[]string{"plan", "--from-study", "nope", "--db", db}, `no study "nope"`},
	} {
		code, _, errs := runCLI(t, append(tc.args, traffic...)...)
		if msg := strings.TrimSpace(errs); code != 2 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line naming %q", tc.args[1:], code, msg, tc.want)
		}
	}
}

// --html writes the plan's page: in headless Chromium it loads with no
// console error and no request beyond itself, a table row per policy and
// its three charts (traffic, replicas, attainment by hour).
func TestPlanHTML(t *testing.T) {
	page := browser.New(t, 1100, 1000)
	out := filepath.Join(t.TempDir(), "plan.html")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), planArgs("--html", out, "--router", "round-robin,prefix"), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	url := "file://" + out
	ctx, cancel := context.WithTimeout(page.Ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.querySelectorAll("figure svg").length, document.querySelectorAll("table:first-of-type tr").length - 1]`))
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != 3 || counts[1] != 3 {
		t.Errorf("%d charts and %d policy rows, want 3 and 3 (two routers autoscaled, static)", counts[0], counts[1])
	}
	if msgs := page.Console(); len(msgs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(msgs, "\n"))
	}
	for _, u := range page.Requests() {
		if u != url && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s", u)
		}
	}
}

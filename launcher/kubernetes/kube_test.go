package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

// TestObjects: the trial's Deployment asks for its GPUs, carries the
// labels and annotations Reap reads, and has the manifests' readiness
// probe; the simulated engine's image takes the whole command as args.
func TestObjects(t *testing.T) {
	k := &Kube{Namespace: "ns1", Image: engine.SimImage, PullPolicy: corev1.PullNever, Env: []string{"A=1"}}
	spec := launcher.Spec{Model: "org/m", Extra: []string{"--max-num-seqs", "8"}, GPUs: []int{2, 3}, Study: "My Study/α", Trial: 7, Owner: "host/1/2/run"}
	d, svc, err := k.Objects(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Namespace != "ns1" || svc.Namespace != "ns1" || d.Name != svc.Name || !strings.HasPrefix(d.Name, "st-my-study-t7-") {
		t.Errorf("names %s/%s, %s/%s", d.Namespace, d.Name, svc.Namespace, svc.Name)
	}
	pod := d.Spec.Template
	for _, m := range []metav1.ObjectMeta{d.ObjectMeta, pod.ObjectMeta, svc.ObjectMeta} {
		if m.Labels[LabelStudyID] != Hash(spec.Study) || m.Labels[LabelRunID] != Hash(spec.Owner) || m.Labels[launcher.LabelTrial] != "7" || m.Labels[launcher.LabelManaged] != "true" {
			t.Errorf("labels %v", m.Labels)
		}
		if l, ok := launcher.ParseLabels(m.Annotations); !ok || l != launcher.LabelOf(spec) {
			t.Errorf("annotations %v read back as %+v", m.Annotations, l)
		}
	}
	if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("selectors %v %v do not pick the pod %v", svc.Spec.Selector, d.Spec.Selector, pod.Labels)
	}
	c := pod.Spec.Containers[0]
	if q := c.Resources.Limits[kube.GPUResource]; q.Value() != 2 {
		t.Errorf("nvidia.com/gpu %v, want 2", q.String())
	}
	want, _, _ := kube.Deployment(kube.Serve{Engine: engine.VLLM, Model: "org/m", GPUs: 2})
	if !reflect.DeepEqual(c.ReadinessProbe, want.Spec.Template.Spec.Containers[0].ReadinessProbe) {
		t.Errorf("readiness probe %+v, want the manifests' %+v", c.ReadinessProbe, want.Spec.Template.Spec.Containers[0].ReadinessProbe)
	}
	if c.Image != engine.SimImage || c.ImagePullPolicy != corev1.PullNever || c.Command != nil {
		t.Errorf("image %s, policy %s, command %v", c.Image, c.ImagePullPolicy, c.Command)
	}
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "org/m") || !strings.Contains(args, "--max-num-seqs 8") {
		t.Errorf("args %q", args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["A"] != "1" || env[engine.EnvSimNumGPUs] != "2" || env[engine.EnvSimEngine] != "vllm" {
		t.Errorf("env %v", env)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("the service account token is mounted")
	}
}

// cluster returns a launcher on the test cluster (scripts/kube-up.sh) with
// the simulated engine's image, or skips.
func cluster(t *testing.T) (*Kube, kubernetes.Interface) {
	t.Helper()
	path := testengine.Kubeconfig(t)
	testengine.Image(t)
	k := &Kube{Namespace: testengine.KubeNamespace, Kubeconfig: path, Image: engine.SimImage, PullPolicy: corev1.PullNever,
		Access: AccessPodIP, Poll: 200 * time.Millisecond, StopTimeout: 5 * time.Second,
		Env: []string{engine.EnvSimGPU + "=H100-SXM", engine.EnvSimTimeScale + "=50"}}
	c, _, err := k.Client()
	if err != nil {
		t.Fatal(err)
	}
	return k, c
}

func testStudy(t *testing.T) string {
	return fmt.Sprintf("kubetest-%s-%d", t.Name(), os.Getpid())
}

// left counts the study's Deployments, Services and Pods in the namespace.
func left(t *testing.T, c kubernetes.Interface, study string) int {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: labels.Set{LabelStudyID: Hash(study)}.String()}
	ds, err1 := c.AppsV1().Deployments(testengine.KubeNamespace).List(ctx, opts)
	ss, err2 := c.CoreV1().Services(testengine.KubeNamespace).List(ctx, opts)
	ps, err3 := c.CoreV1().Pods(testengine.KubeNamespace).List(ctx, opts)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	return len(ds.Items) + len(ss.Items) + len(ps.Items)
}

func reapAfter(t *testing.T, c kubernetes.Interface, study string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = Reap(ctx, c, testengine.KubeNamespace, study, nil)
	})
}

// TestServe: a trial's Deployment comes up on the node, serves the OpenAI
// API at its endpoint, and Stop leaves no object of it.
func TestServe(t *testing.T) {
	k, c := cluster(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	in, err := k.Launch(ctx, launcher.Spec{Model: model, Extra: []string{"--sim-load-time", "200ms"}, GPUs: []int{0}, Study: study, Trial: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\nlogs:\n%s", err, in.Logs())
	}
	t.Logf("ready in %s at %s", time.Since(start).Round(time.Millisecond), in.Endpoint())
	resp, err := http.Get(in.Endpoint() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), model) {
		t.Errorf("/v1/models = %s", body)
	}
	if n := left(t, c, study); n != 3 {
		t.Errorf("%d objects while it serves, want 3 (deployment, service, pod)", n)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := left(t, c, study); n != 0 {
		t.Errorf("%d objects after Stop, want 0", n)
	}
	if in.Logs() == "" {
		t.Errorf("no logs kept after Stop")
	}
}

// TestStartupOOM: an engine whose weights do not fit exits at start-up:
// Ready reports the exit, the logs (the ended container's) hold the
// engine's memory message, and the trial classifies as oom.
func TestStartupOOM(t *testing.T) {
	k, c := cluster(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in, err := k.Launch(ctx, launcher.Spec{Model: "meta-llama/Llama-3.3-70B-Instruct", Extra: []string{"--quantization", "fp8", "--sim-load-time", "100ms"}, Study: study, Trial: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer in.Stop(context.Background())
	err = in.Ready(ctx)
	var ee *launcher.ExitError
	if !errors.As(err, &ee) || ee.Code == 0 {
		t.Fatalf("Ready = %v, want a launcher.ExitError with a non-zero code", err)
	}
	logs := in.Logs()
	ex := in.(launcher.Exiter)
	class, msg := engine.Classify(ex.Exit(), false, logs)
	if class != engine.FailOOM {
		t.Errorf("Classify = %q (%s), want oom; logs:\n%s", class, msg, logs)
	}
	t.Logf("classified %s: %s", class, msg)
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := left(t, c, study); n != 0 {
		t.Errorf("%d objects after Stop, want 0", n)
	}
}

// TestImageMissing: an image no node has fails the trial with the pull
// error, at once.
func TestImageMissing(t *testing.T) {
	k, c := cluster(t)
	k.Image = "servetune-no-such-image:missing"
	k.Env = nil
	study := testStudy(t)
	reapAfter(t, c, study)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, err := k.Launch(ctx, launcher.Spec{Model: "m", Study: study, Trial: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	err = in.Ready(ctx)
	if !errors.Is(err, ErrImagePull) || !strings.Contains(err.Error(), "servetune-no-such-image:missing") {
		t.Fatalf("Ready = %v, want ErrImagePull naming the image", err)
	}
	t.Logf("Ready: %v", err)
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := left(t, c, study); n != 0 {
		t.Errorf("%d objects after Stop, want 0", n)
	}
}

// TestReap: what a killed run left (a launched trial never stopped) is
// deleted by label, a live run's trial spared by keep.
func TestReap(t *testing.T) {
	k, c := cluster(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for trial, owner := range []string{"dead-run", "live-run"} {
		if _, err := k.Launch(ctx, launcher.Spec{Model: "m", Study: study, Trial: trial, Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	other := testStudy(t) + "-other"
	reapAfter(t, c, other)
	if _, err := k.Launch(ctx, launcher.Spec{Model: "m", Study: other, Trial: 0}); err != nil {
		t.Fatal(err)
	}
	got, err := k.Reap(ctx, study, func(r launcher.Reaped) bool { return r.Owner == "live-run" })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Owner != "dead-run" || got[0].Study != study || got[0].Trial != 0 || got[0].Kind != "kubernetes" {
		t.Fatalf("reaped %+v, want trial 0 of the dead run", got)
	}
	if n := left(t, c, study); n == 0 {
		t.Errorf("the live run's trial was reaped too")
	}
	if n := left(t, c, other); n == 0 {
		t.Errorf("another study's trial was reaped")
	}
	if _, err := k.Reap(ctx, study, nil); err != nil {
		t.Fatal(err)
	}
	if n := left(t, c, study); n != 0 {
		t.Errorf("%d objects of the study after Reap, want 0", n)
	}
}

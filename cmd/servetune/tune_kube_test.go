package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/servetune/servetune/internal/testengine"
	kubelauncher "github.com/servetune/servetune/launcher/kubernetes"
)

// kubeSimStudy copies examples/kube-sim.yaml under a study name of this
// test's own, in the tests' namespace, with edits as old/new pairs, and
// points the servetune it runs at the cluster of scripts/kube-up.sh
// (KUBECONFIG). It skips without that cluster or the simulated engine's
// image (fails instead under SERVETUNE_REQUIRE_KUBE=1). Whatever a failed
// test leaves is deleted by label at its end.
func kubeSimStudy(t *testing.T, edits ...string) (spec, name string, c kubernetes.Interface) {
	t.Helper()
	path := testengine.Kubeconfig(t)
	testengine.Image(t)
	t.Setenv("KUBECONFIG", path)
	cfg, err := kubelauncher.RESTConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if c, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "kube-sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("kubetest-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), os.Getpid())
	s := strings.Replace(string(src), "name: kube-sim\n", "name: "+name+"\n", 1)
	edits = append(edits, "namespace: servetune-sim", "namespace: "+testengine.KubeNamespace)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("kube-sim.yaml lacks %q", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = kubelauncher.Reap(ctx, c, testengine.KubeNamespace, name, nil)
	})
	return writeSpec(t, s), name, c
}

// kubeObjectsOf lists the study's Deployments, ReplicaSets, Services and
// Pods (by its servetune.io/study-id label) as kind/name.
func kubeObjectsOf(t *testing.T, c kubernetes.Interface, study string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := testengine.KubeNamespace
	opts := metav1.ListOptions{LabelSelector: labels.Set{kubelauncher.LabelStudyID: kubelauncher.Hash(study)}.String()}
	var out []string
	ds, err1 := c.AppsV1().Deployments(ns).List(ctx, opts)
	rs, err2 := c.AppsV1().ReplicaSets(ns).List(ctx, opts)
	ss, err3 := c.CoreV1().Services(ns).List(ctx, opts)
	ps, err4 := c.CoreV1().Pods(ns).List(ctx, opts)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		out = append(out, "deployment/"+d.Name)
	}
	for _, r := range rs.Items {
		out = append(out, "replicaset/"+r.Name)
	}
	for _, s := range ss.Items {
		out = append(out, "service/"+s.Name)
	}
	for _, p := range ps.Items {
		out = append(out, "pod/"+p.Name)
	}
	return out
}

// TestTuneKubeExample runs examples/kube-sim.yaml as shipped (its name
// and namespace changed) through the servetune binary: every trial whose
// engine fits is ok, the gpu_memory_fraction 0.1 ones are failed/oom with
// the engine's message from the pod's log, and no object of the study is
// left.
func TestTuneKubeExample(t *testing.T) {
	spec, name, c := kubeSimStudy(t)
	bin := buildServetune(t)
	db := filepath.Join(t.TempDir(), "t.db")
	start := time.Now()
	out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	t.Logf("tune in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) != 6 {
		t.Errorf("%d trials, want 6:\n%s", len(doc.Trials), out)
	}
	for _, tr := range doc.Trials {
		small := fmt.Sprint(tr.Settings["gpu_memory_fraction"]) == "0.1"
		switch {
		case small && tr.Status == "failed" && tr.Failure == "oom" && strings.Contains(tr.FailureMsg, "No available memory"):
		case !small && tr.Status == "ok" && len(tr.Levels) == 2 && tr.Levels[1].Completed > 0:
		default:
			t.Errorf("trial %d (%v): %s/%s %q", tr.Number, tr.Settings, tr.Status, tr.Failure, tr.FailureMsg)
		}
	}
	if left := kubeObjectsOf(t, c, name); len(left) != 0 {
		t.Errorf("objects left after the study: %v", left)
	}
}

// TestTuneKubeInterrupt: SIGINT while a trial is measured stops tune
// (exit 1, the trial stored as interrupted) and deletes its objects.
func TestTuneKubeInterrupt(t *testing.T) {
	spec, name, c := kubeSimStudy(t, "requests_per_level: 96", "requests_per_level: 2000",
		"load: {concurrency: [4, 16]}", "load: {concurrency: [16]}")
	bin := buildServetune(t)
	db := filepath.Join(t.TempDir(), "t.db")
	cmd, inFlight, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
	if len(kubeObjectsOf(t, c, name)) == 0 {
		t.Error("no object while a trial was measured")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	stderr := <-rest // before Wait, which closes the pipe
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(stderr, "interrupted: stopping the load") {
		t.Errorf("tune after SIGINT: %v\n%s", err, stderr)
	}
	if left := kubeObjectsOf(t, c, name); len(left) != 0 {
		t.Errorf("objects left after SIGINT: %v", left)
	}
	for _, tr := range trialsOf(t, bin, db, name).Trials {
		if tr.Number == inFlight && tr.Status != "interrupted" {
			t.Errorf("trial %d in flight stored %s/%s", tr.Number, tr.Status, tr.Failure)
		}
	}
}

// TestTuneKubeKillResume: SIGKILL of tune mid-trial leaves the trial's
// Deployment, Service and Pod; `tune --resume` deletes them by label,
// re-runs the trial and finishes the study with nothing of it left.
func TestTuneKubeKillResume(t *testing.T) {
	spec, name, c := kubeSimStudy(t, "requests_per_level: 96", "requests_per_level: 480",
		"load: {concurrency: [4, 16]}", "load: {concurrency: [16]}")
	bin := buildServetune(t)
	db := filepath.Join(t.TempDir(), "t.db")
	cmd, inFlight, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-rest
	_ = cmd.Wait()
	orphans := kubeObjectsOf(t, c, name)
	if len(orphans) == 0 {
		t.Fatal("SIGKILL left no object: nothing to test")
	}
	t.Logf("left by SIGKILL: %v", orphans)
	out, err := testCommand(t, bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	// Two trials run at once (gpus [0, 1]): each one in flight left a
	// Deployment, and each is re-run.
	engines := 0
	for _, o := range orphans {
		if strings.HasPrefix(o, "deployment/") {
			engines++
		}
	}
	want := fmt.Sprintf("removed %d leftover kubernetes engine(s)", engines)
	rerun := regexp.MustCompile(`re-ran interrupted trials \[([\d ]+)\]`).FindStringSubmatch(string(out))
	if !strings.Contains(string(out), want) || rerun == nil || !slices.Contains(strings.Fields(rerun[1]), strconv.Itoa(inFlight)) {
		t.Errorf("resume output lacks %q and a re-run of trial %d:\n%s", want, inFlight, out)
	}
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) != 6 || countStatus(doc, "ok") != 4 || countStatus(doc, "interrupted") != 0 {
		t.Errorf("after resume: %d trials, %d ok, %d interrupted:\n%s", len(doc.Trials), countStatus(doc, "ok"), countStatus(doc, "interrupted"), out)
	}
	if left := kubeObjectsOf(t, c, name); len(left) != 0 {
		t.Errorf("objects left after resume: %v", left)
	}
}

// TestTuneKubeMissingImage: an image no node has fails each trial with
// the node's pull error naming it, and leaves nothing behind.
func TestTuneKubeMissingImage(t *testing.T) {
	spec, name, c := kubeSimStudy(t, "image: servetune-sim:dev", "image: servetune-sim:no-such-tag",
		"gpu_memory_fraction: [0.1, 0.85, 0.9]", "gpu_memory_fraction: 0.9", "trials: 6", "trials: 2")
	bin := buildServetune(t)
	db := filepath.Join(t.TempDir(), "t.db")
	out, _ := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
	doc := trialsOf(t, bin, db, name)
	if len(doc.Trials) == 0 {
		t.Fatalf("no trial stored:\n%s", out)
	}
	for _, tr := range doc.Trials {
		if tr.Status != "failed" || tr.Failure != "launch_error" || !strings.Contains(tr.FailureMsg, "servetune-sim:no-such-tag") {
			t.Errorf("trial %d: %s/%s %q", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		}
		t.Logf("trial %d: %s/%s %s", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
	}
	if left := kubeObjectsOf(t, c, name); len(left) != 0 {
		t.Errorf("objects left: %v", left)
	}
}

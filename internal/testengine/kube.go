package testengine

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeNamespace is the namespace the kubernetes launcher's tests use.
const KubeNamespace = "servetune-test"

// Kubeconfig skips the test unless a Kubernetes cluster with a Ready node
// answers (fails instead under SERVETUNE_REQUIRE_KUBE=1, as CI sets after
// scripts/kube-up.sh), and returns its kubeconfig: KUBECONFIG, else the
// one scripts/kube-up.sh writes (~/.cache/servetune-kube/kubeconfig).
// Namespace KubeNamespace exists once it returns.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	kubeOnce.Do(func() { kubePath, kubeWhy = kubeMissing() })
	if kubeWhy == "" {
		return kubePath
	}
	if os.Getenv("SERVETUNE_REQUIRE_KUBE") == "1" {
		t.Fatalf("kubernetes: %s (SERVETUNE_REQUIRE_KUBE=1)", kubeWhy)
	}
	t.Skipf("kubernetes: %s; start one with `scripts/kube-up.sh`, or set SERVETUNE_REQUIRE_KUBE=1 to fail instead", kubeWhy)
	return ""
}

var (
	kubeOnce sync.Once
	kubePath string
	kubeWhy  string
)

func kubeMissing() (string, string) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".cache", "servetune-kube", "kubeconfig")
	}
	if _, err := os.Stat(path); err != nil {
		return "", "no kubeconfig (" + path + ")"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return "", err.Error()
	}
	cfg.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "the API server of " + path + " does not answer: " + err.Error()
	}
	ready := false
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "", "no Ready node in the cluster of " + path
	}
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubeNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "create namespace " + KubeNamespace + ": " + err.Error()
	}
	return path, ""
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/servetune/servetune/internal/testengine"
)

// crd is a CustomResourceDefinition shipped in a Go module's source: the
// module (path@version) and the file's path inside it.
type crd struct{ module, file, name string }

// The CRDs the manifests servetune writes need: KEDA's ScaledObject (plan
// --autoscaler keda) and the LeaderWorkerSet (a multi-host replica), the
// latter at the version go.mod builds its types from.
var (
	kedaScaledObjectCRD = crd{"github.com/kedacore/keda/v2@v2.20.2", "config/crd/bases/keda.sh_scaledobjects.yaml", "scaledobjects.keda.sh"}
	leaderWorkerSetCRD  = crd{"sigs.k8s.io/lws@v0.9.0", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml", "leaderworkersets.leaderworkerset.x-k8s.io"}
)

// serverDryRun has the local control plane check the manifests in file
// (kubectl apply --dry-run=server), the CRDs they need installed first
// from their modules (through the Go module proxy) and removed after. It
// skips without a control plane, and fails under SERVETUNE_REQUIRE_KUBE.
func serverDryRun(t *testing.T, file string, crds ...crd) {
	t.Helper()
	kubeconfig := testengine.Kubeconfig(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	kube := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	for _, c := range crds {
		dl := exec.Command("go", "mod", "download", "-json", c.module)
		dl.Dir = t.TempDir() // outside the module: go.mod stays as it is
		b, err := dl.Output()
		var mod struct{ Dir, Error string }
		if jerr := json.Unmarshal(b, &mod); err != nil || jerr != nil || mod.Dir == "" {
			t.Fatalf("go mod download %s: %v %s\n%s", c.module, err, mod.Error, b)
		}
		path := filepath.Join(mod.Dir, c.file)
		kube("apply", "--server-side", "-f", path)
		t.Cleanup(func() { kube("delete", "--ignore-not-found", "-f", path) })
		waitEstablished(t, kubeconfig, c.name)
	}
	kube("apply", "--dry-run=server", "-n", testengine.KubeNamespace, "-f", file)
}

// waitEstablished waits until the API server has established the CRD
// named name, on a watch of it: each change of its status is an event,
// the Established condition among them. kubectl wait is no help here: it
// fails while a new CRD has no conditions at all.
func waitEstablished(t *testing.T, kubeconfig, name string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			byName(&o)
			return crds.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			byName(&o)
			return crds.Watch(ctx, o)
		},
	}
	established := func(o runtime.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The informer's first list arrives as Added events: a CRD established
	// before the watch starts counts too.
	_, err = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil,
		func(ev watch.Event) (bool, error) { return established(ev.Object), nil })
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
}

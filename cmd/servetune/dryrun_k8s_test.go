package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		// Polled, not kubectl wait: wait fails while a new CRD has no
		// conditions at all.
		established := func() bool {
			var got struct {
				Status struct {
					Conditions []struct{ Type, Status string }
				}
			}
			if err := json.Unmarshal([]byte(kube("get", "crd", c.name, "-o", "json")), &got); err != nil {
				t.Fatal(err)
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == "Established" && cond.Status == "True" {
					return true
				}
			}
			return false
		}
		for deadline := time.Now().Add(60 * time.Second); !established(); {
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established after 60 s", c.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	kube("apply", "--dry-run=server", "-n", testengine.KubeNamespace, "-f", file)
}

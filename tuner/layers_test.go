package tuner

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadersLinkNoMachinery: what only shows stored studies (report, ui)
// links no sampler, simulator or launcher (docs/architecture.md,
// "Packages"), and tuner's own package stays small.
func TestReadersLinkNoMachinery(t *testing.T) {
	const mod = "github.com/servetune/servetune/"
	banned := []string{"github.com/c-bata/goptuna", mod + "tuner/sampler", mod + "tuner/guided",
		mod + "internal/model/sim", mod + "internal/model/calibrate", mod + "launcher"}
	for _, pkg := range []string{"internal/present/report", "internal/present/ui"} {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") || strings.HasPrefix(dep, mod+"internal/model/") && strings.HasSuffix(dep, "sim") {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
	}
	if lines >= 2500 {
		t.Errorf("package tuner has %d non-test lines, want under 2,500: move a part with its own concern to a subpackage", lines)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireSimImage makes sure the servetune-sim:dev image is present. Without
// Docker the test skips, unless SERVETUNE_REQUIRE_DOCKER is set (CI), where
// the image is built with the script `make sim-image` runs.
func requireSimImage(t *testing.T) {
	t.Helper()
	if exec.Command("docker", "image", "inspect", "servetune-sim:dev").Run() == nil {
		return
	}
	if os.Getenv("SERVETUNE_REQUIRE_DOCKER") == "" {
		t.Skip("no Docker daemon or no servetune-sim:dev image (make sim-image)")
	}
	cmd := exec.Command("./scripts/sim-image.sh")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "SIM_IMAGE=servetune-sim:dev")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build servetune-sim:dev: %v\n%s", err, out)
	}
}

// TestTuneDockerSim runs a study whose trials are containers of the
// simulated engine's image: the out-of-memory one fails with the engine's
// message, the other is measured, and no container is left behind.
func TestTuneDockerSim(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	requireSimImage(t)
	name := fmt.Sprintf("dockertest-%d", os.Getpid())
	src := strings.NewReplacer(
		"name: clitest", "name: "+name,
		"  kind: sim\n", "  kind: docker\n  image: servetune-sim:dev\n",
		"REQS", "8", "TRIALS", "2",
		"max_running_requests: [8, 32]", "max_running_requests: 16",
	).Replace(tuneSpec)
	spec := writeSpec(t, src)
	db := filepath.Join(t.TempDir(), "t.db")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"tune", spec, "--db", db}, &out, &errb); code != exitOK {
		t.Fatalf("tune: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var tj bytes.Buffer
	if code := run(context.Background(), []string{"trials", name, "--db", db, "--json"}, &tj, &errb); code != exitOK {
		t.Fatalf("trials: %s", errb.String())
	}
	s := tj.String()
	if !strings.Contains(s, `"failure": "oom"`) || !strings.Contains(s, `"status": "ok"`) || !strings.Contains(s, "No available memory") {
		t.Errorf("trials:\n%s", s)
	}
	left, err := exec.Command("docker", "ps", "-aq", "--filter", "label=servetune.study="+name).Output()
	if err != nil || len(bytes.TrimSpace(left)) != 0 {
		t.Errorf("containers left behind: %q (%v)", left, err)
	}
}

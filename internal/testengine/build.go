// Package testengine is the test engine the packages' tests share: the
// servetune binary and the simulated engine's image built once per test
// binary, and a Docker daemon, a Slurm cluster, or a clean skip.
//
// Tests that need Docker skip with a clear message on a machine without a
// daemon, and fail instead where SERVETUNE_REQUIRE_DOCKER=1 (CI); tests
// that need Slurm likewise with SERVETUNE_REQUIRE_SLURM=1.
package testengine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// SimImage is the image the tests build and run (engine.SimImage).
const SimImage = "servetune-sim:dev"

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error

	imageOnce sync.Once
	imageErr  error
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Binary builds cmd/servetune once per test binary and returns its path.
// A build failure fails the test: the tree under test must build.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "servetune-test-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "servetune")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/servetune")
		cmd.Dir = Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/servetune: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Cleanup removes what Binary built; call it from TestMain after m.Run.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Docker returns a client of the test daemon, or skips the test without
// one (fails under SERVETUNE_REQUIRE_DOCKER=1).
func Docker(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		host := os.Getenv("DOCKER_HOST")
		if host == "" {
			host = client.DefaultDockerHost
		}
		if os.Getenv("SERVETUNE_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker: no daemon at %s: %v (SERVETUNE_REQUIRE_DOCKER=1)", host, err)
		}
		t.Skipf("docker: no daemon at %s: %v; set SERVETUNE_REQUIRE_DOCKER=1 to fail instead", host, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Image makes sure the simulated engine's image is present, building it
// once per test binary through the script `make sim-image` runs (which
// rebuilds only when the binary changed, so an image of an older tree is
// never tested). It skips without Docker, as Docker does.
func Image(t testing.TB) {
	t.Helper()
	Docker(t)
	imageOnce.Do(func() {
		cmd := exec.Command("./scripts/sim-image.sh")
		cmd.Dir = Root()
		cmd.Env = append(os.Environ(), "SIM_IMAGE="+SimImage)
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("scripts/sim-image.sh: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
}

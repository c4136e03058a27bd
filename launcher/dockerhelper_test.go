package launcher

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// requireDocker returns a client of the test daemon. Without one it skips,
// unless SERVETUNE_REQUIRE_DOCKER=1 (CI), where a missing daemon fails.
func requireDocker(t *testing.T) *client.Client {
	t.Helper()
	c, err := NewDockerClient("")
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
		t.Skipf("docker: no daemon at %s: %v", host, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	buildDir  string // removed by TestMain
	buildOnce sync.Once
	buildBin  string
	buildErr  error

	imageOnce sync.Once
	imageErr  error
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// servetuneBinary builds cmd/servetune once per test run.
func servetuneBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "launcher-test-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "servetune")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/servetune")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/servetune: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		// The tree is shared while it is being written; a broken build
		// elsewhere is caught by that package's own checks, not here.
		t.Skipf("cannot build the servetune binary: %v", buildErr)
	}
	return buildBin
}

// requireSimServe skips when `servetune sim serve` does not exist yet (it is
// written in package sim); it returns the host binary otherwise.
func requireSimServe(t *testing.T) string {
	t.Helper()
	bin := servetuneBinary(t)
	out, err := exec.Command(bin, "sim", "serve", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--model") {
		t.Skipf("`servetune sim serve` is not in this tree yet (package sim): %v %.200s", err, out)
	}
	return bin
}

// requireSimImage builds servetune-sim:dev with the same script as `make sim-image`.
func requireSimImage(t *testing.T) {
	t.Helper()
	imageOnce.Do(func() {
		cmd := exec.Command("./scripts/sim-image.sh")
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "SIM_IMAGE="+SimImage)
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("scripts/sim-image.sh: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Skipf("cannot build %s: %v", SimImage, imageErr)
	}
}

// testStudy is a study label no other test or run uses.
func testStudy(t *testing.T) string {
	return fmt.Sprintf("launcher-test-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid(), time.Now().UnixNano())
}

// studyContainers lists the study's containers the way `docker ps -a
// --filter label=servetune.study=S` does.
func studyContainers(t *testing.T, c *client.Client, study string) []container.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelStudy+"="+study))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// reapAfter removes the study's containers when the test ends, whatever happened.
func reapAfter(t *testing.T, c *client.Client, study string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := Reap(ctx, c, study, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// streamCompletion sends one streaming completion and returns the SSE data lines.
func streamCompletion(t *testing.T, base, model string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"model":%q,"prompt":"Hello, my name is","max_tokens":8,"stream":true,"ignore_eos":true,"stream_options":{"include_usage":true}}`, model)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %s", resp.Status)
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read stream: %v", err)
	}
	if len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream did not end with [DONE]: %q", data)
	}
	return data
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTuneDryRunEveryExample runs `tune --dry-run` on every example spec
// with the Docker daemon, the Slurm commands and the database out of reach:
// a dry run that tried to launch, reap or store anything would fail or
// leave a file. Each prints its ranking and nothing lands on disk.
func TestTuneDryRunEveryExample(t *testing.T) {
	if testing.Short() {
		t.Skip("forecasts every example space")
	}
	specs, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(specs) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	t.Setenv("PATH", dir) // no sbatch, squeue, docker
	db := filepath.Join(dir, "never.db")
	t.Setenv("SERVETUNE_DB", db)
	// Each example with at most 48 requests a level (and 4 of warm-up): the
	// dry run's path is the same, and the 864 forecasts of guided-bench.yaml
	// at 512 requests took minutes of the package's time limit.
	short := t.TempDir()
	fewer := regexp.MustCompile(`(?m)^(\s+requests_per_level:) *(\d+)`)
	warm := regexp.MustCompile(`(?m)^(\s+warmup:) *(\d+)`)
	for _, spec := range specs {
		t.Run(filepath.Base(spec), func(t *testing.T) {
			src, err := os.ReadFile(spec)
			if err != nil {
				t.Fatal(err)
			}
			src = fewer.ReplaceAll(src, []byte("${1} 48"))
			src = warm.ReplaceAll(src, []byte("${1} 4"))
			spec := filepath.Join(short, filepath.Base(spec))
			if err := os.WriteFile(spec, src, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := runCLI(t, "tune", "--dry-run", spec)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			for _, want := range []string{"nothing launched", "predicted infeasible", "#  FORECAST", "\n1  "} {
				if !strings.Contains(strings.ReplaceAll(out, "   ", "  "), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a dry run created the database %s (%v)", db, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("a dry run left %s in its directory", e.Name())
	}
}

// TestTuneDryRunNeedsTheSimulator: a study the simulator cannot forecast
// (no hardware.gpu) is refused with the reason, exit 2.
func TestTuneDryRunNeedsTheSimulator(t *testing.T) {
	src := strings.Replace(strings.NewReplacer("REQS", "8", "TRIALS", "2").Replace(tuneSpec),
		"hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}\n", "", 1)
	code, _, stderr := runCLI(t, "tune", "--dry-run", writeSpec(t, src))
	if code != 2 || !strings.Contains(stderr, "hardware.gpu") {
		t.Fatalf("exit %d, stderr %q: want 2 naming hardware.gpu", code, stderr)
	}
}

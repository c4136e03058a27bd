package testengine

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// SlurmPartition is the partition scripts/slurm-up.sh declares: one node
// with 4 GPUs as GRES.
const SlurmPartition = "gpu"

// Slurm skips the test unless a Slurm controller answers and partition
// SlurmPartition has a usable node (fails instead under
// SERVETUNE_REQUIRE_SLURM=1, as CI sets after scripts/slurm-up.sh).
func Slurm(t testing.TB) {
	t.Helper()
	slurmOnce.Do(func() { slurmWhy = slurmMissing() })
	why := slurmWhy
	if why == "" {
		return
	}
	if os.Getenv("SERVETUNE_REQUIRE_SLURM") == "1" {
		t.Fatalf("slurm: %s (SERVETUNE_REQUIRE_SLURM=1)", why)
	}
	t.Skipf("slurm: %s; start one with `sudo scripts/slurm-up.sh`, or set SERVETUNE_REQUIRE_SLURM=1 to fail instead", why)
}

var (
	slurmOnce sync.Once
	slurmWhy  string // why Slurm cannot be used, "" when it can: asked once (sinfo takes 10 s to give up on a controller)
)

func slurmMissing() string {
	for _, c := range []string{"sbatch", "squeue", "scancel", "sinfo"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sinfo", "-h", "-p", SlurmPartition, "-o", "%T %G").CombinedOutput()
	if err != nil {
		return "sinfo: " + strings.TrimSpace(string(out))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && usable(f[0]) && strings.HasPrefix(f[1], "gpu:") {
			return ""
		}
	}
	return "no usable node with GPUs in partition " + SlurmPartition + " (sinfo: " + strings.TrimSpace(string(out)) + ")"
}

// usable reports whether a node in this state takes jobs now or soon
// (not down, drained or not responding).
func usable(state string) bool {
	switch state {
	case "idle", "mixed", "allocated", "completing", "planned":
		return true
	}
	return false
}

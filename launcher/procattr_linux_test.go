//go:build linux

package launcher

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/proc"
)

// TestEngineDiesWithParent kills an engine's parent with SIGKILL, so no Stop
// runs: the parent-death signal must end the engine anyway.
func TestEngineDiesWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), helperEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("parent printed no engine pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "engine=")))
	if err != nil {
		t.Fatalf("parent said %q", line)
	}
	if !processAlive(pid) {
		t.Fatalf("engine %d not running before the kill", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// The engine is re-parented once its parent dies; its parent-death
	// signal ends it, which its pidfd reports.
	ended, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := proc.WaitEnd(ended, pid); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("engine %d outlived its SIGKILLed parent: %v", pid, err)
	}
}

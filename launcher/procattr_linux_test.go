//go:build linux

package launcher

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	// The engine is re-parented and reaped by init (or a subreaper) once it
	// dies; poll rather than sleep a fixed time.
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("engine %d outlived its SIGKILLed parent", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

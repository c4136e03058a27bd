package launcher

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReapLocalWrapper: a wrapper script that starts its engine without
// exec leaves the engine behind when the wrapper dies; the reaper finds the
// engine by its labels and stops its whole process group, and spares what
// keep spares. The dead run's engine carries the variables an older
// servetune set: its leftovers are reaped too.
func TestReapLocalWrapper(t *testing.T) {
	study := fmt.Sprintf("reaptest-%d", os.Getpid())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// start runs a wrapper that starts two engines (this binary in mode
	// "up") without exec, and returns once both say they run: three
	// labelled processes, each with its labels for good.
	start := func(owner string, old bool) *exec.Cmd {
		cmd := exec.Command("sh", "-c", `"$0" & "$0" & wait`, exe)
		env := labelEnv(Spec{Study: study, Trial: 3, Owner: owner})
		if old {
			env = []string{"SERVETUNE_STUDY=" + study, "SERVETUNE_TRIAL=3", "SERVETUNE_OWNER=" + owner}
		}
		cmd.Env = append(os.Environ(), append(env, helperEnv+"=up")...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		r := bufio.NewReader(out)
		for range 2 {
			if line, err := r.ReadString('\n'); line != "up\n" {
				t.Fatalf("an engine of the wrapper said %q, %v; want up", line, err)
			}
		}
		return cmd
	}
	dead, live := start("dead-run", true), start("live-run", false)
	found, err := findLocalEngines(study)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 6 {
		t.Fatalf("found %d labelled processes, want both wrappers and their engines: %+v", len(found), found)
	}
	// The dead run's wrapper dies as it would with its parent; its engines
	// live on.
	_ = dead.Process.Kill()
	_ = dead.Wait()
	if found, err = findLocalEngines(study); err != nil {
		t.Fatal(err)
	}
	if len(found) != 5 {
		t.Fatalf("found %d labelled processes, want the orphans and the live tree: %+v", len(found), found)
	}
	keep := func(r Reaped) bool { return r.Owner == "live-run" }
	reaped, err := (&Process{StopTimeout: time.Second}).Reap(context.Background(), study, keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].ID != fmt.Sprint(dead.Process.Pid) || reaped[0].Trial != 3 {
		t.Fatalf("reaped %+v, want the dead run's group %d", reaped, dead.Process.Pid)
	}
	if groupAlive(dead.Process.Pid) {
		t.Error("the dead run's engines are still running")
	}
	if !groupAlive(live.Process.Pid) {
		t.Error("the live run's engine was stopped")
	}
	left, _ := findLocalEngines(study)
	for _, e := range left {
		if !strings.Contains(e.owner, "live") {
			t.Errorf("left: %+v", e)
		}
	}
}

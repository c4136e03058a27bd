package launcher

import (
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
	start := func(owner string, old bool) *exec.Cmd {
		cmd := exec.Command("sh", "-c", "sleep 600 & sleep 600 & wait")
		env := labelEnv(Spec{Study: study, Trial: 3, Owner: owner})
		if old {
			env = []string{"SERVETUNE_STUDY=" + study, "SERVETUNE_TRIAL=3", "SERVETUNE_OWNER=" + owner}
		}
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return cmd
	}
	dead, live := start("dead-run", true), start("live-run", false)
	// Both wrappers have started their sleeps (three labelled processes
	// each) before the dead one dies as it would with its parent.
	var found []localEngine
	waitFor := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var err error
			if found, err = findLocalEngines(study); err != nil {
				t.Fatal(err)
			}
			if len(found) >= n {
				return
			}
		}
	}
	waitFor(6)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	waitFor(5) // its two orphaned sleeps, the live wrapper and its two sleeps
	if len(found) < 5 {
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

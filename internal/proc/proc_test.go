package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestSelfAliveAndRoundTrip(t *testing.T) {
	o := NewRun()
	if alive, known := o.Alive(); !alive || !known {
		t.Fatalf("self: alive %v known %v", alive, known)
	}
	p, err := Parse(o.String())
	if err != nil || p != o {
		t.Fatalf("Parse(%q) = %+v, %v", o.String(), p, err)
	}
	if NewRun().Run == o.Run {
		t.Error("two runs share an id")
	}
}

func TestDeadAndReusedAndRemote(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := Owner{Host: Self().Host, PID: cmd.Process.Pid, Run: "x"}
	if alive, known := dead.Alive(); alive || !known {
		t.Errorf("exited process: alive %v known %v", alive, known)
	}
	// Our pid with another start time is a reused pid: not the owner.
	reused := Owner{Host: Self().Host, PID: os.Getppid(), Start: 1, Run: "x"}
	if startTime(os.Getppid()) != 0 {
		if alive, _ := reused.Alive(); alive {
			t.Error("a pid with another start time counts as the owner")
		}
	}
	remote := Owner{Host: "elsewhere.invalid", PID: 1, Run: "x"}
	if _, known := remote.Alive(); known {
		t.Error("an owner on another host counts as known")
	}
	if _, err := Parse("a/b"); err == nil {
		t.Error("bad owner parsed")
	}
}

// TestWaitEnd: WaitEnd waits while the process lives and returns once it
// is killed, zombie or not (the test reaps it only afterwards).
func TestWaitEnd(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := WaitEnd(short, pid); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitEnd on a live process: %v, want the context's deadline", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := WaitEnd(ctx, pid); err != nil {
		t.Fatalf("WaitEnd on a killed (unreaped) process: %v", err)
	}
}

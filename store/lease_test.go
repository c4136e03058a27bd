package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/internal/serving/engine"
)

// TestLease: a study has one live owner. A second run is refused naming
// the owner; a run whose process died, or whose remote owner stopped
// renewing, is taken over; a run that lost its lease cannot write.
func TestLease(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	first, _, err := s.Begin(ctx, Study{Name: "l", Spec: "x"}, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, resume := range []bool{false, true} {
		_, _, err = s.Begin(ctx, Study{Name: "l", Spec: "x"}, BeginOptions{Resume: resume})
		var oe *OwnedError
		if !errors.As(err, &oe) || oe.Owner.Run != first.Owner.Run || !strings.Contains(err.Error(), "is being tuned by pid") {
			t.Fatalf("resume=%v: second Begin = %v, want an OwnedError naming the first run", resume, err)
		}
	}
	if err := first.End(ctx, StudyInterrupted); err != nil {
		t.Fatal(err)
	}

	// A dead owner on this host loses its lease at once.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := proc.Owner{Host: proc.Self().Host, PID: cmd.Process.Pid, Run: "dead"}
	setLease(t, s, "l", dead, time.Now())
	run, _, err := s.Begin(ctx, Study{Name: "l", Spec: "x"}, BeginOptions{Resume: true})
	if err != nil {
		t.Fatalf("dead owner not taken over: %v", err)
	}
	run.End(ctx, StudyInterrupted)

	// An owner on another host holds the study while it renews its lease.
	remote := proc.Owner{Host: "elsewhere.invalid", PID: 7, Run: "remote"}
	setLease(t, s, "l", remote, time.Now())
	if _, _, err := s.Begin(ctx, Study{Name: "l", Spec: "x"}, BeginOptions{Resume: true}); err == nil {
		t.Fatal("a remote owner with a fresh heartbeat was taken over")
	}
	setLease(t, s, "l", remote, time.Now().Add(-2*LeaseTimeout))
	run, _, err = s.Begin(ctx, Study{Name: "l", Spec: "x"}, BeginOptions{Resume: true})
	if err != nil {
		t.Fatalf("stale remote owner not taken over: %v", err)
	}

	// Taken over behind its back, a run can no longer write.
	setLease(t, s, "l", remote, time.Now())
	if err := run.StartTrial(ctx, 0, engine.Settings{}, nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("StartTrial after losing the lease = %v, want ErrLeaseLost", err)
	}
	run.release(ctx)
}

// TestBeginCheckRefuses: a resume whose check fails changes nothing.
func TestBeginCheckRefuses(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run, _, err := s.Begin(ctx, Study{Name: "c", Spec: "a: 1"}, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run.End(ctx, StudyFinished)
	boom := errors.New("spec changed")
	_, _, err = s.Begin(ctx, Study{Name: "c", Spec: "a: 2"}, BeginOptions{Resume: true, UpdateSpec: true, Check: func(Study) error { return boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("Begin = %v", err)
	}
	st, _ := s.GetStudy(ctx, "c")
	if st.Status != StudyFinished || st.Spec != "a: 1" {
		t.Errorf("refused resume changed the study: %+v", st)
	}
	if l, _ := readLease(ctx, s.db, st.ID); l != nil {
		t.Errorf("refused resume left a lease: %+v", l)
	}
}

// setLease writes a lease for a test.
func setLease(t *testing.T, s *Store, name string, o proc.Owner, beat time.Time) {
	t.Helper()
	st, err := s.GetStudy(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.db.Exec(`INSERT INTO owners (study_id, owner, started, heartbeat) VALUES (?, ?, ?, ?)
		ON CONFLICT (study_id) DO UPDATE SET owner = excluded.owner, heartbeat = excluded.heartbeat`,
		st.ID, o.String(), formatTime(beat), formatTime(beat))
	if err != nil {
		t.Fatal(err)
	}
}

package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// killHelperEnv names the database the helper process writes to.
const killHelperEnv = "SERVETUNE_STORE_KILL_HELPER_DB"

// killPerLevel is the helper's request records per load level: large enough
// that each FinishTrial transaction takes a while, so the kill usually lands
// inside one.
const killPerLevel = 10000

// TestKillHelper is not a test: TestKilledWriter runs it in a child process
// that stores trials until it is killed.
func TestKillHelper(t *testing.T) {
	path := os.Getenv(killHelperEnv)
	if path == "" {
		t.Skip("helper process for TestKilledWriter")
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	st, err := s.CreateStudy(ctx, Study{Name: "killed"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for n := 0; ; n++ {
		if err := s.StartTrial(ctx, st.ID, n, engine.Settings{"tensor_parallel": 1}, []int{0}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("started", n)
		if err := s.FinishTrial(ctx, result(st.ID, n, killPerLevel)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("committed", n)
	}
}

// TestKilledWriter kills a process with SIGKILL while it stores trials and
// checks that the file opens, passes SQLite's integrity check and holds only
// whole trials: each finished trial with all its rows, the one in flight
// still "running" with none, which InterruptRunning then marks.
func TestKilledWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), killHelperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for three whole trials and the start of a fourth: the helper is
	// then inside that trial's FinishTrial transaction.
	committed, startedNext := 0, false
	sc := bufio.NewScanner(out)
	for !startedNext && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "error"):
			t.Fatalf("helper: %s", line)
		case strings.HasPrefix(line, "committed"):
			committed++
		case strings.HasPrefix(line, "started") && committed >= 3:
			startedNext = true
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // reaps the child; the error is the kill
	if committed < 3 {
		t.Fatalf("helper committed %d trials before exiting", committed)
	}

	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	var integrity string
	if err := s.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
	st, err := s.GetStudy(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := s.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	ok, running := 0, 0
	for _, tr := range trials {
		var reqs, samples int
		s.db.QueryRowContext(ctx, "SELECT count(*) FROM requests WHERE trial_id = ?", tr.ID).Scan(&reqs)
		s.db.QueryRowContext(ctx, "SELECT count(*) FROM gpu_samples WHERE trial_id = ?", tr.ID).Scan(&samples)
		switch tr.Status {
		case measure.StatusOK:
			ok++
			if len(tr.LoadPoints) != 2 || reqs != 2*killPerLevel || samples != 2 {
				t.Errorf("trial %d is partial: %d load points, %d requests, %d samples", tr.Number, len(tr.LoadPoints), reqs, samples)
			}
		case measure.StatusRunning:
			running++
			if len(tr.LoadPoints) != 0 || reqs != 0 || samples != 0 {
				t.Errorf("running trial %d has rows: %d load points, %d requests, %d samples", tr.Number, len(tr.LoadPoints), reqs, samples)
			}
		default:
			t.Errorf("trial %d has status %s", tr.Number, tr.Status)
		}
	}
	if ok < committed || running > 1 {
		t.Errorf("%d ok trials (helper reported %d), %d running", ok, committed, running)
	}
	t.Logf("after SIGKILL: %d whole trials, %d in flight", ok, running)
	interrupted, err := s.InterruptRunning(ctx, st.ID)
	if err != nil || len(interrupted) != running {
		t.Errorf("InterruptRunning = %v, %v", interrupted, err)
	}
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testengine.Cleanup() // the binary testengine.Binary built
	os.Exit(code)
}

// slurmSimStudy copies examples/slurm-sim.yaml under a study name of this
// test's own (the jobs' comment) with its work dir in a temporary
// directory, with edits as old/new pairs.
func slurmSimStudy(t *testing.T, edits ...string) (spec, name string) {
	t.Helper()
	testengine.Slurm(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "slurm-sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("slurmtest-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), os.Getpid())
	s := strings.Replace(string(src), "name: slurm-sim\n", "name: "+name+"\n", 1)
	edits = append(edits, "workdir: .servetune/slurm", "workdir: "+t.TempDir())
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("slurm-sim.yaml lacks %q", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	t.Cleanup(func() { // a failed test leaves no job behind
		for _, j := range slurmJobsOf(t, name) {
			_ = exec.Command("scancel", j.ID).Run()
		}
	})
	return writeSpec(t, s), name
}

// slurmJob is one job of `squeue --json` (Slurm 22.05's shape).
type slurmJob struct {
	ID    string
	Trial string
	State string
	GRES  string
}

// slurmJobsOf lists the queued, running and ending jobs whose comment names
// the study.
func slurmJobsOf(t *testing.T, study string) []slurmJob {
	t.Helper()
	out, err := exec.Command("squeue", "--json").Output()
	if err != nil {
		t.Fatalf("squeue --json: %v", err)
	}
	var doc struct {
		Jobs []struct {
			ID      int      `json:"job_id"`
			Comment string   `json:"comment"`
			State   string   `json:"job_state"`
			GRES    []string `json:"gres_detail"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("squeue --json: %v", err)
	}
	var jobs []slurmJob
	for _, j := range doc.Jobs {
		l, ok := launcher.Parse(j.Comment)
		if !ok || l.Study != study {
			continue
		}
		switch j.State {
		case "PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING":
			jobs = append(jobs, slurmJob{ID: fmt.Sprint(j.ID), Trial: fmt.Sprint(l.Trial), State: j.State, GRES: strings.Join(j.GRES, ",")})
		}
	}
	return jobs
}

// slurmTrials reads `trials --json` with the queue's figures.
type slurmTrials struct {
	Trials []struct {
		Number     int        `json:"number"`
		Status     string     `json:"status"`
		Failure    string     `json:"failure"`
		FailureMsg string     `json:"failure_msg"`
		GPUs       []int      `json:"gpus"`
		PendingS   *float64   `json:"pending_s"`
		LaunchS    *float64   `json:"launch_s"`
		Started    time.Time  `json:"started"`
		Finished   time.Time  `json:"finished"`
		Levels     []struct{} `json:"levels"`
	} `json:"trials"`
}

func slurmTrialsOf(t *testing.T, bin, db, study string) slurmTrials {
	t.Helper()
	out, err := exec.Command(bin, "trials", study, "--db", db, "--json", "-").Output()
	if err != nil {
		t.Fatalf("trials --json: %v", err)
	}
	var doc slurmTrials
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("trials --json: %v\n%s", err, out)
	}
	return doc
}

// TestTuneSlurmExample runs examples/slurm-sim.yaml as shipped (its name
// and work dir changed): 6 trials as jobs, two at once, each with its
// pending and launch time, out-of-memory ones with the engine's message
// from the job's log, and no job left.
func TestTuneSlurmExample(t *testing.T) {
	spec, name := slurmSimStudy(t)
	bin := testengine.Binary(t)
	db := filepath.Join(t.TempDir(), "t.db")
	start := time.Now()
	out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	took := time.Since(start)
	doc := slurmTrialsOf(t, bin, db, name)
	ok := 0
	for _, tr := range doc.Trials {
		switch {
		case tr.Status == "ok" && tr.PendingS != nil && tr.LaunchS != nil && *tr.LaunchS > 0:
			ok++
		case tr.Status == "failed" && tr.Failure == "oom" && strings.Contains(tr.FailureMsg, "No available memory") && tr.PendingS != nil:
		default:
			t.Errorf("trial %d: %s/%s %q pending %v launch %v", tr.Number, tr.Status, tr.Failure, tr.FailureMsg, tr.PendingS, tr.LaunchS)
		}
		if tr.PendingS != nil && tr.LaunchS != nil {
			t.Logf("trial %d %s: pending %.2fs launch %.2fs gpus %v", tr.Number, tr.Status, *tr.PendingS, *tr.LaunchS, tr.GPUs)
		}
	}
	if len(doc.Trials) != 6 || ok < 3 {
		t.Errorf("%d trials, %d ok; want 6 and >= 3:\n%s", len(doc.Trials), ok, out)
	}
	// Two at once: some trials' runs overlap in time.
	overlaps := 0
	for i, a := range doc.Trials {
		for _, b := range doc.Trials[i+1:] {
			if a.Started.Before(b.Finished) && b.Started.Before(a.Finished) {
				overlaps++
			}
		}
	}
	if overlaps == 0 {
		t.Error("no two trials ran at once")
	}
	if left := slurmJobsOf(t, name); len(left) != 0 {
		t.Errorf("jobs left behind: %v", left)
	}
	table, _ := exec.Command(bin, "trials", name, "--db", db).Output()
	if !strings.Contains(string(table), "PENDING") || !strings.Contains(string(table), "LAUNCH") {
		t.Errorf("trials table without PENDING and LAUNCH:\n%s", table)
	}
	t.Logf("6 trials in %v", took.Round(time.Millisecond))
}

// TestTuneSlurmKillResume: SIGKILL of tune mid-trial leaves its jobs; a
// --resume cancels them, re-runs the trials in flight and finishes the
// study with each trial stored once and no job left.
func TestTuneSlurmKillResume(t *testing.T) {
	spec, name := slurmSimStudy(t, "requests_per_level: 96", "requests_per_level: 48")
	bin := testengine.Binary(t)
	db := filepath.Join(t.TempDir(), "t.db")
	cmd, _, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-rest
	_ = cmd.Wait()
	orphans := slurmJobsOf(t, name)
	if len(orphans) == 0 {
		t.Fatal("SIGKILL left no job: nothing to test")
	}
	out, err := testCommand(t, bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("removed %d leftover slurm engine(s)", len(orphans)); !strings.Contains(string(out), want) ||
		!strings.Contains(string(out), "re-ran interrupted trials") {
		t.Errorf("resume output lacks %q and the re-run:\n%s", want, out)
	}
	doc := slurmTrialsOf(t, bin, db, name)
	seen := map[int]bool{}
	for _, tr := range doc.Trials {
		if seen[tr.Number] {
			t.Errorf("trial %d stored twice", tr.Number)
		}
		seen[tr.Number] = true
		if tr.Status == "interrupted" || tr.Status == "running" {
			t.Errorf("trial %d still %s", tr.Number, tr.Status)
		}
	}
	if len(doc.Trials) != 6 {
		t.Errorf("%d trials after resume, want 6", len(doc.Trials))
	}
	for _, j := range orphans {
		if st, _ := exec.Command("squeue", "-h", "-j", j.ID, "-o", "%T").Output(); strings.TrimSpace(string(st)) != "" {
			t.Errorf("orphaned job %s (trial %s) is %s", j.ID, j.Trial, st)
		}
	}
	if left := slurmJobsOf(t, name); len(left) != 0 {
		t.Errorf("jobs left after resume: %v", left)
	}
}

// TestTuneSlurmScancel: a running trial's job cancelled from outside is a
// failed trial of class scheduler with Slurm's words, and the study goes
// on to its end.
func TestTuneSlurmScancel(t *testing.T) {
	// One longer level, so the trial in flight cannot end before the
	// scancel lands (on a loaded machine two levels of 96 did).
	spec, name := slurmSimStudy(t, "gpu_memory_fraction: [0.1, 0.85, 0.9]", "gpu_memory_fraction: [0.85, 0.9]",
		"trials: 6", "trials: 4", "load: {concurrency: [4, 16]}", "load: {concurrency: [16]}",
		"requests_per_level: 96", "requests_per_level: 480")
	bin := testengine.Binary(t)
	db := filepath.Join(t.TempDir(), "t.db")
	cmd, inFlight, rest := startTuneUntilInFlight(t, bin, spec, "--db", db)
	var victim string
	for _, j := range slurmJobsOf(t, name) {
		if j.Trial == fmt.Sprint(inFlight) {
			victim = j.ID
		}
	}
	if victim == "" {
		_ = cmd.Process.Kill()
		t.Fatalf("no job of trial %d", inFlight)
	}
	if out, err := exec.Command("scancel", victim).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v %s", victim, err, out)
	}
	stderr := <-rest // before Wait, which closes the pipe
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("tune after an outside scancel: %v\n%s", err, stderr)
	}
	doc := slurmTrialsOf(t, bin, db, name)
	ok := 0
	for _, tr := range doc.Trials {
		switch {
		case tr.Number == inFlight:
			if tr.Status != "failed" || tr.Failure != "scheduler" || !strings.Contains(tr.FailureMsg, "slurm job "+victim+" CANCELLED") {
				t.Errorf("cancelled trial %d: %s/%s %q", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
			}
			t.Logf("trial %d: %s/%s %s", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		case tr.Status == "ok":
			ok++
		default:
			t.Errorf("trial %d: %s/%s %q", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		}
	}
	if len(doc.Trials) != 4 || ok != 3 {
		t.Errorf("%d trials, %d ok; want 4 and 3", len(doc.Trials), ok)
	}
	if left := slurmJobsOf(t, name); len(left) != 0 {
		t.Errorf("jobs left: %v", left)
	}
}

// TestTuneSlurmCannotStart: a partition Slurm does not have is refused
// before anything runs (exit 2, sbatch's message); a trial asking for more
// GPUs than any node has fails at once with Slurm's message, and the
// study goes on.
func TestTuneSlurmCannotStart(t *testing.T) {
	bin := testengine.Binary(t)
	t.Run("partition", func(t *testing.T) {
		spec, name := slurmSimStudy(t, "partition: gpu ", "partition: nopart ")
		db := filepath.Join(t.TempDir(), "t.db")
		out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "Invalid partition name specified") {
			t.Errorf("tune with a bad partition: %v\n%s", err, out)
		}
		if left := slurmJobsOf(t, name); len(left) != 0 {
			t.Errorf("jobs: %v", left)
		}
	})
	t.Run("gres", func(t *testing.T) {
		spec, name := slurmSimStudy(t, "tensor_parallel: 2", "tensor_parallel: [2, 8]",
			"gpu_memory_fraction: [0.1, 0.85, 0.9]", "gpu_memory_fraction: 0.9",
			"max_running_requests: [16, 64]", "max_running_requests: 16",
			"gpus: [0, 1, 2, 3]", "gpus: [0, 1, 2, 3, 4, 5, 6, 7]", "trials: 6", "trials: 2")
		db := filepath.Join(t.TempDir(), "t.db")
		start := time.Now()
		out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput()
		if err != nil {
			t.Fatalf("tune: %v\n%s", err, out)
		}
		doc := slurmTrialsOf(t, bin, db, name)
		if len(doc.Trials) != 2 {
			t.Fatalf("%d trials:\n%s", len(doc.Trials), out)
		}
		for _, tr := range doc.Trials {
			if len(tr.GPUs) == 8 {
				if tr.Status != "failed" || tr.Failure != "launch_error" || !strings.Contains(tr.FailureMsg, "Requested node configuration is not available") {
					t.Errorf("8-GPU trial: %s/%s %q", tr.Status, tr.Failure, tr.FailureMsg)
				}
				if d := tr.Finished.Sub(tr.Started); d > 10*time.Second {
					t.Errorf("8-GPU trial took %v to fail", d)
				}
				t.Logf("8-GPU trial: %s/%s after %v: %s", tr.Status, tr.Failure, tr.Finished.Sub(tr.Started).Round(time.Millisecond), tr.FailureMsg)
			} else if tr.Status != "ok" {
				t.Errorf("2-GPU trial: %s/%s %q", tr.Status, tr.Failure, tr.FailureMsg)
			}
		}
		t.Logf("study in %v", time.Since(start).Round(time.Millisecond))
	})
}

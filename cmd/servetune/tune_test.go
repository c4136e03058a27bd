package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

// tuneSpec is a short study on the simulated engine: tiny workload, high
// time scale. gpu_memory_fraction 0.1 cannot hold the weights, so those
// trials fail at start-up with the engine's own message.
const tuneSpec = `name: clitest
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher:
  kind: sim
  gpus: [0]
  ready_timeout: 30s
  time_scale: 20
  load_time: 2s
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  max_running_requests: [8, 32]
  gpu_memory_fraction: [0.1, 0.9]
workload:
  dataset: {kind: random, input: 128, output: 24}
  load: {concurrency: [2, 8]}
  requests_per_level: REQS
  warmup: 0
slo: {ttft_p99_ms: 5000}
tuner: {sampler: grid, trials: TRIALS, seed: 1, precheck: false, confirm: false}
`

func writeSpec(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "study.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTuneInvalidSpec(t *testing.T) {
	good := strings.NewReplacer("REQS", "8", "TRIALS", "2").Replace(tuneSpec)
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown key", "engine: vllm", "engine: vllm\nenginee: sglang", `:4: enginee: unknown key`},
		{"bad launcher", "kind: sim", "kind: nomad", `:5: launcher.kind: "nomad"`},
		{"bad space value", "gpu_memory_fraction: [0.1, 0.9]", "gpu_memory_fraction: [0.1, 1.9]", `:13: space.gpu_memory_fraction`},
		{"bad objective", "seed: 1,", "seed: 1, objective: max happiness,", `:20: tuner.objective`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := writeSpec(t, strings.Replace(good, tc.old, tc.new, 1))
			db := filepath.Join(t.TempDir(), "t.db")
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"tune", spec, "--db", db}, &out, &errb)
			msg := errb.String()
			if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, spec+tc.want) {
				t.Fatalf("code %d, stderr %q; want exit 2 and one line with %q", code, msg, spec+tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("the database was created for an invalid spec")
			}
		})
	}
}

func TestRecommendUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"recommend", "x", "--prefer", "speed"}, "--prefer"},
		{[]string{"recommend", "x", "--format", "helm"}, "--format"},
		{[]string{"trials", "x", "--db", "/nonexistent/none.db"}, "no study database"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("code %d, stderr %q", code, errb.String())
			}
		})
	}
}

// buildServetune builds the CLI, which the sim launcher runs as the engine.
func buildServetune(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// Built once per test binary: a build per test (15 of them, some in
	// parallel) took minutes of the package's limit on a loaded machine.
	return testengine.Binary(t)
}

type trialsDoc struct {
	Trials []struct {
		Number     int            `json:"number"`
		Status     string         `json:"status"`
		Failure    string         `json:"failure"`
		FailureMsg string         `json:"failure_msg"`
		Settings   map[string]any `json:"settings"`
		GPUs       []int          `json:"gpus"`
		Levels     []struct {
			Completed int `json:"completed"`
		} `json:"levels"`
	} `json:"trials"`
}

func trialsJSON(t *testing.T, bin, db string) trialsDoc {
	t.Helper()
	out, err := exec.Command(bin, "trials", "clitest", "--db", db, "--json", "-").Output()
	if err != nil {
		t.Fatalf("trials --json: %v", err)
	}
	var doc trialsDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("trials --json: %v\n%s", err, out)
	}
	return doc
}

// TestTuneOOMAndRecommend runs a whole study through the binary: the trials
// whose engine runs out of memory at start-up are stored as failed/oom with
// the engine's message, the others are measured, and recommend prints a
// serve command.
func TestTuneOOMAndRecommend(t *testing.T) {
	bin := buildServetune(t)
	spec := writeSpec(t, strings.NewReplacer("REQS", "8", "TRIALS", "4").Replace(tuneSpec))
	db := filepath.Join(t.TempDir(), "t.db")
	out, err := exec.Command(bin, "tune", spec, "--db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "vllm serve meta-llama/Llama-3.1-8B-Instruct") {
		t.Errorf("tune printed no serve command:\n%s", out)
	}
	doc := trialsJSON(t, bin, db)
	if len(doc.Trials) != 4 {
		t.Fatalf("%d trials, want 4", len(doc.Trials))
	}
	oom, ok := 0, 0
	for _, tr := range doc.Trials {
		frac, _ := tr.Settings["gpu_memory_fraction"].(float64)
		switch {
		case frac < 0.5:
			if tr.Status != "failed" || tr.Failure != "oom" || !strings.Contains(tr.FailureMsg, "memory") {
				t.Errorf("trial %d (fraction %g): %s/%s %q", tr.Number, frac, tr.Status, tr.Failure, tr.FailureMsg)
			}
			oom++
		default:
			if tr.Status != "ok" || len(tr.Levels) != 2 || tr.Levels[1].Completed != 8 {
				t.Errorf("trial %d: %s/%s %+v", tr.Number, tr.Status, tr.Failure, tr.Levels)
			}
			ok++
		}
	}
	if oom != 2 || ok != 2 {
		t.Errorf("%d oom and %d ok trials, want 2 and 2", oom, ok)
	}
	for _, format := range []string{"vllm", "docker", "json"} {
		rec, err := exec.Command(bin, "recommend", "clitest", "--db", db, "--format", format).Output()
		if err != nil || !strings.Contains(string(rec), "--gpu-memory-utilization 0.9") && !strings.Contains(string(rec), `"gpu_memory_fraction": 0.9`) {
			t.Errorf("recommend --format %s: %v\n%s", format, err, rec)
		}
	}
	if p, err := exec.Command(bin, "pareto", "clitest", "--db", db, "--json", "-").Output(); err != nil || !strings.Contains(string(p), `"front"`) {
		t.Errorf("pareto: %v\n%s", err, p)
	}
	if s, err := exec.Command(bin, "studies", "--db", db).Output(); err != nil || !regexp.MustCompile(`clitest\s+finished\s+4\s+2\s+2`).Match(s) {
		t.Errorf("studies: %v\n%s", err, s)
	}
}

// TestTuneKillResume kills the study with SIGKILL while a trial runs, then
// resumes it: every trial is accounted for once, the interrupted one re-run.
func TestTuneKillResume(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses /proc to clean up orphaned engines")
	}
	bin := buildServetune(t)
	spec := writeSpec(t, strings.NewReplacer("REQS", "64", "TRIALS", "4").Replace(tuneSpec))
	db := filepath.Join(t.TempDir(), "t.db")
	t.Cleanup(func() { killOrphans(t, bin) })

	cmd := exec.Command(bin, "tune", spec, "--db", db)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the second measured level of a healthy trial is under way:
	// a trial is in flight for sure.
	killed := -1
	inFlight := regexp.MustCompile(`^trial (\d+) concurrency=8 `)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := inFlight.FindStringSubmatch(sc.Text()); m != nil {
			killed, _ = strconv.Atoi(m[1])
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	if killed < 0 {
		t.Fatal("the study ended before a trial was in flight")
	}
	killOrphans(t, bin)

	out, err := exec.Command(bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "re-ran interrupted trials ["+strconv.Itoa(killed)+"]") {
		t.Errorf("resume did not re-run trial %d:\n%s", killed, out)
	}
	doc := trialsJSON(t, bin, db)
	if len(doc.Trials) != 4 {
		t.Fatalf("%d trials after resume, want 4: %+v", len(doc.Trials), doc.Trials)
	}
	for i, tr := range doc.Trials {
		if tr.Number != i {
			t.Errorf("trial at %d has number %d (duplicates or gaps)", i, tr.Number)
		}
		if tr.Status != "ok" && tr.Status != "failed" {
			t.Errorf("trial %d is %s", tr.Number, tr.Status)
		}
		if tr.Number == killed && tr.Status != "ok" {
			t.Errorf("interrupted trial %d was not re-run to completion: %s/%s", killed, tr.Status, tr.Failure)
		}
	}
}

// killOrphans stops engines the killed study left behind: processes started
// from this test's binary (their argv[0] is its path).
func killOrphans(t *testing.T, bin string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(argv, []byte(bin+"\x00")) {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
			done := make(chan struct{})
			go func() { _, _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// TestTuneKillResumeWrapper: the process launcher's command is a wrapper
// script that starts the engine without exec. SIGKILL of tune kills the
// wrapper (parent-death signal) but not the engine it started; --resume
// stops that orphan (found by its labels), re-runs the trial and finishes.
func TestTuneKillResumeWrapper(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finds orphaned engines through /proc")
	}
	bin := buildServetune(t)
	name := fmt.Sprintf("wrapper-%d", os.Getpid())
	src := strings.NewReplacer(
		"name: clitest", "name: "+name,
		"  kind: sim\n  gpus: [0]\n", "  kind: process\n  gpus: [0]\n  command: [sh, -c, '\"$0\" \"$@\" & wait', "+bin+", sim, serve, \"{model}\", --port, \"{port}\", --time-scale, \"20\", --sim-load-time, 2s, \"{args}\"]\n",
		"  time_scale: 20\n  load_time: 2s\n", "",
		"REQS", "64", "TRIALS", "3",
	).Replace(tuneSpec)
	spec := writeSpec(t, src)
	db := filepath.Join(t.TempDir(), "t.db")
	t.Cleanup(func() { killOrphans(t, bin) })

	cmd := exec.Command(bin, "tune", spec, "--db", db)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inFlight := regexp.MustCompile(`^trial (\d+) concurrency=8 `)
	sc := bufio.NewScanner(stderr)
	var head strings.Builder
	killed := false
	var leaders []int
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if inFlight.MatchString(sc.Text()) {
			leaders = childPIDs(cmd.Process.Pid)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("no trial was in flight:\n%s", head.String())
	}
	waitDead(t, leaders) // the wrapper's parent-death signal
	if n := labelledProcesses(t, name); n == 0 {
		t.Fatal("no orphaned engine after SIGKILL: nothing to test")
	}
	out, err := exec.Command(bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "removed 1 leftover process engine(s)") {
		t.Errorf("resume did not remove the orphan:\n%s", out)
	}
	if n := labelledProcesses(t, name); n != 0 {
		t.Errorf("%d engine processes of the study left after the resumed run", n)
	}
}

// childPIDs are the processes whose parent is pid.
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'s end.
		i := bytes.LastIndexByte(stat, ')')
		if f := strings.Fields(string(stat[i+1:])); i > 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(e.Name())
			out = append(out, n)
		}
	}
	return out
}

// waitDead waits until every process of pids has ended (gone, or a
// zombie no one reaps): a killed parent's children, each ended by its
// parent-death signal.
func waitDead(t *testing.T, pids []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pid := range pids {
		if err := proc.WaitEnd(ctx, pid); err != nil {
			t.Fatalf("process %d (of %d) still running after its parent was killed: %v", pid, len(pids), err)
		}
	}
}

// labelledProcesses counts running processes labelled with study.
func labelledProcesses(t *testing.T, study string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(launcher.EnvLabel+"=")); ok {
				if l, ok := launcher.Parse(string(v)); ok && l.Study == study {
					n++
				}
			}
		}
	}
	return n
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

// disaggStudy is examples/disagg-sim.yaml under a study name of the test's
// own (the engines' label).
func disaggStudy(t *testing.T) (spec, name string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "disagg-sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("disagg-%d", os.Getpid())
	s := strings.Replace(string(src), "name: disagg-sim\n", "name: "+name+"\n", 1)
	if s == string(src) {
		t.Fatal("disagg-sim.yaml's name line changed")
	}
	return writeSpec(t, s), name
}

func disaggTrials(t *testing.T, bin, db, study string) trialsDoc {
	t.Helper()
	out, err := exec.Command(bin, "trials", study, "--db", db, "--json", "-").Output()
	if err != nil {
		t.Fatalf("trials --json: %v", err)
	}
	var doc trialsDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("trials --json: %v\n%s", err, out)
	}
	return doc
}

// TestTuneDisaggKillResume runs examples/disagg-sim.yaml: its
// disaggregated trials start a prefill engine, a decode engine and the
// router; SIGKILL of tune while one is measured, then --resume, finishes
// the study with every trial ok and no process of the study left.
func TestTuneDisaggKillResume(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finds the study's processes through /proc")
	}
	bin := buildServetune(t)
	spec, name := disaggStudy(t)
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
	// The grid runs the aggregated trials 0 and 1 first, then the
	// disaggregated 2 and 3: kill while one of those measures.
	inFlight := regexp.MustCompile(`^trial ([23]) concurrency=`)
	killed, running := -1, 0
	var leaders []int
	var head strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if m := inFlight.FindStringSubmatch(sc.Text()); m != nil {
			running = labelledProcesses(t, name)
			killed, _ = strconv.Atoi(m[1])
			leaders = childPIDs(cmd.Process.Pid)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	if killed < 0 {
		t.Fatalf("no disaggregated trial was in flight:\n%s", head.String())
	}
	if running < 3 {
		t.Errorf("%d processes of the study while a disaggregated trial measured, want its prefill, decode and router", running)
	}
	waitDead(t, leaders) // the parent-death signal
	out, err := exec.Command(bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "re-ran interrupted trials [") || !strings.Contains(string(out), strconv.Itoa(killed)) {
		t.Errorf("resume did not re-run trial %d:\n%s", killed, out)
	}
	doc := disaggTrials(t, bin, db, name)
	if len(doc.Trials) != 4 {
		t.Fatalf("%d trials, want 4", len(doc.Trials))
	}
	disagg := 0
	for _, tr := range doc.Trials {
		if tr.Status != "ok" {
			t.Errorf("trial %d %s/%s: %s", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		}
		if on, _ := tr.Settings["disaggregated"].(bool); on {
			disagg++
			if len(tr.GPUs) != 2 {
				t.Errorf("disaggregated trial %d ran on GPUs %v, want two", tr.Number, tr.GPUs)
			}
		}
	}
	if disagg != 2 {
		t.Errorf("%d disaggregated trials, want 2", disagg)
	}
	if n := labelledProcesses(t, name); n != 0 {
		t.Errorf("%d processes of the study left after the resumed run", n)
	}
	checkDisaggRecommend(t, bin, db, name)
}

// checkDisaggRecommend: recommend on the study prints every part's command
// and the other shape beside the best, with the measured difference; its
// k8s manifests hold a Deployment and a Service per role and the router's.
func checkDisaggRecommend(t *testing.T, bin, db, name string) {
	t.Helper()
	out, err := exec.Command(bin, "recommend", name, "--db", db, "--format", "json").Output()
	if err != nil {
		t.Fatalf("recommend: %v\n%s", err, out)
	}
	type part struct {
		Name     string   `json:"name"`
		GPUs     []int    `json:"gpus"`
		Command  []string `json:"command"`
		Install  string   `json:"install"`
		Measured []string `json:"measured"`
	}
	var doc struct {
		Shape       string `json:"shape"`
		Parts       []part `json:"parts"`
		Alternative struct {
			Shape      string             `json:"shape"`
			Parts      []part             `json:"parts"`
			Command    []string           `json:"command"`
			Difference map[string]float64 `json:"difference_pct"`
		} `json:"alternative"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("recommend --format json: %v\n%s", err, out)
	}
	parts := doc.Parts
	if doc.Shape == "aggregated" {
		parts = doc.Alternative.Parts
	}
	if doc.Alternative.Shape == "" || doc.Alternative.Shape == doc.Shape || len(doc.Alternative.Difference) == 0 {
		t.Errorf("no other shape beside the %s best: %s", doc.Shape, out)
	}
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "prefill 0,decode 0,router" {
		t.Fatalf("parts %v, want prefill 0, decode 0, router:\n%s", names, out)
	}
	// The recipe's router is vLLM's packaged one; the stand-in the study
	// measured is named beside it.
	if !slices.Contains(parts[0].Command, "--kv-transfer-config") || !slices.Contains(parts[2].Command, "--vllm-pd-disaggregation") ||
		!strings.HasPrefix(parts[2].Install, "pip install vllm-router==") || !slices.Contains(parts[2].Measured, "--prefiller-ports") ||
		slices.Equal(parts[0].GPUs, parts[1].GPUs) {
		t.Errorf("part commands %+v", parts)
	}
	text, err := exec.Command(bin, "recommend", name, "--db", db).Output()
	if err != nil || !strings.Contains(string(text), "alternative: trial") || !strings.Contains(string(text), "sim router --host 127.0.0.1 --port 8000") {
		t.Errorf("recommend: %v\n%s", err, text)
	}
	t.Logf("the best is %s; measured difference %v", doc.Shape, doc.Alternative.Difference)
	// The report shows what recommend prints: every part's command and
	// the other shape's best with the measured difference.
	md, err := exec.Command(bin, "report", name, "--db", db, "--format", "md").Output()
	other := map[string]string{"disaggregated": "aggregated", "aggregated": "disaggregated"}[doc.Shape]
	for _, want := range []string{"Beside it, the best " + other + " configuration", "| output tokens/s per GPU |"} {
		if err != nil || !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q: %v\n%s", want, err, md)
		}
	}
	if err == nil && !strings.Contains(string(md), "sim router --host 127.0.0.1 --port 8000") {
		t.Errorf("report lacks the router's command:\n%s", md)
	}
	if doc.Shape != "disaggregated" {
		return // the manifests below are the disaggregated ones
	}
	k8s, err := exec.Command(bin, "recommend", name, "--db", db, "--format", "k8s").Output()
	if err != nil {
		t.Fatalf("recommend --format k8s: %v\n%s", err, k8s)
	}
	for _, want := range []string{"name: vllm-llama-3-1-8b-instruct-prefill", "name: vllm-llama-3-1-8b-instruct-decode",
		"name: vllm-llama-3-1-8b-instruct-router", "name: vllm-llama-3-1-8b-instruct\n", "- http://vllm-llama-3-1-8b-instruct-prefill:8000", "- 0.0.0.0", "image: vllm/vllm-router:v"} {
		if !strings.Contains(string(k8s), want) {
			t.Errorf("manifests lack %q:\n%s", want, k8s)
		}
	}
	if n := strings.Count(string(k8s), "kind: Deployment"); n != 3 {
		t.Errorf("%d Deployments, want prefill, decode and router", n)
	}
}

// TestTuneDisaggDocker runs examples/disagg-sim.yaml with the docker
// kind: each engine part is a container of the simulated engine's image,
// the router a local process in front of them; every trial is ok and
// neither a container nor a router is left.
func TestTuneDisaggDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	requireSimImage(t)
	bin := buildServetune(t)
	spec, name := disaggStudy(t)
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(src), "  kind: sim\n", "  kind: docker\n  image: servetune-sim:dev\n", 1)
	spec = writeSpec(t, s)
	t.Cleanup(func() { // a failed test leaves no container behind
		if ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+launcher.LabelStudy+"="+name).Output(); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
		}
	})
	db := filepath.Join(t.TempDir(), "t.db")
	if out, err := testCommand(t, bin, "tune", spec, "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	for _, tr := range disaggTrials(t, bin, db, name).Trials {
		if tr.Status != "ok" {
			t.Errorf("trial %d %s/%s: %s", tr.Number, tr.Status, tr.Failure, tr.FailureMsg)
		}
	}
	left, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+launcher.LabelStudy+"="+name).Output()
	if err != nil || len(strings.TrimSpace(string(left))) != 0 {
		t.Errorf("containers left behind: %q (%v)", left, err)
	}
	if n := labelledProcesses(t, name); n != 0 {
		t.Errorf("%d router processes left", n)
	}
}

// TestTuneDisaggSlurm runs examples/disagg-sim.yaml with the slurm kind:
// each engine part is a batch job of the simulated engine on the local
// Slurm, named after its part and holding its own GPU, the router a local
// process in front of them. SIGKILL of tune while a disaggregated trial
// measures leaves its jobs; --resume cancels them, re-runs the trial and
// finishes with every trial ok, each with its queue time, neither a job
// nor a router left, and recommend prints every part's command.
func TestTuneDisaggSlurm(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finds the study's routers through /proc")
	}
	testengine.Slurm(t)
	bin := buildServetune(t)
	spec, name := disaggStudy(t)
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(src), "  kind: sim\n", "  kind: slurm\n  partition: "+testengine.SlurmPartition+
		"\n  time_limit: 10m\n  simulated: true\n  workdir: "+t.TempDir()+"\n", 1)
	s = strings.Replace(s, "  ready_timeout: 60s\n", "  ready_timeout: 2m\n", 1)
	if !strings.Contains(s, "kind: slurm") || !strings.Contains(s, "ready_timeout: 2m") {
		t.Fatal("disagg-sim.yaml's launcher lines changed")
	}
	spec = writeSpec(t, s)
	t.Cleanup(func() { // a failed test leaves no job nor router behind
		for _, j := range slurmJobsOf(t, name) {
			_ = exec.Command("scancel", j.ID).Run()
		}
		killOrphans(t, bin)
	})
	db := filepath.Join(t.TempDir(), "t.db")

	cmd := testCommand(t, bin, "tune", spec, "--db", db)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Trials 2 and 3 are the disaggregated ones (TestTuneDisaggKillResume).
	inFlight := regexp.MustCompile(`^trial ([23]) concurrency=`)
	killed := -1
	var leaders []int
	var jobs []slurmJob
	routers := 0
	var head strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if m := inFlight.FindStringSubmatch(sc.Text()); m != nil {
			jobs, routers = slurmJobsOf(t, name), labelledProcesses(t, name)
			killed, _ = strconv.Atoi(m[1])
			leaders = childPIDs(cmd.Process.Pid)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	if killed < 0 {
		t.Fatalf("no disaggregated trial was in flight:\n%s", head.String())
	}
	// The trial in flight: a prefill job and a decode job, each on one GPU
	// of its own, and its router.
	var mine []string
	for _, j := range jobs {
		if j.Trial == strconv.Itoa(killed) {
			mine = append(mine, j.GRES)
		}
	}
	if len(mine) != 2 || mine[0] == mine[1] || !strings.HasPrefix(mine[0], "gpu:1(") || routers < 1 {
		t.Errorf("trial %d in flight: jobs on %v and %d routers; want two 1-GPU jobs on different GPUs and a router", killed, mine, routers)
	}
	t.Logf("killed while trial %d measured: %d jobs of the study (trial %d's on %v), %d router(s)", killed, len(jobs), killed, mine, routers)
	names, _ := exec.Command("squeue", "-h", "-o", "%j").Output()
	for _, part := range []string{"prefill0", "decode0"} {
		if want := fmt.Sprintf("-t%d-%s", killed, part); !strings.Contains(string(names), want) {
			t.Errorf("no job named *%s in squeue:\n%s", want, names)
		}
	}
	waitDead(t, leaders) // the router's parent-death signal
	out, err := testCommand(t, bin, "tune", spec, "--db", db, "--resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "leftover slurm engine(s)") || !strings.Contains(string(out), "re-ran interrupted trials [") {
		t.Errorf("resume removed no job or re-ran nothing:\n%s", out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "leftover") || strings.Contains(l, "re-ran") {
			t.Logf("resume: %s", l)
		}
	}
	doc := slurmTrialsOf(t, bin, db, name)
	if len(doc.Trials) != 4 {
		t.Fatalf("%d trials, want 4", len(doc.Trials))
	}
	for _, tr := range doc.Trials {
		if tr.Status != "ok" || tr.PendingS == nil || tr.LaunchS == nil {
			t.Errorf("trial %d %s/%s %q pending %v launch %v", tr.Number, tr.Status, tr.Failure, tr.FailureMsg, tr.PendingS, tr.LaunchS)
			continue
		}
		t.Logf("trial %d: gpus %v pending %.2fs launch %.2fs", tr.Number, tr.GPUs, *tr.PendingS, *tr.LaunchS)
	}
	if left := slurmJobsOf(t, name); len(left) != 0 {
		t.Errorf("jobs left after the resumed run: %v", left)
	}
	if n := labelledProcesses(t, name); n != 0 {
		t.Errorf("%d routers left after the resumed run", n)
	}
	for _, j := range jobs {
		if st, _ := exec.Command("squeue", "-h", "-j", j.ID, "-o", "%T").Output(); strings.TrimSpace(string(st)) != "" {
			t.Errorf("job %s of the killed run (trial %s) is %s", j.ID, j.Trial, st)
		}
	}
	checkDisaggRecommend(t, bin, db, name)
}

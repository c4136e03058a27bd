package slurm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testengine.Cleanup()
	os.Exit(code)
}

// simSlurm is a launcher of the simulated engine on the test cluster.
func simSlurm(t *testing.T) *Slurm {
	t.Helper()
	testengine.Slurm(t)
	return &Slurm{Partition: testengine.SlurmPartition, TimeLimit: 5 * time.Minute, WorkDir: t.TempDir(),
		Simulated: true, Binary: testengine.Binary(t), GPU: "H100-SXM", Scale: 10}
}

// testStudy is a study name no other test or run uses.
func testStudy(t *testing.T) string {
	return fmt.Sprintf("slurmtest-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid(), time.Now().UnixNano())
}

func spec(study string, trial int, gpus ...int) launcher.Spec {
	return launcher.Spec{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: gpus,
		Study: study, Trial: trial, Owner: proc.NewRun().String()}
}

// jobsOf lists the jobs squeue reports with the study in their comment,
// every state.
func jobsOf(t *testing.T, study string) []Job {
	t.Helper()
	jobs, err := commands{}.squeue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []Job
	for _, j := range jobs {
		if l, ok := launcher.Parse(j.Comment); ok && l.Study == study {
			out = append(out, j)
		}
	}
	return out
}

// active are the jobs of study still queued, running or ending.
func active(t *testing.T, study string) []string {
	var ids []string
	for _, j := range jobsOf(t, study) {
		if !ended(j.State) {
			ids = append(ids, j.ID+" "+j.State)
		}
	}
	return ids
}

// cancelAll is a test's last resort: no job of its study outlives it.
func cancelAll(t *testing.T, study string) {
	t.Cleanup(func() {
		for _, j := range jobsOf(t, study) {
			if !ended(j.State) {
				_ = exec.Command("scancel", j.ID).Run()
			}
		}
	})
}

// TestJobLifecycle: a trial's job is submitted with its name and comment,
// asks for its GPUs as GRES, starts, serves the OpenAI API from its node,
// reports how long it was pending, and Stop leaves neither a job nor a file.
func TestJobLifecycle(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	ctx := context.Background()
	trialSpec := spec(study, 3, 0, 1)
	in, err := s.Launch(ctx, trialSpec)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := in.Ready(rctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, in.Logs())
	}
	resp, err := http.Get(in.Endpoint() + "/v1/models")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %v %v", resp, err)
	}
	resp.Body.Close()
	jobs := jobsOf(t, study)
	if len(jobs) != 1 || jobs[0].State != "RUNNING" || jobs[0].Name != jobName(trialSpec) || !strings.HasPrefix(jobs[0].GRES, "gpu:2(") {
		t.Fatalf("jobs of the study: %+v", jobs)
	}
	pending, started, _ := in.(*job).Queue()
	if started.IsZero() || pending <= 0 || pending > time.Minute {
		t.Errorf("pending %v, started %v", pending, started)
	}
	t.Logf("job %s: pending %v, node %s, %s", jobs[0].ID, pending.Round(time.Millisecond), jobs[0].Node, jobs[0].GRES)
	if logs := in.Logs(); !strings.Contains(logs, "servetune: slurm job "+jobs[0].ID+" on ") || !strings.Contains(logs, "GPUs 0,1") && !strings.Contains(logs, "GPUs 2,3") {
		t.Errorf("logs:\n%s", logs)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := active(t, study); len(left) > 0 {
		t.Errorf("jobs left after Stop: %v", left)
	}
	if ents, _ := os.ReadDir(s.WorkDir); len(ents) != 0 {
		t.Errorf("files left in the work dir: %v", ents)
	}
}

// TestDisjointGRES: two 2-GPU jobs run at once on disjoint GPUs of the
// 4-GPU node, and a third waits for Resources until one ends.
func TestDisjointGRES(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	ctx := context.Background()
	var ins []launcher.Instance
	for i := range 3 {
		in, err := s.Launch(ctx, spec(study, i, 2*i, 2*i+1))
		if err != nil {
			t.Fatal(err)
		}
		defer in.Stop(ctx)
		ins = append(ins, in)
	}
	for _, in := range ins[:2] {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := in.Ready(rctx)
		cancel()
		if err != nil {
			t.Fatalf("ready: %v\n%s", err, in.Logs())
		}
	}
	idx := regexp.MustCompile(`IDX:([0-9,-]+)`)
	seen := map[string]bool{}
	for _, j := range jobsOf(t, study) {
		switch j.State {
		case "RUNNING":
			m := idx.FindStringSubmatch(j.GRES)
			if m == nil {
				t.Fatalf("job %s: GRES %q has no indices", j.ID, j.GRES)
			}
			for _, g := range expand(m[1]) {
				if seen[g] {
					t.Errorf("GPU %s given to two jobs", g)
				}
				seen[g] = true
			}
		case "PENDING":
			if j.Reason != "Resources" && j.Reason != "Priority" {
				t.Errorf("third job pending for %q", j.Reason)
			}
		default:
			t.Errorf("job %s %s", j.ID, j.State)
		}
	}
	if len(seen) != 4 {
		t.Errorf("GPUs in use %v, want all 4 by two jobs", seen)
	}
	if _, started, reason := ins[2].(*job).Queue(); !started.IsZero() || !strings.Contains(reason, "pending") {
		t.Errorf("third job: started %v, %q", started, reason)
	}
	// One ends: the third starts.
	if err := ins[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := ins[2].Ready(rctx); err != nil {
		t.Fatalf("third job: %v", err)
	}
}

// expand reads Slurm's index list "0-1,3".
func expand(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		if !ok {
			out = append(out, part)
			continue
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		for i := a; i <= b; i++ {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

// TestCannotStart: a job Slurm refuses (an unknown partition, more GRES
// than any node has) fails its trial at once with sbatch's message; a job
// that stays queued fails at the ready timeout with the scheduler's reason
// and is cancelled.
func TestCannotStart(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	plan := func(l *Slurm, gpus ...int) trial.Plan {
		return trial.Plan{Launcher: l, Spec: spec(study, 0, gpus...), ReadyTimeout: 5 * time.Second}
	}
	bad := *s
	bad.Partition = "no-such-partition"
	big := *s
	queued := *s
	queued.SbatchArgs = []string{"--begin=now+1hour"}
	for _, tt := range []struct {
		name  string
		plan  trial.Plan
		class engine.Failure
		msg   string
	}{
		{"partition", plan(&bad, 0), engine.FailLaunchError, "Invalid partition name specified"},
		{"gres", plan(&big, 0, 1, 2, 3, 4, 5, 6, 7), engine.FailLaunchError, "Requested node configuration is not available; partition gpu has "},
		{"queued", plan(&queued, 0), engine.FailNotReady, "still queued after the ready timeout (5s): slurm job"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res := trial.Run(context.Background(), tt.plan)
			took := time.Since(start)
			if res.Status != "failed" || res.Failure != tt.class || !strings.Contains(res.Message, tt.msg) {
				t.Errorf("%s/%s %q, want %s with %q", res.Status, res.Failure, res.Message, tt.class, tt.msg)
			}
			if took > 30*time.Second {
				t.Errorf("took %v", took)
			}
			t.Logf("%s after %v: %s", res.Failure, took.Round(time.Millisecond), res.Message)
		})
	}
	if left := active(t, study); len(left) > 0 {
		t.Errorf("jobs left: %v", left)
	}
}

// TestNodeDownHint: a job whose only node is down waits for it
// (ReqNodeNotAvail); at the ready timeout the trial fails naming the
// node's state and the command that resumes it. The node is resumed
// after, also when the test fails.
func TestNodeDownHint(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	out, err := exec.Command("sinfo", "-h", "-N", "-p", testengine.SlurmPartition, "-o", "%N").Output()
	nodes := strings.Fields(string(out))
	if err != nil || len(nodes) != 1 {
		t.Skipf("wants a one-node partition %s (sinfo: %q, %v)", testengine.SlurmPartition, out, err)
	}
	node := nodes[0]
	if out, err := exec.Command("scontrol", "update", "nodename="+node, "state=down", "reason=servetune-test").CombinedOutput(); err != nil {
		t.Skipf("cannot take %s down (not the cluster's admin?): %v %s", node, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("scontrol", "update", "nodename="+node, "state=resume").CombinedOutput(); err != nil {
			t.Errorf("resume %s: %v %s", node, err, out)
		}
	})
	res := trial.Run(context.Background(), trial.Plan{Launcher: s, Spec: spec(study, 0, 0), ReadyTimeout: 3 * time.Second})
	want := "scontrol update nodename=" + node + " state=resume"
	if res.Failure != engine.FailNotReady || !strings.Contains(res.Message, node+" is down") || !strings.Contains(res.Message, want) {
		t.Errorf("%s/%s %q, want not_ready naming %s down and %q", res.Status, res.Failure, res.Message, node, want)
	}
}

// TestScancelIsScheduler: a job cancelled from outside while it serves
// ends the instance at once and is classified as the scheduler's doing.
func TestScancelIsScheduler(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	ctx := context.Background()
	in, err := s.Launch(ctx, spec(study, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(ctx)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := in.Ready(rctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	id := in.(*job).ID()
	if out, err := exec.Command("scancel", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, out)
	}
	ex := in.(launcher.Exiter)
	select {
	case <-ex.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the instance did not see its job cancelled")
	}
	class, msg := engine.Classify(ex.Exit(), true, in.Logs())
	if class != engine.FailScheduler || !strings.Contains(msg, "slurm job "+id+" CANCELLED") {
		t.Errorf("classified %s %q", class, msg)
	}
}

// TestReapOnlyDeadRunsOfStudy: the reaper cancels the study's jobs whose
// run is dead, and spares a live run's jobs, another study's, and jobs
// that only look like servetune's.
func TestReapOnlyDeadRunsOfStudy(t *testing.T) {
	testengine.Slurm(t)
	study := testStudy(t)
	other := study + "-other"
	cancelAll(t, study)
	cancelAll(t, other)
	host, _ := os.Hostname()
	dead := fmt.Sprintf("%s/%d/1/deadbeef", host, deadPID(t))
	live := proc.NewRun().String()
	submit := func(name, comment string) string {
		t.Helper()
		out, err := exec.Command("sbatch", "--parsable", "-p", testengine.SlurmPartition, "-o", "/dev/null", "-t", "5",
			"--job-name="+name, "--comment="+comment, "--wrap=sleep 300").Output()
		if err != nil {
			t.Fatalf("sbatch: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	orphan := submit("servetune-x-t1", jobComment(launcher.Spec{Study: study, Trial: 1, Owner: dead}))
	kept := map[string]string{
		submit("servetune-x-t2", jobComment(launcher.Spec{Study: study, Trial: 2, Owner: live})): "a live run's",
		submit("servetune-x-t3", jobComment(launcher.Spec{Study: other, Trial: 3, Owner: dead})): "another study's",
		submit("servetune-"+study+"-t4", "servetune study="+study+" trial=4"):                    "a look-alike",
		submit("servetune-"+study+"-t5", ""):                                                     "a job without comment",
	}
	s := &Slurm{}
	reaped, err := s.Reap(context.Background(), study, tuner.KeepLive(proc.NewRun()))
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].ID != orphan || reaped[0].Trial != 1 || reaped[0].Owner != dead || reaped[0].Kind != "slurm" {
		t.Errorf("reaped %+v, want only job %s", reaped, orphan)
	}
	all, err := commands{}.squeue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := find(all, orphan); !ended(j.State) {
		t.Errorf("orphan %s is %s", orphan, j.State)
	}
	for id, what := range kept {
		if j, _ := find(all, id); !j.Active() {
			t.Errorf("%s job %s is %s", what, id, j.State)
		}
		_ = exec.Command("scancel", id).Run()
	}
}

// deadPID is a process id no process has.
func deadPID(t *testing.T) int {
	for pid := 4_000_000; pid > 3_000_000; pid -= 7919 {
		if err := syscallKill(pid); errors.Is(err, errNoProcess) {
			return pid
		}
	}
	t.Fatal("no free pid found")
	return 0
}

// TestNodeFailIsScheduler: the node of a serving job goes down (as an
// administrator, or a failing node, takes it down): the job ends NODE_FAIL,
// is not requeued, and is classified as the scheduler's doing.
func TestNodeFailIsScheduler(t *testing.T) {
	s := simSlurm(t)
	if os.Getuid() != 0 {
		t.Skip("taking a node down needs Slurm's administrator (root here)")
	}
	study := testStudy(t)
	cancelAll(t, study)
	ctx := context.Background()
	in, err := s.Launch(ctx, spec(study, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(ctx)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := in.Ready(rctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	var node string
	for _, j := range jobsOf(t, study) {
		node = j.Node
	}
	t.Cleanup(func() { // the node back up for what comes next
		_ = exec.Command("scontrol", "update", "NodeName="+node, "State=RESUME").Run()
		// The node is back once the scheduler runs a job on it: srun
		// waits for its allocation, which the controller sends when the
		// node takes jobs again.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "srun", "-p", testengine.SlurmPartition, "-w", node, "-t", "1", "-J", "servetune-node-back", "true").CombinedOutput(); err != nil {
			t.Errorf("node %s runs no job again: %v %s", node, err, out)
		}
	})
	if out, err := exec.Command("scontrol", "update", "NodeName="+node, "State=DOWN", "Reason=servetune-test").CombinedOutput(); err != nil {
		t.Fatalf("scontrol: %v %s", err, out)
	}
	ex := in.(launcher.Exiter)
	select {
	case <-ex.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("the instance did not see its node fail")
	}
	class, msg := engine.Classify(ex.Exit(), true, in.Logs())
	if class != engine.FailScheduler || !strings.Contains(msg, "NODE_FAIL") {
		t.Errorf("classified %s %q", class, msg)
	}
	t.Logf("%s: %s", class, msg)
}

// disaggregated runs a disaggregated trial's engines through s, the
// simulated engine's router in front of them.
func disaggregated(t *testing.T, s *Slurm) *launcher.Disaggregated {
	bin := testengine.Binary(t)
	return &launcher.Disaggregated{Base: s, KV: engine.KVTransfer{Config: `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`},
		Router: launcher.Router{Command: []string{bin, "sim", "router", "--host", "{host}", "--port", "{port}",
			"--prefiller-hosts", "{prefill_hosts}", "--prefiller-ports", "{prefill_ports}",
			"--decoder-hosts", "{decode_hosts}", "--decoder-ports", "{decode_ports}"}}}
}

// disaggSpec is a trial of one prefill and one decode engine.
func disaggSpec(study string, trial int, gpus ...int) launcher.Spec {
	trialSpec := spec(study, trial, gpus...)
	trialSpec.Settings = engine.Settings{"disaggregated": true, "prefill_replicas": 1, "decode_replicas": 1,
		"prefill_tensor_parallel": 1, "decode_tensor_parallel": 1}
	return trialSpec
}

// TestDisaggregatedJobs: a disaggregated trial on Slurm is one job per
// part, each named after its part and holding its own GPU, serving from its
// node; the router runs here in front of them, the trial reports the
// parts' queue, and Stop leaves neither a job nor a router.
func TestDisaggregatedJobs(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	d := disaggregated(t, s)
	trialSpec := disaggSpec(study, 2, 0, 1)
	ctx := context.Background()
	in, err := d.Launch(ctx, trialSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(ctx)
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := in.Ready(rctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, in.Logs())
	}
	jobs := jobsOf(t, study)
	names := map[string]string{}
	for _, j := range jobs {
		if j.State != "RUNNING" || !strings.HasPrefix(j.GRES, "gpu:1(") {
			t.Errorf("job %s %s %s, want RUNNING with gpu:1", j.ID, j.State, j.GRES)
		}
		names[j.Name] = j.GRES
	}
	prefill, decode := jobName(trialSpec)+"-prefill0", jobName(trialSpec)+"-decode0"
	if len(jobs) != 2 || names[prefill] == "" || names[decode] == "" || names[prefill] == names[decode] {
		t.Fatalf("jobs %+v, want %s and %s on GPUs of their own", jobs, prefill, decode)
	}
	q, ok := in.(interface {
		Queue() (time.Duration, time.Time, string)
	})
	if !ok {
		t.Fatal("a trial of Slurm jobs does not report its queue")
	}
	pending, started, why := q.Queue()
	if started.IsZero() || pending <= 0 || pending > time.Minute || why != "" {
		t.Errorf("queue: pending %v, started %v, %q", pending, started, why)
	}
	// Through the router: a completion the prefill and decode jobs served.
	resp, err := http.Post(in.Endpoint()+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hello","max_tokens":4}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a completion through the router: %v %v", resp, err)
	}
	resp.Body.Close()
	logs := in.Logs()
	for _, want := range []string{"== prefill 0 ==", "== decode 0 ==", "== router ==", "[slurm job "} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	t.Logf("jobs %v; pending %v", names, pending.Round(time.Millisecond))
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := active(t, study); len(left) > 0 {
		t.Errorf("jobs left after Stop: %v", left)
	}
	if r, err := d.Capabilities().Reap(ctx, study, func(launcher.Reaped) bool { return false }); err != nil || len(r) != 0 {
		t.Errorf("after Stop the reaper found %+v (%v)", r, err)
	}
	if ents, _ := os.ReadDir(s.WorkDir); len(ents) != 0 {
		t.Errorf("files left in the work dir: %v", ents)
	}
}

// TestDisaggregatedPartQueued: with 3 of the node's 4 GPUs held, a
// disaggregated trial's prefill job starts and its decode job waits; the
// trial has not started, its reason names the waiting part with Slurm's,
// and Stop cancels both.
func TestDisaggregatedPartQueued(t *testing.T) {
	s := simSlurm(t)
	study := testStudy(t)
	cancelAll(t, study)
	ctx := context.Background()
	hold, err := s.Launch(ctx, spec(study, 0, 0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Stop(ctx)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := hold.Ready(rctx); err != nil {
		t.Fatalf("the 3-GPU job: %v\n%s", err, hold.Logs())
	}
	in, err := disaggregated(t, s).Launch(ctx, disaggSpec(study, 1, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 8*time.Second)
	err = in.Ready(wctx)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready with a part that cannot start: %v", err)
	}
	pending, started, why := in.(interface {
		Queue() (time.Duration, time.Time, string)
	}).Queue()
	if !started.IsZero() || pending < 8*time.Second || !strings.HasPrefix(why, "decode 0: slurm job ") ||
		!strings.Contains(why, "pending") || strings.Contains(why, "prefill") {
		t.Errorf("queue: pending %v, started %v, %q", pending, started, why)
	}
	t.Logf("pending %v: %s", pending.Round(time.Millisecond), why)
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hold.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left := active(t, study); len(left) > 0 {
		t.Errorf("jobs left after Stop: %v", left)
	}
}

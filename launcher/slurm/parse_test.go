package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// squeue2205 is what Slurm 22.05's `squeue --json` (openapi v0.0.38)
// printed here for a running, a cancelled and a failed job, cut to the
// fields read and a few others.
const squeue2205 = `{"meta": {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}, "errors": [], "jobs": [
 {"account": "", "job_id": 3, "name": "servetune-x-t1", "comment": "servetune:owner=vm%2F1%2F2%2Fab&study=x&trial=1",
  "job_state": "RUNNING", "state_reason": "None", "exit_code": 0, "batch_host": "vm", "nodes": "vm",
  "gres_detail": ["gpu:2(IDX:0-1)"], "standard_output": "/tmp/j.out", "submit_time": 1796284498, "start_time": 1796284499,
  "time_limit": null, "user_name": "root", "user_id": 0},
 {"job_id": 6, "name": "wrap", "comment": "", "job_state": "CANCELLED", "state_reason": "None", "exit_code": 15,
  "batch_host": "vm", "gres_detail": [], "submit_time": 1796284599, "start_time": 1796284599, "user_name": "root", "user_id": 0},
 {"job_id": 4, "name": "wrap", "comment": "", "job_state": "FAILED", "state_reason": "NonZeroExitCode", "exit_code": 768,
  "user_name": "alice", "user_id": 1000}]}`

// squeue2311 is the same running job in the shape of Slurm 23.11
// (data_parser v0.0.40): numbers as objects, the state a list of flags,
// the exit code an object.
const squeue2311 = `{"jobs": [
 {"job_id": 3, "name": "servetune-x-t1", "comment": "servetune:study=x&trial=1", "job_state": ["RUNNING", "COMPLETING"],
  "state_reason": "None", "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "infinite": false, "number": 0},
  "signal": {"id": {"set": true, "infinite": false, "number": 9}, "name": "KILL"}},
  "batch_host": "vm", "submit_time": {"set": true, "infinite": false, "number": 1796284498},
  "start_time": {"set": true, "infinite": false, "number": 1796284499}, "user_name": "root", "user_id": 0}],
 "errors": [], "warnings": []}`

func TestParseSqueue(t *testing.T) {
	jobs, err := parseSqueue([]byte(squeue2205))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d jobs", len(jobs))
	}
	j := jobs[0]
	if j.ID != "3" || j.Name != "servetune-x-t1" || j.State != "RUNNING" || j.Node != "vm" || j.GRES != "gpu:2(IDX:0-1)" ||
		j.Output != "/tmp/j.out" || j.User != "root" || !j.Started.Equal(time.Unix(1796284499, 0)) || !j.Active() {
		t.Errorf("running job %+v", j)
	}
	if l, ok := launcher.Parse(j.Comment); !ok || l.Study != "x" || l.Trial != 1 || l.Owner != "vm/1/2/ab" {
		t.Errorf("comment %q read as %+v, %v", j.Comment, l, ok)
	}
	if c := jobs[1]; c.State != "CANCELLED" || c.ExitCode != 128+15 || c.Active() {
		t.Errorf("cancelled job %+v", c)
	}
	if f := jobs[2]; f.ExitCode != 3 || f.Reason != "NonZeroExitCode" || f.UserID != 1000 {
		t.Errorf("failed job %+v", f)
	}

	jobs, err = parseSqueue([]byte(squeue2311))
	if err != nil {
		t.Fatal(err)
	}
	if j := jobs[0]; j.State != "COMPLETING" || j.ExitCode != 128+9 || !j.Submitted.Equal(time.Unix(1796284498, 0)) || j.Active() {
		t.Errorf("23.11 job %+v", j)
	}
	if _, err := parseSqueue([]byte(`{"jobs": [], "errors": [{"error": "Unable to contact slurm controller", "description": "connect failure"}]}`)); err == nil ||
		!strings.Contains(err.Error(), "connect failure") {
		t.Errorf("errors in the document: %v", err)
	}
}

// TestComment: any study name reads back exactly, and only servetune's
// comments are read as servetune's.
func TestComment(t *testing.T) {
	for _, study := range []string{"llama", "a b&c=d%e", "ünï/codé", ""} {
		spec := launcher.Spec{Study: study, Trial: 7, Owner: "gpu-a/123/456/beef"}
		l, ok := launcher.Parse(jobComment(spec))
		if !ok || l.Study != study || l.Trial != 7 || l.Owner != spec.Owner {
			t.Errorf("study %q: read back %+v, %v", study, l, ok)
		}
		if n := jobName(spec); !strings.HasPrefix(n, "servetune-") || strings.ContainsAny(n, " /&%") {
			t.Errorf("study %q: job name %q", study, n)
		}
	}
	// The parts of a disaggregated trial: each job's name says which.
	for part, want := range map[string]string{"prefill 0": "servetune-s-t2-prefill0", "decode 11": "servetune-s-t2-decode11", "": "servetune-s-t2", " /": "servetune-s-t2"} {
		if n := jobName(launcher.Spec{Study: "s", Trial: 2, Part: part}); n != want {
			t.Errorf("part %q: job name %q, want %q", part, n, want)
		}
	}
	for _, c := range []string{"", "servetune", "servetune:trial=1", "servetune:study=x&trial=one", "my job: servetune:study=x&trial=1", "servetune-x-t1"} {
		if l, ok := launcher.Parse(c); ok {
			t.Errorf("comment %q read as ours: %+v", c, l)
		}
	}
}

// TestExitOf: how each final state of a job is classified.
func TestExitOf(t *testing.T) {
	for _, tt := range []struct {
		state, reason string
		code          int
		want          engine.Failure
		msg           string
	}{
		{"COMPLETED", "None", 0, engine.FailCrash, "exit code 0"},
		{"FAILED", "NonZeroExitCode", 1, engine.FailCrash, "exit code 1"},
		{"OUT_OF_MEMORY", "OutOfMemory", 137, engine.FailOOM, "out-of-memory"},
		{"CANCELLED", "None", 143, engine.FailScheduler, "slurm job 9 CANCELLED during"},
		{"TIMEOUT", "TimeLimit", 143, engine.FailScheduler, "slurm job 9 TIMEOUT (TimeLimit)"},
		{"NODE_FAIL", "NodeDown", 0, engine.FailScheduler, "NODE_FAIL (NodeDown)"},
		{"PREEMPTED", "None", 143, engine.FailScheduler, "PREEMPTED"},
	} {
		got, msg := engine.Classify(exitOf(Job{ID: "9", State: tt.state, Reason: tt.reason, ExitCode: tt.code}), true, "engine log\n")
		if got != tt.want || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: %s %q, want %s with %q", tt.state, got, msg, tt.want, tt.msg)
		}
	}
	if !isHopeless("PartitionTimeLimit") || !isHopeless("QOSMaxGRESPerJob") || isHopeless("Resources") || isHopeless("Priority") {
		t.Error("hopeless reasons")
	}
}

func TestScriptWords(t *testing.T) {
	if got := slurmTime(90*time.Minute + 500*time.Millisecond); got != "0-01:30:01" {
		t.Errorf("slurmTime = %s", got)
	}
	for in, want := range map[string]string{
		"{port}":            `"$port"`,
		"--port={port}":     `--port=` + `"$port"`,
		"{host}":            `'0.0.0.0'`,
		"it's":              `'it'\''s'`,
		"{model}x{port}{y}": `'{model}x'"$port"'{y}'`,
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
	s := &Slurm{Container: []string{"apptainer", "exec", "--nv", "/img/vllm.sif", "{command}"}}
	argv, err := s.engineArgv(launcher.Spec{Engine: engine.SGLang, Model: "Qwen/Qwen2.5-7B-Instruct", Settings: engine.Settings{"tensor_parallel": 2}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	want := "apptainer exec --nv /img/vllm.sif python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --tp-size 2 --host {host} --port {port}"
	if got != want {
		t.Errorf("argv\n%s\nwant\n%s", got, want)
	}
	args := strings.Join((&Slurm{Partition: "gpu", Account: "ml", QOS: "high", TimeLimit: time.Hour, GRES: "gpu:h100:{n}", SbatchArgs: []string{"--constraint=nvlink"}}).sbatchArgs(launcher.Spec{}, 4), " ")
	if want := "--no-requeue --export=ALL --nodes=1 --partition=gpu --account=ml --qos=high --time=0-01:00:00 --gres=gpu:h100:4 --constraint=nvlink"; args != want {
		t.Errorf("sbatch args\n%s\nwant\n%s", args, want)
	}
}

// TestNodeHint: sbatch's "Requested node configuration is not available"
// gets the nodes' side from sinfo: a node down (down* = not responding) or
// drained, named with the command that resumes it; else what the nodes
// have.
func TestNodeHint(t *testing.T) {
	for _, tc := range []struct{ sinfo, partition, want string }{
		{"vm|down*|gpu:4\n", "gpu", "partition gpu: vm is down* (sinfo; a trailing * is a node not responding): once it is healthy, `scontrol update nodename=vm state=resume`"},
		{"a|idle|gpu:4\nb|drained|gpu:8\n", "", "the default partition: b is drained (sinfo; a trailing * is a node not responding): once it is healthy, `scontrol update nodename=b state=resume`"},
		{"vm|idle|gpu:4\n", "gpu", "partition gpu has vm idle gpu:4 (sinfo -N -o '%N %T %G'): ask for no more GPUs than one node has"},
		{"n1|down|gpu:1\nn2|down|gpu:1\nn3|down|gpu:1\nn4|down|gpu:1\nn5|fail|gpu:1\n", "p", "p: n1 is down, n2 is down, n3 is down, n4 is down, and 1 more (sinfo"},
		{"", "gpu", "partition gpu lists no node (sinfo -N)"},
	} {
		if got, down := nodeHint(tc.sinfo, tc.partition); !strings.Contains(got, tc.want) || down != strings.Contains(tc.want, "resume") && !strings.Contains(tc.want, "more (") {
			t.Errorf("nodeHint(%q):\n got %s\nwant %s", tc.sinfo, got, tc.want)
		}
	}
}

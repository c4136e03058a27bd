package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Job is one job as `squeue --json` reports it: the fields servetune reads.
type Job struct {
	ID        string
	Name      string
	Comment   string
	User      string
	UserID    int
	State     string // PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, TIMEOUT, ...
	Reason    string // why it waits or ended (Resources, Priority, BeginTime, NonZeroExitCode, ...)
	ExitCode  int    // the shell's convention: 128+N for a job killed by signal N
	Node      string // the batch host, once it runs
	GRES      string // the GRES it got, e.g. gpu:2(IDX:0-1)
	Output    string // the job's standard output file
	Submitted time.Time
	Started   time.Time // Slurm's own start time (an estimate while pending)
}

// Active reports whether the job still holds or waits for resources: not
// ended, not ending.
func (j Job) Active() bool { return !ended(j.State) && j.State != "COMPLETING" }

// ended reports whether a state is final: the job is over and its
// resources are free.
func ended(state string) bool {
	switch state {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY":
		return true
	}
	return false
}

// squeueDoc is the part of `squeue --json` servetune reads. The shape
// changed across Slurm releases: 22.05 (openapi v0.0.38) writes numbers and
// a state string; 23.02 and later (data_parser v0.0.39+) write numbers as
// {"set", "infinite", "number"}, the state as a list of flags and the exit
// code as {"status", "return_code", "signal"}. Both are read.
type squeueDoc struct {
	Jobs []struct {
		JobID      flexInt   `json:"job_id"`
		Name       string    `json:"name"`
		Comment    string    `json:"comment"`
		UserName   string    `json:"user_name"`
		UserID     flexInt   `json:"user_id"`
		JobState   flexState `json:"job_state"`
		Reason     string    `json:"state_reason"`
		ExitCode   flexExit  `json:"exit_code"`
		BatchHost  string    `json:"batch_host"`
		GRESDetail []string  `json:"gres_detail"`
		StdOut     string    `json:"standard_output"`
		SubmitTime flexInt   `json:"submit_time"`
		StartTime  flexInt   `json:"start_time"`
	} `json:"jobs"`
	Errors []struct {
		Error       string `json:"error"`
		Description string `json:"description"`
	} `json:"errors"`
}

// flexInt is a number, or {"set": bool, "infinite": bool, "number": n}.
type flexInt struct {
	N   int64
	Set bool
}

// The kinds of value slurmValue reads.
const (
	slurmNull = iota
	slurmNumber
	slurmObject
)

// slurmValue reads b, which Slurm's JSON writes as null, a number or an
// object (its newer form of the same field), into num or obj, and says
// which it was.
func slurmValue(b []byte, num, obj any) (int, error) {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return slurmNull, nil
	case len(b) > 0 && b[0] == '{':
		return slurmObject, json.Unmarshal(b, obj)
	}
	return slurmNumber, json.Unmarshal(b, num)
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	var o struct {
		Set      bool  `json:"set"`
		Infinite bool  `json:"infinite"`
		Number   int64 `json:"number"`
	}
	var n json.Number
	kind, err := slurmValue(b, &n, &o)
	if err != nil || kind == slurmNull {
		return err
	}
	if kind == slurmObject {
		f.N, f.Set = o.Number, o.Set && !o.Infinite
		return nil
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return err
	}
	f.N, f.Set = int64(v), true
	return nil
}

// flexState is a state string, or a list whose first entry is the base
// state and the rest flags (COMPLETING among them).
type flexState string

func (s *flexState) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = flexState(one)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	// A job being killed reads RUNNING/CANCELLED plus COMPLETING in the
	// list form, and COMPLETING alone in the string form: keep one meaning.
	for _, f := range list {
		if f == "COMPLETING" {
			*s = "COMPLETING"
			return nil
		}
	}
	if len(list) > 0 {
		*s = flexState(list[0])
	}
	return nil
}

// flexExit is a wait status as a number (v0.0.38: 768 is exit 3, 9 is
// SIGKILL), or {"status": [...], "return_code": n, "signal": {"id": n}}.
type flexExit struct{ Code int }

func (e *flexExit) UnmarshalJSON(b []byte) error {
	var o struct {
		ReturnCode flexInt `json:"return_code"`
		Signal     struct {
			ID flexInt `json:"id"`
		} `json:"signal"`
	}
	var status int
	kind, err := slurmValue(b, &status, &o)
	switch {
	case err != nil || kind == slurmNull:
		return err
	case kind == slurmObject:
		e.Code = int(o.ReturnCode.N)
		if o.Signal.ID.Set && o.Signal.ID.N > 0 {
			e.Code = 128 + int(o.Signal.ID.N)
		}
	default:
		e.Code = waitStatus(status)
	}
	return nil
}

// waitStatus converts a raw wait status to the shell's exit code.
func waitStatus(st int) int {
	if sig := st & 0x7f; sig != 0 {
		return 128 + sig
	}
	return (st >> 8) & 0xff
}

// parseSqueue reads `squeue --json` output.
func parseSqueue(out []byte) ([]Job, error) {
	var doc squeueDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	if len(doc.Errors) > 0 {
		e := doc.Errors[0]
		return nil, fmt.Errorf("squeue --json: %s", strings.TrimSpace(e.Description+" "+e.Error))
	}
	jobs := make([]Job, 0, len(doc.Jobs))
	for _, j := range doc.Jobs {
		job := Job{
			ID: strconv.FormatInt(j.JobID.N, 10), Name: j.Name, Comment: j.Comment, User: j.UserName,
			UserID: int(j.UserID.N), State: string(j.JobState), Reason: j.Reason, ExitCode: j.ExitCode.Code,
			Node: j.BatchHost, GRES: strings.Join(j.GRESDetail, ","), Output: j.StdOut,
		}
		if j.SubmitTime.Set && j.SubmitTime.N > 0 {
			job.Submitted = time.Unix(j.SubmitTime.N, 0)
		}
		if j.StartTime.Set && j.StartTime.N > 0 {
			job.Started = time.Unix(j.StartTime.N, 0)
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

// ErrNoSlurm is wrapped by errors of a machine without Slurm's commands.
var ErrNoSlurm = errors.New("no Slurm commands here")

// commands runs Slurm's command-line tools.
type commands struct {
	env []string // the environment of sbatch; nil = this process's
}

// run runs a Slurm command and returns its stdout; the error carries its
// stderr, which is where Slurm says what is wrong.
func (c commands) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, fmt.Errorf("%w: %s not found (is this a Slurm submit host?)", ErrNoSlurm, name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.Join(strings.Fields(stderr.String()), " ")
		if msg == "" {
			msg = err.Error()
		}
		if strings.HasPrefix(msg, name+": ") { // Slurm's tools name themselves
			return stdout.Bytes(), errors.New(msg)
		}
		return stdout.Bytes(), fmt.Errorf("%s: %s", name, msg)
	}
	return stdout.Bytes(), nil
}

// squeue lists jobs. Slurm 22.05 ignores squeue's filters with --json and
// lists every job it remembers (ended ones for MinJobAge): callers filter.
// ids, when given, are passed on for the releases that honour them.
func (c commands) squeue(ctx context.Context, ids ...string) ([]Job, error) {
	args := []string{"--json"}
	if len(ids) > 0 {
		args = append(args, "--states=all", "--jobs="+strings.Join(ids, ","))
	}
	out, err := c.run(ctx, nil, "squeue", args...)
	if err != nil {
		// 23.02 and later refuse an id they no longer know; 22.05 never
		// gets here for that.
		if len(ids) > 0 && strings.Contains(err.Error(), "Invalid job id") {
			return nil, nil
		}
		return nil, err
	}
	return parseSqueue(out)
}

// find returns the job with id from a listing.
func find(jobs []Job, id string) (Job, bool) {
	for _, j := range jobs {
		if j.ID == id {
			return j, true
		}
	}
	return Job{}, false
}

// scancel cancels jobs; one that has already ended is not an error.
func (c commands) scancel(ctx context.Context, ids ...string) error {
	_, err := c.run(ctx, nil, "scancel", ids...)
	if err != nil && (strings.Contains(err.Error(), "already completing or completed") || strings.Contains(err.Error(), "Invalid job id")) {
		return nil
	}
	return err
}

// sbatch submits a job and returns its id (--parsable prints
// "id[;cluster]").
func (c commands) sbatch(ctx context.Context, args ...string) (string, error) {
	out, err := c.run(ctx, nil, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, perr := strconv.ParseUint(id, 10, 64); perr != nil {
		return "", fmt.Errorf("sbatch --parsable printed %q, not a job id", strings.TrimSpace(string(out)))
	}
	return id, nil
}

// errNodeConfig is sbatch's refusal of a job no node can run now: it asks
// for more than any node has, or the nodes that have it are down or
// drained (Slurm says the same for both).
const errNodeConfig = "Requested node configuration is not available"

// sinfoNodes lists partition's nodes (every partition's when "") as
// "NAME|STATE|GRES" lines.
func (c commands) sinfoNodes(ctx context.Context, partition string) (string, error) {
	args := []string{"-h", "-N", "-o", "%N|%T|%G"}
	if partition != "" {
		args = append(args, "-p", partition)
	}
	out, err := c.run(ctx, nil, "sinfo", args...)
	return string(out), err
}

// nodeHint says why a job may find no node, from sinfoNodes' lines: the
// nodes that take no jobs (down, down* = not responding, drained,
// failing) with the command that returns one to service, or else what the
// nodes have, so the request can be made to fit. down reports the first case.
func nodeHint(sinfo, partition string) (hint string, down bool) {
	where := "partition " + partition
	if partition == "" {
		where = "the default partition"
	}
	var out, have []string
	for _, line := range strings.Split(strings.TrimSpace(sinfo), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 || f[0] == "" {
			continue
		}
		name, state, gres := f[0], f[1], f[2]
		base := strings.TrimRight(state, "*~#!%$@^-+")
		switch {
		case strings.HasSuffix(state, "*") || base == "down" || strings.HasPrefix(base, "drain") || strings.HasPrefix(base, "fail") || base == "inval" || base == "invalid":
			out = append(out, fmt.Sprintf("%s is %s", name, state))
		default:
			have = append(have, fmt.Sprintf("%s %s %s", name, state, gres))
		}
	}
	switch {
	case len(out) > 0:
		first, _, _ := strings.Cut(out[0], " ")
		return fmt.Sprintf("%s: %s (sinfo; a trailing * is a node not responding): once it is healthy, `scontrol update nodename=%s state=resume`",
			where, strings.Join(capList(out, 4), ", "), first), true
	case len(have) > 0:
		return fmt.Sprintf("%s has %s (sinfo -N -o '%%N %%T %%G'): ask for no more GPUs than one node has", where, strings.Join(capList(have, 4), ", ")), false
	}
	return fmt.Sprintf("%s lists no node (sinfo -N)", where), false
}

// capList keeps the first n items and counts the rest.
func capList(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("and %d more", len(items)-n))
}

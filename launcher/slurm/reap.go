package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/servetune/servetune/launcher"
)

// jobComment is the comment a trial's job carries: its label
// (launcher.Label.String), which any study name reads back from exactly.
func jobComment(spec launcher.Spec) string { return launcher.LabelOf(spec).String() }

// jobName is readable in squeue (launcher.ReadableName): servetune-STUDY-tN,
// and the part of a trial of several engines, servetune-STUDY-tN-prefill0
// (the comment, not the name, identifies the job).
func jobName(spec launcher.Spec) string { return launcher.ReadableName(spec) }

// mine reports whether a job belongs to the user running servetune: the
// reaper never touches another user's jobs, even as root.
func mine(j Job) bool {
	if u, err := user.Current(); err == nil && j.User != "" {
		return j.User == u.Username
	}
	return j.UserID == os.Getuid()
}

// reap cancels this user's active jobs of study (every servetune study for
// "") that keep does not spare, waits until they have ended, and removes
// their files. Jobs without servetune's comment are never touched.
func reap(ctx context.Context, c commands, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	jobs, err := c.squeue(ctx)
	if err != nil {
		return nil, err
	}
	var (
		out  []launcher.Reaped
		ids  []string
		errs []error
	)
	for _, j := range jobs {
		l, ok := launcher.Parse(j.Comment) // an older servetune's comment too
		if !ok || !j.Active() || !mine(j) || study != "" && l.Study != study {
			continue
		}
		r := launcher.Reaped{Kind: "slurm", ID: j.ID, Name: j.Name, Host: j.Node, Study: l.Study, Trial: l.Trial, Owner: l.Owner, State: j.State}
		if keep != nil && keep(r) {
			continue
		}
		if err := c.scancel(ctx, j.ID); err != nil {
			errs = append(errs, fmt.Errorf("slurm: cancel job %s: %w", j.ID, err))
			continue
		}
		out = append(out, r)
		ids = append(ids, j.ID)
		removeFiles(j.Output)
	}
	if len(ids) > 0 {
		if err := waitEnded(ctx, c, ids, reapWait); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// reapWait bounds the wait for cancelled jobs to end: Slurm's KillWait
// (30 s by default) plus its epilog.
const reapWait = 2 * time.Minute

// waitEnded waits until none of the jobs is active or completing, so their
// GPUs are free for what comes next.
func waitEnded(ctx context.Context, c commands, ids []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		jobs, err := c.squeue(ctx, ids...)
		if err != nil {
			return err
		}
		left := 0
		for _, id := range ids {
			if j, ok := find(jobs, id); ok && !ended(j.State) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm: %d cancelled job(s) still ending after %s", left, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// removeFiles removes a job's script, address and log file, named after
// its log (the job's standard output): NAME.log, NAME.sh, NAME.addr.
func removeFiles(log string) {
	base, ok := strings.CutSuffix(log, ".log")
	if !ok || !strings.Contains(base, "servetune-") {
		return // not a file of ours
	}
	for _, f := range []string{base + ".sh", base + ".addr", base + ".addr.tmp", log} {
		_ = os.Remove(f)
	}
}

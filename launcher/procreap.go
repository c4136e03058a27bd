package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// labelEnv is spec's label as the environment variable a local engine
// carries (EnvLabel).
func labelEnv(spec Spec) []string { return []string{EnvLabel + "=" + LabelOf(spec).String()} }

// localEngine is one process found with a study label.
type localEngine struct {
	pid, pgid int
	study     string
	trial     int
	owner     string
	name      string
}

// findLocalEngines lists this user's processes labelled with study (any
// study when ""), from /proc. Processes it cannot read are skipped.
func findLocalEngines(study string) ([]localEngine, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var out []localEngine
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		vars := map[string]string{}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok && strings.HasPrefix(k, "SERVETUNE_") {
				vars[k] = v
			}
		}
		l, ok := ParseLabels(vars) // an older servetune's variables
		if v, set := vars[EnvLabel]; set {
			l, ok = Parse(v)
		}
		if !ok || study != "" && l.Study != study {
			continue
		}
		e := localEngine{pid: pid, study: l.Study, trial: l.Trial, owner: l.Owner}
		st, ok := readProcStat(d.Name())
		if !ok {
			continue
		}
		e.pgid, e.name = st.pgid, st.name
		out = append(out, e)
	}
	return out, nil
}

// ReapLocal stops the process groups of study's labelled engines that keep
// does not spare: SIGTERM, then SIGKILL after grace.
func ReapLocal(ctx context.Context, kind, study string, keep func(Reaped) bool, grace time.Duration) ([]Reaped, error) {
	found, err := findLocalEngines(study)
	if err != nil {
		return nil, err
	}
	groups := map[int]Reaped{}
	own := syscall.Getpgrp()
	for _, e := range found {
		if e.pgid == own {
			continue // never this process's own group
		}
		r := Reaped{Kind: kind, ID: strconv.Itoa(e.pgid), Name: e.name, Study: e.study, Trial: e.trial, Owner: e.owner, State: "running"}
		if keep != nil && keep(r) {
			continue
		}
		if _, ok := groups[e.pgid]; !ok && e.pgid > 1 {
			groups[e.pgid] = r
		}
	}
	var errs []error
	for pgid := range groups {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stop process group %d: %w", pgid, err))
		}
	}
	deadline := time.Now().Add(grace)
	for pgid := range groups {
		for groupAlive(pgid) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill process group %d: %w", pgid, err))
		}
	}
	out := make([]Reaped, 0, len(groups))
	for _, r := range groups {
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// groupAlive reports whether a process of group pgid still runs. Zombies
// do not count: an orphan's zombie waits for its reaper (in a container,
// PID 1 may never reap it), yet holds no GPU, port or memory.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		st, ok := readProcStat(d.Name())
		if ok && st.pgid == pgid && st.state != "Z" && st.state != "X" {
			return true
		}
	}
	return false
}

// procStat is what the reapers read of /proc/PID/stat.
type procStat struct {
	name, state string
	pgid        int
}

// readProcStat reads /proc/PID/stat; ok is false for a process gone or
// unreadable.
func readProcStat(pid string) (procStat, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces, so cut after
	// its closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	j := bytes.IndexByte(stat, '(')
	if i < 0 || j < 0 || j > i {
		return procStat{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return procStat{}, false
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, false
	}
	return procStat{name: string(stat[j+1 : i]), state: f[0], pgid: pgid}, true
}

// Reap stops the local engine processes that runs of study left (a wrapper
// script's engine survives its parent's death). keep spares live runs'.
func (p *Process) Reap(ctx context.Context, study string, keep func(Reaped) bool) ([]Reaped, error) {
	return ReapLocal(ctx, "process", study, keep, OrDefaultDuration(p.StopTimeout, DefaultStopTimeout))
}

// OrDefaultDuration is d, or def when d is not positive.
func OrDefaultDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// CleanupLocal is the Cleanup of the kinds that run engines as local
// processes (this package's process kind, launcher/simulated's sim kind):
// `servetune cleanup`.
func CleanupLocal(kind string) func(ctx context.Context, _, study string, keep func(Reaped) bool) ([]Reaped, error) {
	return func(ctx context.Context, _, study string, keep func(Reaped) bool) ([]Reaped, error) {
		return ReapLocal(ctx, kind, study, keep, DefaultStopTimeout)
	}
}

package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// job is one trial's engine as a Slurm job. A goroutine the job owns
// (watch) follows it from submission to its end: its start (the log or
// address file appears, or squeue says RUNNING), its address, and how it
// ended; Stop cancels the job, waits for its end and removes its files.
type job struct {
	id        string
	files     files
	c         commands
	partition string // the job's partition, "" = the default (for nodeHint)
	hint      string // nodeHint when Ready gave up on a pending job (under mu)
	submitted time.Time
	poll      time.Duration
	queuePoll time.Duration
	stopLimit time.Duration
	logBytes  int

	exited    chan struct{} // closed when the job is ending or ended: the engine is gone
	final     chan struct{} // closed when its final state is known (exit is set)
	quit      chan struct{} // closed by Stop: the watch ends
	watchDone chan struct{}

	mu       sync.Mutex
	started  time.Time // first seen running; zero while pending
	endpoint string    // http://NODE:PORT once the address file is there
	state    string
	reason   string
	node     string
	exit     engine.Exit
	kept     string // the log tail, kept at Stop when the file goes

	stopOnce sync.Once
	stopErr  error
}

var _ launcher.Exiter = (*job)(nil)

func newJob(s *Slurm, id string, f files) *job {
	j := &job{
		id: id, files: f, partition: s.Partition, submitted: time.Now(),
		poll:      s.Poll,
		queuePoll: s.QueuePoll,
		stopLimit: s.StopTimeout,
		logBytes:  s.LogBytes,
		exited:    make(chan struct{}), final: make(chan struct{}), quit: make(chan struct{}), watchDone: make(chan struct{}),
		state: "PENDING",
	}
	if j.poll <= 0 {
		j.poll = launcher.DefaultPollInterval
	}
	if j.queuePoll <= 0 {
		j.queuePoll = DefaultQueuePoll
	}
	if j.stopLimit <= 0 {
		j.stopLimit = DefaultStopTimeout
	}
	if j.logBytes <= 0 {
		j.logBytes = launcher.DefaultLogBytes
	}
	go j.watch()
	return j
}

// ID is the Slurm job id.
func (j *job) ID() string { return j.id }

// Endpoint is http://NODE:PORT once the job has written its address; ""
// before (Ready returns only once it is known).
func (j *job) Endpoint() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.endpoint
}

// Queue says how long the job waited before it started (so far, while it
// still waits), when it started, and the scheduler's reason for the wait.
func (j *job) Queue() (time.Duration, time.Time, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.started.IsZero() {
		why := fmt.Sprintf("slurm job %s %s (%s)", j.id, strings.ToLower(j.state), j.reason)
		if j.hint != "" {
			why += "; " + j.hint
		}
		return time.Since(j.submitted), time.Time{}, why
	}
	return j.started.Sub(j.submitted), j.started, ""
}

func (j *job) Exited() <-chan struct{} { return j.exited }

// exitWait bounds how long Exit waits for a job that is ending (Slurm's
// COMPLETING: its processes being killed) to reach its final state.
const exitWait = 2 * time.Minute

// Exit says how the job ended, once Exited is closed: a scheduler's end
// (cancelled, time limit, node failure, preemption) in Scheduler, Slurm's
// out-of-memory kill as OOMKilled, else the engine's exit code.
func (j *job) Exit() engine.Exit {
	select {
	case <-j.exited:
	default:
		return engine.Exit{Code: -1}
	}
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-j.final:
	case <-t.C:
		return engine.Exit{Code: -1, Scheduler: fmt.Sprintf("slurm job %s still ending after %s", j.id, exitWait)}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.exit
}

// exitOf classifies a job's final state.
func exitOf(jb Job) engine.Exit {
	switch jb.State {
	case "COMPLETED", "FAILED":
		return engine.Exit{Code: jb.ExitCode}
	case "OUT_OF_MEMORY":
		return engine.Exit{Code: jb.ExitCode, OOMKilled: true}
	}
	msg := fmt.Sprintf("slurm job %s %s", jb.ID, jb.State)
	if jb.Reason != "" && jb.Reason != "None" {
		msg += " (" + jb.Reason + ")"
	}
	return engine.Exit{Code: jb.ExitCode, Scheduler: msg}
}

// hopeless are reasons a pending job never leaves: a request its
// partition, account or QOS can never grant (Slurm keeps such jobs
// pending unless EnforcePartLimits refuses them at submission).
var hopeless = map[string]bool{
	"BadConstraints": true, "PartitionConfig": true, "PartitionNodeLimit": true, "PartitionTimeLimit": true,
	"InvalidAccount": true, "InvalidQOS": true, "QOSJobLimit": true, "JobHeldAdmin": true,
}

func isHopeless(reason string) bool {
	return hopeless[reason] || strings.HasSuffix(reason, "PerJob") || strings.HasSuffix(reason, "PerJobLimit")
}

// watch follows the job until its final state is known or Stop ends it.
func (j *job) watch() {
	defer close(j.watchDone)
	t := time.NewTicker(j.poll)
	defer t.Stop()
	var lastQueue time.Time
	var failing time.Time // since when squeue fails
	for {
		j.checkFiles()
		if time.Since(lastQueue) >= j.queuePoll {
			lastQueue = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			jobs, err := j.c.squeue(ctx, j.id)
			cancel()
			switch {
			case err != nil:
				// A controller restart or a busy one: go on, but not forever.
				if failing.IsZero() {
					failing = time.Now()
				}
				if time.Since(failing) > 2*time.Minute {
					j.end(engine.Exit{Code: -1, Scheduler: fmt.Sprintf("slurm job %s: squeue failing for 2 minutes: %v", j.id, err)})
					return
				}
			default:
				failing = time.Time{}
				jb, ok := find(jobs, j.id)
				if !ok {
					// Forgotten by the controller (MinJobAge passed, or it
					// lost its state): over, how is unknown.
					j.end(engine.Exit{Code: -1, Scheduler: fmt.Sprintf("slurm job %s is gone from squeue", j.id)})
					return
				}
				if j.update(jb) {
					return
				}
			}
		}
		select {
		case <-j.quit:
			return
		case <-t.C:
		}
	}
}

// update records what squeue said; it returns true once the job has ended.
func (j *job) update(jb Job) bool {
	j.mu.Lock()
	j.state, j.reason = jb.State, jb.Reason
	if jb.Node != "" {
		j.node = jb.Node
	}
	switch jb.State {
	case "RUNNING", "SUSPENDED", "COMPLETING":
		if j.started.IsZero() {
			j.started = time.Now()
		}
	}
	j.mu.Unlock()
	switch {
	case ended(jb.State):
		j.end(exitOf(jb))
		return true
	case jb.State == "COMPLETING":
		j.ending()
	case jb.State == "PENDING" && isHopeless(jb.Reason):
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = j.c.scancel(ctx, j.id)
		cancel()
		j.end(engine.Exit{Code: -1, Scheduler: fmt.Sprintf("slurm job %s cannot start: %s", j.id, jb.Reason)})
		return true
	}
	return false
}

// checkFiles notes the job's start (Slurm creates its log when it starts)
// and reads its address.
func (j *job) checkFiles() {
	j.mu.Lock()
	have := j.endpoint != ""
	j.mu.Unlock()
	if have {
		return
	}
	addr, err := os.ReadFile(j.files.addr)
	_, logErr := os.Stat(j.files.log)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.started.IsZero() && (err == nil || logErr == nil) {
		j.started = time.Now()
	}
	if err != nil {
		return
	}
	f := strings.Fields(string(addr))
	if len(f) != 2 {
		return
	}
	if port, perr := strconv.Atoi(f[1]); perr == nil && port > 0 {
		j.endpoint = "http://" + launcher.HostPort(f[0], port)
		if j.node == "" {
			j.node = f[0]
		}
	}
}

var closeMu sync.Mutex // guards the closing of the channels of every job

func closeOnce(c chan struct{}) {
	closeMu.Lock()
	defer closeMu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// ending marks the engine gone while Slurm finishes the job.
func (j *job) ending() { closeOnce(j.exited) }

// end records the job's final state.
func (j *job) end(e engine.Exit) {
	j.mu.Lock()
	j.exit = e
	j.mu.Unlock()
	closeOnce(j.final)
	closeOnce(j.exited)
}

// Ready waits for the job to start and write its address, then for the
// engine's /health. A job that ends first gives an *launcher.ExitError; one
// still pending when ctx ends gives ctx's error with the scheduler's reason.
func (j *job) Ready(ctx context.Context) error {
	t := time.NewTicker(j.poll)
	defer t.Stop()
	for j.Endpoint() == "" {
		select {
		case <-ctx.Done():
			_, started, reason := j.Queue()
			if started.IsZero() {
				// Nodes down or drained keep it waiting (the reason says
				// ReqNodeNotAvail, or Resources until the scheduler's next
				// pass): say which and how to resume them.
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if nodes, err := j.c.sinfoNodes(sctx, j.partition); err == nil {
					if hint, down := nodeHint(nodes, j.partition); down {
						j.mu.Lock()
						j.hint = hint
						j.mu.Unlock()
						reason += "; " + hint
					}
				}
				cancel()
				return fmt.Errorf("%s: %w", reason, ctx.Err())
			}
			return fmt.Errorf("slurm job %s started but wrote no address: %w", j.id, ctx.Err())
		case <-j.exited:
			return &launcher.ExitError{Exit: j.Exit()}
		case <-t.C:
			j.checkFiles()
		}
	}
	return launcher.WaitHealthy(ctx, j.Endpoint()+"/health", j.poll, j.exited, func() error {
		return &launcher.ExitError{Exit: j.Exit()}
	})
}

// Logs returns a line on the job (its id, node and state) and the tail of
// its output.
func (j *job) Logs() string {
	j.mu.Lock()
	head := fmt.Sprintf("[slurm job %s, node %s, %s", j.id, orNone(j.node), j.state)
	if j.reason != "" && j.reason != "None" {
		head += " (" + j.reason + ")"
	}
	head += "]\n"
	kept := j.kept
	j.mu.Unlock()
	if kept != "" {
		return kept
	}
	return head + tail(j.files.log, j.logBytes)
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

// tail reads the last n bytes of a file ("" when it is not there).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > int64(n) {
		_, _ = f.Seek(st.Size()-int64(n), io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, int64(n)))
	return string(b)
}

// Stop cancels the job, waits until Slurm says it ended (its GPUs are
// free), keeps its log tail and removes its files. It goes on after ctx is
// cancelled (Ctrl-C is when cleanup matters), bounded by the stop timeout.
// Safe to call more than once.
func (j *job) Stop(ctx context.Context) error {
	j.stopOnce.Do(func() { j.stopErr = j.stop(ctx) })
	return j.stopErr
}

func (j *job) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.stopLimit)
	defer cancel()
	var errs []error
	select {
	case <-j.final:
	default:
		if err := j.c.scancel(ctx, j.id); err != nil {
			errs = append(errs, fmt.Errorf("slurm: cancel job %s: %w", j.id, err))
		}
		select {
		case <-j.final:
		case <-j.watchDone: // the watch gave up: ask once more
			if err := waitEnded(ctx, j.c, []string{j.id}, j.stopLimit); err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("slurm: job %s did not end within %s of scancel", j.id, j.stopLimit))
		}
	}
	close(j.quit)
	<-j.watchDone
	logs := j.Logs()
	j.mu.Lock()
	j.kept = logs
	j.mu.Unlock()
	j.files.remove()
	return errors.Join(errs...)
}

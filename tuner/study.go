package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/servetune/servetune/engine"
	"github.com/servetune/servetune/gpu"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
)

// Evaluator runs one trial: TrialRunner (the spec's launcher, the
// benchmark) in production; tests substitute their own.
type Evaluator interface {
	Evaluate(ctx context.Context, number int, settings space.Settings, gpus []int) trial.Result
}

// Store is where a study keeps its trials: a *store.Store, on disk or in
// memory (store.Open(ctx, ":memory:")).
type Store interface {
	Begin(ctx context.Context, st store.Study, resume bool) (*store.Run, []store.Trial, error)
}

// ErrStudyExists is returned by Run when the study is already in the store
// and Resume is off.
var ErrStudyExists = errors.New("study already exists (use --resume to continue it, or another --db)")

// TrialReport is what Study tells its observer about a finished trial.
type TrialReport struct {
	Number   int
	Settings space.Settings
	GPUs     []int
	Result   trial.Result
	Value    *float64 // the sampler's objective; nil when the trial failed or met no SLO
	Best     *float64 // best value of the study so far
	Done     int      // trials finished, this one included
	Total    int      // trials the study runs
}

// Study runs a tuning study end to end: it owns the run, from the stored
// study to the engines it leaves behind. Set the fields, then call Run once.
type Study struct {
	Spec   *Spec
	Store  Store
	Resume bool // continue a stored study: re-run interrupted trials, replay finished ones

	// Eval runs the trials; nil = a TrialRunner over the spec's launcher,
	// with GPU telemetry when the launcher's GPUs are this machine's.
	Eval Evaluator

	OnStart    func(number int, settings space.Settings, gpus []int) // optional, from the dispatcher
	OnFinish   func(TrialReport)                                     // optional, serialised
	OnProgress func(number int, level string, done, total int)       // optional, a level's requests
	OnNote     func(msg string)                                      // optional: one-line notes (leftovers removed, no telemetry)
}

// Outcome summarises a finished (or interrupted) Run.
type Outcome struct {
	StudyID   int64
	Trials    int // trials stored, every status
	Completed int // trials with status ok
	Failed    int
	Rerun     []int // interrupted trial numbers that were run again
}

type job struct {
	number   int
	settings space.Settings
	askID    int
	replay   bool // an interrupted trial re-run: the sampler did not propose it
}

// Parallelism is how many trials the study runs at once: as many of its
// smallest configuration as its GPUs hold, at most tuner.parallel, and one
// when it lists no GPUs.
func (s *Study) Parallelism() int {
	gpus, _ := s.Spec.Launcher.placement()
	if len(gpus) == 0 {
		return 1
	}
	n := len(gpus) / max(minGPUs(s.Spec.Space), 1)
	if p := s.Spec.Tuner.Parallel; p > 0 && p < n {
		n = p
	}
	return max(n, 1)
}

func (s *Study) note(format string, a ...any) {
	if s.OnNote != nil {
		s.OnNote(fmt.Sprintf(format, a...))
	}
}

// Run executes the study: it creates (or resumes) the stored study, removes
// what an earlier run left running, runs trials until the spec's count is
// reached, the grid is exhausted, or ctx ends, waits for every trial it
// started, and removes what they left. A cancelled study leaves its running
// trials marked interrupted, to be re-run by a later resume.
func (s *Study) Run(ctx context.Context) (Outcome, error) {
	sp := s.Spec
	sampler, err := NewSampler(sp.Tuner.Sampler, sp.Space, sp.Tuner.Seed)
	if err != nil {
		return Outcome{}, err
	}
	run, stored, err := s.Store.Begin(ctx, store.Study{Name: sp.Name, Spec: sp.Text, Seed: uint64(sp.Tuner.Seed)}, s.Resume)
	switch {
	case errors.Is(err, store.ErrExists):
		return Outcome{}, fmt.Errorf("%q: %w", sp.Name, ErrStudyExists)
	case err != nil:
		return Outcome{}, fmt.Errorf("open study: %w", err)
	}
	r := &studyRun{s: s, sampler: sampler, run: run, out: Outcome{StudyID: run.Study.ID}, total: sp.Tuner.Trials}
	// The study is not running (Begin refuses a stored one without
	// resume): whatever its launcher finds of it is a leftover of a killed
	// run, still holding GPUs.
	if err := s.reap(ctx, "from an earlier run"); err != nil {
		_ = run.End(context.WithoutCancel(ctx), store.StudyFailed)
		return r.out, fmt.Errorf("remove leftovers of an earlier run: %w", err)
	}
	eval, closeEval := s.evaluator()
	defer closeEval()
	r.eval = eval
	if err := r.replay(stored); err != nil {
		_ = run.End(context.WithoutCancel(ctx), store.StudyFailed)
		return r.out, fmt.Errorf("resume: %w", err)
	}
	r.dispatch(ctx)
	err = r.close(ctx)
	// After Stop, what a trial could not remove (a daemon hiccup, a second
	// Ctrl-C in the middle) is removed here.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	if rerr := s.reap(rctx, "left after its trials"); rerr != nil {
		s.note("warning: %v; remove them with: servetune cleanup --study %s", rerr, sp.Name)
	}
	cancel()
	return r.out, err
}

// reap removes the study's leftovers through its launcher, when the
// launcher has any to remove.
func (s *Study) reap(ctx context.Context, when string) error {
	rp, ok := s.Spec.Launcher.Launcher.(launcher.Reaper)
	if !ok {
		return nil
	}
	removed, err := rp.Reap(ctx, s.Spec.Name, nil)
	if len(removed) > 0 {
		s.note("removed %d leftover %s engine(s) of study %s %s", len(removed), s.Spec.Launcher.Kind, s.Spec.Name, when)
	}
	return err
}

// evaluator returns the study's Evaluator and what closes it: the default
// TrialRunner samples the trials' GPUs through NVML when the launcher says
// they are this machine's.
func (s *Study) evaluator() (Evaluator, func()) {
	if s.Eval != nil {
		return s.Eval, func() {}
	}
	r := &TrialRunner{Spec: s.Spec, Progress: s.OnProgress}
	if lg, ok := s.Spec.Launcher.Launcher.(launcher.LocalGPUs); ok && lg.LocalGPUs() {
		n, err := gpu.Open()
		if err != nil {
			s.note("%v", err)
			return r, func() {}
		}
		r.GPUs = n
		return r, func() { n.Close() }
	}
	return r, func() {}
}

// studyRun is the state of one Run.
type studyRun struct {
	s       *Study
	sampler *Sampler
	run     *store.Run
	eval    Evaluator
	total   int

	queue   []job // interrupted trials to re-run first
	next    int   // the next trial number
	started int   // trials started or finished, replayed ones included

	mu      sync.Mutex // guards done, best, out, firstErr and OnFinish calls
	done    int
	best    *float64
	out     Outcome
	firstEr error
	wg      sync.WaitGroup
}

// replay teaches the sampler the stored trials of a resumed study and
// queues its interrupted ones to run again first.
func (r *studyRun) replay(stored []store.Trial) error {
	obj := r.s.Spec.Tuner.Objective
	for _, t := range stored {
		r.next = max(r.next, t.Number+1)
		switch t.Status {
		case measure.StatusInterrupted, measure.StatusRunning:
			// Not to be proposed again while it re-runs.
			r.sampler.Reserve(t.Settings)
			r.queue = append(r.queue, job{number: t.Number, settings: t.Settings, replay: true})
			r.out.Rerun = append(r.out.Rerun, t.Number)
			continue
		}
		r.done++
		failed := t.Objective == nil
		v := 0.0
		if !failed {
			v = *t.Objective
			if r.best == nil || obj.better(v, *r.best) {
				r.best = &v
			}
		}
		if err := r.sampler.Replay(t.Settings, obj.score(v), failed); err != nil {
			return fmt.Errorf("replay trial %d: %w", t.Number, err)
		}
	}
	r.started = r.done
	return nil
}

func (r *studyRun) fail(err error) {
	r.mu.Lock()
	if r.firstEr == nil {
		r.firstEr = err
	}
	r.mu.Unlock()
}

func (r *studyRun) stopped(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstEr != nil || ctx.Err() != nil
}

// dispatch starts trials until the count is reached, the grid is
// exhausted, ctx ends or a trial cannot be stored, then waits for them.
func (r *studyRun) dispatch(ctx context.Context) {
	gpus, group := r.s.Spec.Launcher.placement()
	if len(gpus) == 0 {
		// Without listed GPUs trials run one at a time on indices 0..n-1.
		for i := range 64 {
			gpus = append(gpus, i)
		}
	}
	pool := newGPUPool(gpus, group)
	sem := make(chan struct{}, r.s.Parallelism())
	for r.started < r.total && ctx.Err() == nil {
		// Take a slot before asking, so the sampler has seen every result
		// it could have (with one slot: every earlier trial).
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if r.stopped(ctx) {
			break
		}
		j, ok := r.nextJob()
		if !ok {
			break
		}
		need := GPUsFor(j.settings)
		var ids []int
		var early *trial.Result
		if need > pool.total {
			// More GPUs than the study has: a failed trial, not a stop.
			res := trial.Failed(engine.FailInfeasible, fmt.Sprintf("needs %d GPUs, the study has %d on one host", need, pool.total))
			early = &res
		} else {
			var err error
			if ids, err = pool.Acquire(ctx, need); err != nil {
				break // cancelled
			}
		}
		if err := r.run.StartTrial(ctx, j.number, j.settings, ids); err != nil {
			pool.Release(ids)
			r.fail(fmt.Errorf("trial %d: %w", j.number, err))
			break
		}
		r.started++
		r.wg.Add(1)
		release := func() { <-sem; pool.Release(ids) }
		if early != nil {
			r.finish(ctx, j, ids, *early, release)
			continue
		}
		if r.s.OnStart != nil {
			r.s.OnStart(j.number, j.settings, ids)
		}
		go func(j job, ids []int) {
			r.finish(ctx, j, ids, r.eval.Evaluate(ctx, j.number, j.settings, ids), release)
		}(j, ids)
	}
	r.wg.Wait()
}

// nextJob is the next trial to run: an interrupted one, else the
// sampler's proposal. ok is false when there is none.
func (r *studyRun) nextJob() (job, bool) {
	if len(r.queue) > 0 {
		j := r.queue[0]
		r.queue = r.queue[1:]
		return j, true
	}
	p, err := r.sampler.Ask()
	if errors.Is(err, ErrExhausted) {
		return job{}, false
	}
	if err != nil {
		r.fail(err)
		return job{}, false
	}
	j := job{number: r.next, settings: p.Settings, askID: p.ID}
	r.next++
	return j, true
}

// finish stores a trial's result, tells the sampler and the observer.
func (r *studyRun) finish(ctx context.Context, j job, gpus []int, res trial.Result, release func()) {
	defer r.wg.Done()
	defer release()
	sp := r.s.Spec
	if res.Status == measure.StatusInterrupted {
		if ctx.Err() != nil {
			// The study is stopping: keep the load levels this trial
			// finished, marked interrupted; --resume re-runs it in place
			// (StartTrial clears them then). The sampler is not told.
			if res.Finished.IsZero() {
				res.Finished = time.Now()
			}
			if err := r.run.FinishTrial(context.WithoutCancel(ctx), storeResult(j.number, res, nil)); err != nil {
				r.fail(fmt.Errorf("trial %d: save interrupted trial: %w", j.number, err))
			}
			return
		}
		// Interrupted without the study being stopped: count it as failed
		// rather than leave it running.
		res = trial.Failed(engine.FailLaunchError, "trial interrupted")
	}
	pts := PointsOf(j.number, j.settings, sp.Hardware.PricePerGPUHour, res.Levels)
	var value *float64
	if res.Status == measure.StatusOK {
		if v, ok := TrialValue(pts, sp.Tuner.Objective, sp.SLO); ok {
			value = &v
		}
	}
	err := r.run.FinishTrial(context.WithoutCancel(ctx), storeResult(j.number, res, value))
	score := sp.Tuner.Objective.score(deref(value))
	var tellErr error
	if j.replay {
		tellErr = r.sampler.Replay(j.settings, score, value == nil)
	} else {
		tellErr = r.sampler.Tell(j.askID, score, value == nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = tellErr
	}
	if err != nil && r.firstEr == nil {
		r.firstEr = fmt.Errorf("trial %d: %w", j.number, err)
	}
	r.done++
	if res.Status == measure.StatusOK {
		r.out.Completed++
	} else {
		r.out.Failed++
	}
	if value != nil && (r.best == nil || sp.Tuner.Objective.better(*value, *r.best)) {
		v := *value
		r.best = &v
	}
	if r.s.OnFinish != nil {
		r.s.OnFinish(TrialReport{Number: j.number, Settings: j.settings, GPUs: gpus, Result: res,
			Value: value, Best: r.best, Done: r.done, Total: r.total})
	}
}

// close ends the stored run with the study's status and returns the
// study's error.
func (r *studyRun) close(ctx context.Context) error {
	status := store.StudyFinished
	switch {
	case ctx.Err() != nil:
		status = store.StudyInterrupted
	case r.firstEr != nil:
		status = store.StudyFailed
	}
	if err := r.run.End(context.WithoutCancel(ctx), status); err != nil && r.firstEr == nil {
		r.firstEr = err
	}
	if trials, err := r.run.Trials(context.WithoutCancel(ctx)); err == nil {
		r.out.Trials = len(trials)
	}
	if r.firstEr != nil {
		return r.firstEr
	}
	return ctx.Err()
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// storeResult converts a trial result into the store's one-transaction row.
func storeResult(number int, res trial.Result, value *float64) store.TrialResult {
	tr := store.TrialResult{
		Number: number, Status: res.Status, Failure: res.Failure, FailureMsg: res.Message,
		LogTail: res.LogTail, Objective: value, Finished: res.Finished, LoadPoints: res.Levels,
	}
	first := map[int]uint64{} // energy counter at the first reading of each GPU
	for _, g := range res.GPU {
		// A zero counter is a reading NVML did not give (gpu.Sample):
		// unknown energy, and no base for the later samples.
		energy := math.NaN()
		if g.EnergyMilliJ != 0 {
			if _, ok := first[g.GPU]; !ok {
				first[g.GPU] = g.EnergyMilliJ
			}
			if g.EnergyMilliJ >= first[g.GPU] {
				energy = float64(g.EnergyMilliJ-first[g.GPU]) / 1000
			}
		}
		tr.GPU = append(tr.GPU, store.GPUSample{T: g.Time.Sub(res.Started), GPU: g.GPU, PowerW: g.PowerW,
			MemUsedBytes: int64(g.MemUsed), UtilPct: g.UtilGPU, SMClockMHz: int(g.SMClockMHz),
			EnergyJ: energy})
	}
	return tr
}

// PointsOf turns a trial's measured levels into Pareto points.
func PointsOf(number int, settings space.Settings, price float64, levels []measure.Level) []Point {
	pts := make([]Point, 0, len(levels))
	for i, lv := range levels {
		pts = append(pts, Point{Trial: number, Index: i, Settings: settings, GPUs: GPUsFor(settings),
			Price: price, Level: lv})
	}
	return pts
}

// StoredPoints returns the (trial, load level) points of stored trials with
// status ok, in trial and level order.
func StoredPoints(trials []store.Trial, price float64) []Point {
	var pts []Point
	for _, t := range trials {
		if t.Status == measure.StatusOK {
			pts = append(pts, PointsOf(t.Number, t.Settings, price, t.LoadPoints)...)
		}
	}
	return pts
}

// Elapsed is a helper for progress lines: a trial's wall time.
func Elapsed(r trial.Result) time.Duration { return r.Finished.Sub(r.Started).Round(time.Millisecond) }

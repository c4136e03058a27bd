package tuner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/trace"
	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// Evaluator runs one trial: TrialRunner (the spec's launcher, the
// benchmark) in production; tests substitute their own.
type Evaluator interface {
	Evaluate(ctx context.Context, number int, settings space.Settings, gpus []int) trial.Result
}

// Store is where a study keeps its trials: a *store.Store, on disk or in
// memory (store.Open(ctx, ":memory:")).
type Store interface {
	GetStudy(ctx context.Context, name string) (store.Study, error)
	Begin(ctx context.Context, st store.Study, opts store.BeginOptions) (*store.Lease, []store.Trial, error)
}

// ErrStudyExists is returned by Run when the study is already in the store
// and Resume is off.
var ErrStudyExists = errors.New("study already exists (use --resume to continue it, --fresh to delete it and start again, or another --db)")

// ErrPreflight is wrapped by Run's error when a check made before the
// first launch shows that every trial would fail; nothing is stored.
var ErrPreflight = errors.New("the study cannot run")

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
	// Confirms is the trial a confirmation run measures again (nil for a
	// search trial); Replica counts the confirmation runs (1, 2, ...).
	Confirms *int
	Replica  int
}

// Study runs a tuning study end to end: it owns the run, from the stored
// study to the engines it leaves behind. Set the fields, then call Run once.
type Study struct {
	Spec   *spec.Spec
	Store  Store
	Resume bool // continue a stored study: re-run interrupted trials, replay finished ones
	// ForceSpec lets a resume take a changed spec when the change keeps the
	// stored trials comparable (spec.ResumeCheck).
	ForceSpec bool
	// Tool names the program running the study ("servetune v1.2"), stored
	// with a new study for its report.
	Tool string

	// Eval runs the trials; nil = a TrialRunner over the spec's launcher,
	// with GPU telemetry when the launcher's GPUs are this machine's.
	Eval Evaluator
	// Launcher is the launcher its kind built from the spec's launcher
	// section (ParseSpec returns it); nil = built by Run (NewLauncher).
	Launcher launcher.Launcher
	// Memory is the memory precheck's model (tuner/memory's Model) for the
	// default TrialRunner and the preflight; nil = the precheck checks the
	// space's rules only.
	Memory MemoryModel

	OnBegin    func(resumed bool, stored int)                        // optional: the study is open and owned (stored trials so far)
	OnStart    func(number int, settings space.Settings, gpus []int) // optional, from the dispatcher
	OnFinish   func(TrialReport)                                     // optional, serialised
	OnProgress func(number int, level string, done, total int)       // optional, a level's requests
	OnNote     func(msg string)                                      // optional: one-line notes (leftovers removed, no telemetry)
	// OnForecast (optional) tells how far the sampler's forecast of the
	// space is before the first trial (the guided sampler's, seconds to
	// minutes): configurations forecast of total (which grows when it
	// refines); calls are serialised.
	OnForecast func(done, total int)
}

// Forecaster is a Sampler that forecast the space before proposing (the
// guided sampler): Forecasts is its view of each configuration, which the
// study stores (store.Lease.SetForecast) for the report to show beside
// values no trial measured; best first, as the store keeps the first
// store.MaxForecasts.
type Forecaster interface {
	Forecasts() []store.Forecast
}

// Outcome summarises a finished (or interrupted) Run.
type Outcome struct {
	StudyID   int64
	Trials    int // trials stored, every status
	Completed int // trials with status ok
	Failed    int
	Rerun     []int // interrupted trial numbers that were run again
	// Stop is set when the sampler stopped proposing before the study's
	// trial count (the guided sampler's forecast); it is stored with the
	// study (store.Study.Stop).
	Stop store.Stop
}

type job struct {
	number   int
	settings space.Settings
	askID    int
	replay   bool // an interrupted trial re-run: the sampler did not propose it
	confirms *int // a confirmation run of this trial: the sampler is not told
	replica  int  // which confirmation run (1, 2, ...): its workload seed
	seq      int  // the order it started in (ordered studies finish in it)
}

// caps is the capabilities of the study's launcher (launcherFor); none
// without one.
func (s *Study) caps() launcher.Capabilities {
	if l := launcherFor(s.Spec, s.Launcher); l != nil {
		return l.Capabilities()
	}
	return launcher.Capabilities{}
}

// Parallelism is how many trials the study runs at once: as many of its
// smallest configuration as its GPUs hold, at most tuner.parallel, and one
// when it lists no GPUs.
func (s *Study) Parallelism() int { return s.Spec.Parallelism() }

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
	study := s.Spec
	if s.Launcher == nil {
		l, err := NewLauncher(study)
		if err != nil {
			return Outcome{}, err
		}
		s.Launcher = l
	}
	run, stored, err := s.open(ctx)
	if err != nil {
		return Outcome{}, err
	}
	if study.Tuner.Sampler == spec.SamplerGuided {
		s.note("guided: forecasting the space in virtual time before the first trial")
	}
	smp, err := sampler.ForStudy(ctx, study, sampler.Hooks{Note: func(msg string) { s.note("%s", msg) }, Forecast: s.OnForecast})
	if err != nil {
		status := store.StudyFailed
		if ctx.Err() != nil {
			status = store.StudyInterrupted
		}
		_ = run.End(context.WithoutCancel(ctx), status)
		return Outcome{}, err
	}
	if s.OnBegin != nil {
		s.OnBegin(s.Resume, len(stored))
	}
	r := &studyRun{s: s, sampler: smp, run: run, out: Outcome{StudyID: run.Study.ID}, total: study.Tuner.Trials}
	if s.caps().Deterministic {
		r.ordered = true
		r.order.init()
	}
	// The study is not running (Begin refuses a stored one without
	// resume): whatever its launcher finds of it is a leftover of a killed
	// run, still holding GPUs.
	if err := s.reap(ctx, run.Owner, "from an earlier run"); err != nil {
		_ = run.End(context.WithoutCancel(ctx), store.StudyFailed)
		return r.out, fmt.Errorf("remove leftovers of an earlier run: %w", err)
	}
	eval, closeEval := s.evaluator(run.Owner)
	defer closeEval()
	r.eval = eval
	if err := r.replay(stored); err != nil {
		_ = run.End(context.WithoutCancel(ctx), store.StudyFailed)
		return r.out, fmt.Errorf("resume: %w", err)
	}
	if err := r.qualityBaseline(ctx); err != nil {
		status := store.StudyFailed
		if ctx.Err() != nil {
			status = store.StudyInterrupted
		}
		_ = run.End(context.WithoutCancel(ctx), status)
		return r.out, fmt.Errorf("quality baseline: %w", err)
	}
	r.enqueue(stored)
	r.dispatch(ctx, r.searchJob)
	if sum := smp.Summary(); sum != "" {
		s.note("%s", sum)
	}
	if r.out.Stop.Stopped() {
		if err := run.SetStop(context.WithoutCancel(ctx), r.out.Stop); err != nil {
			s.note("warning: %v", err)
		}
	}
	if f, ok := smp.(Forecaster); ok {
		// What the search left unmeasured, and why, as the sampler saw it
		// when the search ended.
		if err := run.SetForecast(context.WithoutCancel(ctx), f.Forecasts()); err != nil {
			s.note("warning: %v", err)
		}
	}
	if ctx.Err() == nil && !r.stopped(ctx) {
		r.confirm(ctx)
	}
	err = r.close(ctx)
	// After Stop, what a trial could not remove (a daemon hiccup, a second
	// Ctrl-C in the middle) is removed here.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	if rerr := s.reap(rctx, run.Owner, "left after its trials"); rerr != nil {
		s.note("warning: %v; remove them with: servetune cleanup --study %s", rerr, study.Name)
	}
	cancel()
	return r.out, err
}

// open checks and opens the stored study, in the order that gives the
// most useful refusal: another live owner or an existing name (Begin),
// then a resume's changed spec, then what would make every trial fail
// (preflight). Nothing is stored before every check passed.
func (s *Study) open(ctx context.Context) (*store.Lease, []store.Trial, error) {
	study := s.Spec
	text := store.RedactSpec(study.Text) // as the store keeps it, to compare like with like
	old, err := s.Store.GetStudy(ctx, study.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, nil, fmt.Errorf("open study: %w", err)
	case s.Resume:
		if _, err := s.resumeCheck(old, text); err != nil {
			// Begin refuses with the live owner first, else with this
			// error, and changes nothing.
			_, _, berr := s.Store.Begin(ctx, store.Study{Name: study.Name}, store.BeginOptions{Resume: true,
				Check: func(store.Study) error { return err }})
			return nil, nil, s.openError(berr)
		}
	}
	if err == nil && !s.Resume {
		// An existing study: Begin refuses it (owned, or exists).
		_, _, berr := s.Store.Begin(ctx, store.Study{Name: study.Name}, store.BeginOptions{})
		return nil, nil, s.openError(berr)
	}
	if err := s.preflight(ctx); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	var changed []string
	run, stored, err := s.Store.Begin(ctx, store.Study{Name: study.Name, Spec: study.Text, Seed: uint64(study.Tuner.Seed), ModelConfig: study.ModelConfigText, Tool: s.Tool},
		store.BeginOptions{Resume: s.Resume, Check: func(old store.Study) error {
			update, err := s.resumeCheck(old, text)
			if update {
				changed = spec.SpecDiff(old.Spec, text)
			}
			return err
		}, UpdateSpec: true})
	if err != nil {
		return nil, nil, s.openError(err)
	}
	if len(changed) > 0 {
		s.note("resumed with the changed spec (%s); it replaces the stored one", strings.Join(changed, ", "))
	}
	return run, stored, nil
}

// resumeCheck decides whether the stored study old may be resumed with the
// spec text: the spec's keys (spec.ResumeCheck), then the model's identity
// (spec.ModelCheck).
func (s *Study) resumeCheck(old store.Study, text string) (bool, error) {
	update, err := spec.ResumeCheck(old.Spec, text, s.ForceSpec)
	if err != nil {
		return false, err
	}
	if err := spec.ModelCheck(old.ModelConfig, s.Spec.ModelConfigText); err != nil {
		return false, err
	}
	return update, nil
}

func (s *Study) openError(err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("open study %q: refused", s.Spec.Name)
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%q: %w", s.Spec.Name, ErrStudyExists)
	case errors.Is(err, spec.ErrSpecChanged):
		return err
	}
	return fmt.Errorf("open study: %w", err)
}

// reap removes the study's leftovers through its launcher, when the
// launcher has any to remove: what this run left, and what runs that are
// no longer alive left. The engines of another live run (the same study
// name in another database) are spared.
func (s *Study) reap(ctx context.Context, self proc.Owner, when string) error {
	reap := s.caps().Reap
	if reap == nil {
		return nil
	}
	removed, err := reap(ctx, s.Spec.Name, KeepLive(self))
	if len(removed) > 0 {
		s.note("removed %d leftover %s engine(s) of study %s %s", len(removed), s.Spec.Launcher.Kind, s.Spec.Name, when)
	}
	return err
}

// evaluator returns the study's Evaluator and what closes it: the default
// TrialRunner samples the trials' GPUs through NVML when the launcher says
// they are this machine's.
func (s *Study) evaluator(self proc.Owner) (Evaluator, func()) {
	if s.Eval != nil {
		return s.Eval, func() {}
	}
	r := &TrialRunner{Spec: s.Spec, Launcher: s.Launcher, Memory: s.Memory, Progress: s.OnProgress, Owner: self.String()}
	if s.caps().LocalGPUs {
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
	sampler sampler.Sampler
	run     *store.Lease
	eval    Evaluator
	total   int

	queue   []job // interrupted trials to re-run first
	next    int   // the next trial number
	started int   // trials started or finished, replayed ones included

	// ordered: the launcher is Deterministic, so trials finish in start
	// order and the sampler, before proposing the job of sequence s, is
	// told exactly the jobs before s-P+1 (P trials at once): what it
	// proposes then depends on the seed alone, not on which trial happened
	// to end first.
	ordered bool
	order   orderer

	mu           sync.Mutex // guards done, confirmed, best, out, firstErr and OnFinish calls
	done         int
	confirmed    int // confirmation runs finished
	confirmTotal int // confirmation runs the study runs
	best         *float64
	out          Outcome
	firstEr      error
	wg           sync.WaitGroup
}

// replay teaches the sampler the stored trials of a resumed study and
// queues its interrupted ones to run again first. A finished trial's value
// is computed again from its stored load points under the current
// objective and SLOs (a forced spec change may have moved them); trials
// whose settings the current space does not hold stay stored, untold.
func (r *studyRun) replay(stored []store.Trial) error {
	study := r.s.Spec
	obj := study.Tuner.Objective
	skipped := 0
	unreadable := 0
	for _, t := range stored {
		r.next = max(r.next, t.Number+1)
		if t.Unreadable != "" {
			// Its settings or figures are lost: neither told nor re-run.
			unreadable++
			continue
		}
		if t.Confirms != nil {
			// A confirmation run: re-run when interrupted (confirm counts the
			// rest), never told to the sampler.
			continue
		}
		switch t.Status {
		case measure.StatusInterrupted, measure.StatusRunning:
			if !study.Space.Holds(t.Settings) {
				skipped++
				continue
			}
			// Not to be proposed again while it re-runs.
			r.sampler.Reserve(t.Settings)
			r.queue = append(r.queue, job{number: t.Number, settings: t.Settings, replay: true})
			r.out.Rerun = append(r.out.Rerun, t.Number)
			continue
		}
		r.done++
		v, ok := 0.0, false
		if t.Status == measure.StatusOK {
			v, ok = recommend.TrialValue(recommend.PointsOf(t.Number, t.Settings, study.Hardware.PricePerGPUHour, t.LoadPoints), obj, study.SLO)
		}
		if ok && (r.best == nil || obj.Better(v, *r.best)) {
			r.best = &v
		}
		if !study.Space.Holds(t.Settings) {
			skipped++
			continue
		}
		if err := r.sampler.Replay(t.Settings, obj.Score(v), !ok); err != nil {
			return fmt.Errorf("replay trial %d: %w", t.Number, err)
		}
	}
	if skipped > 0 {
		r.s.note("%d stored trial(s) lie outside the changed space: kept in the store, not told to the sampler, not re-run", skipped)
	}
	if unreadable > 0 {
		r.s.note("%d stored trial(s) could not be read back (servetune trials says why): kept in the store, not told to the sampler, not re-run", unreadable)
	}
	r.started = r.done
	return nil
}

// enqueue queues the spec's configurations to measure first, those a
// resumed study has not stored yet; the sampler is told their results as
// replayed trials.
func (r *studyRun) enqueue(stored []store.Trial) {
	have := map[string]bool{}
	for _, t := range stored {
		have[t.Settings.Key()] = true
	}
	for _, set := range r.s.Spec.Tuner.Enqueue {
		if have[set.Key()] || !r.s.Spec.Space.Holds(set) {
			continue
		}
		have[set.Key()] = true
		r.sampler.Reserve(set)
		r.queue = append(r.queue, job{number: r.next, settings: set, replay: true})
		r.next++
	}
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
func (r *studyRun) dispatch(ctx context.Context, next func() (job, bool)) {
	gpus, group := r.s.Spec.Launcher.Placement()
	if len(gpus) == 0 {
		// Without listed GPUs trials run one at a time on indices 0..n-1.
		for i := range 64 {
			gpus = append(gpus, i)
		}
	}
	pool := newGPUPool(gpus, group)
	sem := make(chan struct{}, r.s.Parallelism())
	for ctx.Err() == nil {
		// Take a slot before asking, so the sampler has seen every result
		// it could have (with one slot: every earlier trial).
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if r.stopped(ctx) {
			break
		}
		if r.ordered {
			if err := r.order.settle(r.order.next - r.s.Parallelism()); err != nil {
				r.fail(err)
				<-sem
				break
			}
		}
		j, ok := next()
		if !ok {
			<-sem
			break
		}
		need := spec.GPUsFor(j.settings)
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
		var err error
		if j.confirms != nil {
			err = r.run.StartConfirmation(ctx, j.number, *j.confirms, j.settings, ids)
		} else {
			err = r.run.StartTrial(ctx, j.number, j.settings, ids)
		}
		if err != nil {
			pool.Release(ids)
			r.fail(fmt.Errorf("trial %d: %w", j.number, err))
			break
		}
		if j.confirms == nil {
			r.started++
		}
		j.seq = r.order.next
		r.order.next++
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
			var res trial.Result
			if re, ok := r.eval.(replicaEvaluator); ok && j.replica > 0 {
				res = re.EvaluateReplica(ctx, j.number, j.replica, j.settings, ids)
			} else {
				res = r.eval.Evaluate(ctx, j.number, j.settings, ids)
			}
			r.finish(ctx, j, ids, res, release)
		}(j, ids)
	}
	r.wg.Wait()
}

// searchJob is the next search trial: an interrupted one, else the
// sampler's proposal, until the study's count. ok is false when there is
// none.
func (r *studyRun) searchJob() (job, bool) {
	if r.started >= r.total && len(r.queue) == 0 {
		return job{}, false
	}
	if len(r.queue) > 0 {
		j := r.queue[0]
		r.queue = r.queue[1:]
		return j, true
	}
	p, err := r.sampler.Ask()
	if errors.Is(err, sampler.ErrExhausted) {
		if st, ok := r.sampler.(sampler.Stopper); ok && r.started < r.total {
			if why := st.StopReason(); why != "" {
				r.out.Stop = store.Stop{At: r.started, Of: r.total, Why: why}
			}
		}
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
	if r.ordered {
		r.order.wait(j.seq)
		defer r.order.done()
	}
	study := r.s.Spec
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
	pts := recommend.PointsOf(j.number, j.settings, study.Hardware.PricePerGPUHour, res.Levels)
	var value *float64
	if res.Status == measure.StatusOK {
		if v, ok := recommend.TrialValue(pts, study.Tuner.Objective, study.SLO); ok {
			value = &v
		}
	}
	err := r.run.FinishTrial(context.WithoutCancel(ctx), storeResult(j.number, res, value))
	score := study.Tuner.Objective.Score(deref(value))
	var tell func() error
	switch {
	case j.confirms != nil: // measures a candidate again: the sampler's model stays as it learnt
	case j.replay:
		tell = func() error { return r.sampler.Replay(j.settings, score, value == nil) }
	default:
		tell = func() error {
			r.sampler.Observe(j.askID, res)
			return r.sampler.Tell(j.askID, score, value == nil)
		}
	}
	var tellErr error
	switch {
	case tell == nil:
	case r.ordered:
		r.order.hold(j.seq, func() error {
			if err := tell(); err != nil {
				return fmt.Errorf("trial %d: %w", j.number, err)
			}
			return nil
		})
	default:
		tellErr = tell()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = tellErr
	}
	if err != nil && r.firstEr == nil {
		r.firstEr = fmt.Errorf("trial %d: %w", j.number, err)
	}
	if j.confirms == nil {
		r.done++
	} else {
		r.confirmed++
	}
	if res.Status == measure.StatusOK {
		r.out.Completed++
	} else {
		r.out.Failed++
	}
	if value != nil && j.confirms == nil && (r.best == nil || study.Tuner.Objective.Better(*value, *r.best)) {
		v := *value
		r.best = &v
	}
	if r.s.OnFinish != nil {
		done, total := r.done, r.total
		if j.confirms != nil {
			done, total = r.confirmed, r.confirmTotal
		}
		r.s.OnFinish(TrialReport{Number: j.number, Settings: j.settings, GPUs: gpus, Result: res,
			Value: value, Best: r.best, Done: done, Total: total, Confirms: j.confirms, Replica: j.replica})
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
	if n, err := r.run.TrialCount(context.WithoutCancel(ctx)); err == nil {
		r.out.Trials = n // counted, not read: a study's levels take seconds to decode
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
	return store.TrialResult{
		Number: number, Status: res.Status, Failure: res.Failure, FailureMsg: res.Message,
		LogTail: res.LogTail, Objective: value, Finished: res.Finished, LoadPoints: res.Levels,
		Pending: res.Pending, Launch: res.Launch, Quality: res.Quality, GPU: res.GPU,
	}
}

// Elapsed is a helper for progress lines: a trial's wall time.
func Elapsed(r trial.Result) time.Duration { return r.Finished.Sub(r.Started).Round(time.Millisecond) }

// KeepLive is a reaper's keep function for run self: it spares what runs
// other than self left while they are alive, or may be (on another host).
// Engines without an owner (an older servetune's) are not spared.
func KeepLive(self proc.Owner) func(launcher.Reaped) bool {
	return func(r launcher.Reaped) bool {
		o, err := proc.Parse(r.Owner)
		if err != nil || o.Run == self.Run {
			return false
		}
		alive, known := o.Alive()
		return alive || !known
	}
}

// preflight checks what would make every trial fail, before anything is
// stored or launched: the launcher's own checks (an image, a model the
// simulator must know) and, with the memory precheck on, that some
// configuration of the space fits.
func (s *Study) preflight(ctx context.Context) error {
	study := s.Spec
	if err := datasetFiles(study.Workload.Dataset, "workload.dataset"); err != nil {
		return err
	}
	if preflight := s.caps().Preflight; preflight != nil {
		if err := preflight(ctx, launcher.Spec{Engine: study.Engine, Model: study.Model, Extra: study.Space.Extra, Study: study.Name}); err != nil {
			return err
		}
	}
	if s.Eval != nil || !study.Tuner.Precheck || s.Memory == nil {
		return nil
	}
	return (&TrialRunner{Spec: study, Memory: s.Memory}).anyFits()
}

// datasetFiles refuses a dataset whose file cannot be read, and a trace
// whose lines up to the window's first request do not parse, as bench
// refuses them: otherwise the study is stored and every trial fails on
// it.
func datasetFiles(d bench.DatasetSpec, field string) error {
	for i, p := range d.Mix {
		if err := datasetFiles(p.Spec, fmt.Sprintf("%s.mix[%d].spec", field, i)); err != nil {
			return err
		}
	}
	if d.Path == "" {
		return nil
	}
	f, err := os.Open(d.Path)
	if err != nil {
		return fmt.Errorf("%s.path: %w", field, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		return fmt.Errorf("%s.path: %s is not a file", field, d.Path)
	}
	if d.Kind == bench.DatasetTrace && d.Trace != nil {
		t := d.Trace
		if _, err := trace.Read(f, d.Path, trace.Format(t.Format), trace.Options{Speed: t.Speed, Start: t.Start, Duration: t.Duration, Max: 1}); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

// maxFitChecks bounds the configurations anyFits tries (a sample past it).
const maxFitChecks = 2000

// anyFits reports an error when no configuration of the space passes the
// space's checks and the memory model: the reason most of them fail.
func (r *TrialRunner) anyFits() error {
	study := r.Spec
	if _, err := r.model(); err != nil {
		return nil // a model the simulator does not know: the engine decides
	}
	var points []space.Settings
	if n, err := study.Space.Size(); err == nil && n <= maxFitChecks {
		points, _ = study.Space.Grid()
	} else {
		smp, err := sampler.New(spec.SamplerRandom, study.Space, study.Tuner.Seed)
		if err != nil {
			return nil
		}
		for range maxFitChecks {
			p, err := smp.Ask()
			if err != nil {
				break
			}
			points = append(points, p.Settings)
		}
	}
	if len(points) == 0 {
		return nil // nothing to judge by: the trials will tell
	}
	gpus, group := study.Launcher.Placement()
	most := newGPUPool(gpus, group).total
	reasons := map[string]int{}
	first := map[string]space.Settings{}
	for _, set := range points {
		n := spec.GPUsFor(set)
		if most > 0 {
			n = min(n, most)
		}
		ls := r.LaunchSpec(0, set, make([]int, n))
		err := study.Space.Check(set, r.checkContext(ls))
		if err == nil {
			return nil
		}
		msg := err.Error()
		if m, ok := r.oom(err); ok {
			msg = m
		}
		if reasons[msg] == 0 {
			first[msg] = set
		}
		reasons[msg]++
	}
	worst, n := "", 0
	for m, k := range reasons {
		if k > n || k == n && m < worst {
			worst, n = m, k
		}
	}
	return fmt.Errorf("none of the %d configurations tried fits: %d fail with %q (e.g. %s)", len(points), n, worst, first[worst].Key())
}

// replicaEvaluator runs a confirmation run: the trial again on another
// workload seed (TrialRunner implements it).
type replicaEvaluator interface {
	EvaluateReplica(ctx context.Context, number, replica int, settings space.Settings, gpus []int) trial.Result
}

// confirm measures the final candidates again (tuner.confirm): the best
// TopK configurations by the objective, each Runs more times on other
// workload seeds, so that the recommendation rests on repeated
// measurements with confidence intervals rather than on one noisy one. A
// resumed study runs only the confirmation runs it still lacks.
func (r *studyRun) confirm(ctx context.Context) {
	c := r.s.Spec.Tuner.Confirm
	if c.Top <= 0 || c.Runs <= 0 {
		return
	}
	trials, err := r.run.Trials(context.WithoutCancel(ctx))
	if err != nil {
		r.fail(err)
		return
	}
	var jobs []job
	for _, cand := range confirmCandidates(trials, r.s.Spec, c.Top) {
		have := map[int]bool{}
		for _, t := range trials {
			if t.Confirms != nil && *t.Confirms == cand.Number && t.Status != measure.StatusInterrupted {
				have[ReplicaOf(t, trials)] = true
			}
		}
		for k := 1; k <= c.Runs; k++ {
			if have[k] {
				continue
			}
			n := cand.Number
			jobs = append(jobs, job{number: r.next, settings: cand.Settings, confirms: &n, replica: k})
			r.next++
		}
	}
	// Interrupted confirmation runs are re-run in place.
	for _, t := range trials {
		if t.Confirms != nil && (t.Status == measure.StatusInterrupted || t.Status == measure.StatusRunning) {
			n := *t.Confirms
			jobs = append(jobs, job{number: t.Number, settings: t.Settings, confirms: &n, replica: ReplicaOf(t, trials)})
		}
	}
	if len(jobs) == 0 {
		return
	}
	r.confirmTotal = len(jobs)
	r.s.note("confirming the %d best configurations: %d more run(s) on other workload seeds", min(c.Top, len(jobs)), len(jobs))
	r.dispatch(ctx, func() (job, bool) {
		if len(jobs) == 0 {
			return job{}, false
		}
		j := jobs[0]
		jobs = jobs[1:]
		return j, true
	})
}

// ReplicaOf is which confirmation run t is: its rank among the runs of the
// same trial, by number.
func ReplicaOf(t store.Trial, trials []store.Trial) int {
	k := 0
	for _, u := range trials {
		if u.Confirms != nil && *u.Confirms == *t.Confirms && u.Number <= t.Number {
			k++
		}
	}
	return k
}

// confirmCandidates are the top configurations by the objective among the
// search trials, best first, one trial per configuration.
func confirmCandidates(trials []store.Trial, study *spec.Spec, top int) []store.Trial {
	type cand struct {
		t store.Trial
		v float64
	}
	var cs []cand
	seen := map[string]bool{}
	for _, t := range trials {
		if t.Confirms != nil || t.Status != measure.StatusOK || t.Unreadable != "" || seen[t.Settings.Key()] {
			continue
		}
		v, ok := recommend.TrialValue(recommend.PointsOf(t.Number, t.Settings, study.Hardware.PricePerGPUHour, t.LoadPoints), study.Tuner.Objective, study.SLO)
		if !ok {
			continue
		}
		seen[t.Settings.Key()] = true
		cs = append(cs, cand{t, v})
	}
	sort.SliceStable(cs, func(i, j int) bool { return study.Tuner.Objective.Better(cs[i].v, cs[j].v) })
	var out []store.Trial
	for i := 0; i < len(cs) && i < top; i++ {
		out = append(out, cs[i].t)
	}
	return out
}

// orderer keeps an ordered study's trials in start order: each finishes
// after the one started before it, and the sampler is told their results
// only when settle says so.
type orderer struct {
	mu       sync.Mutex
	cond     *sync.Cond
	next     int                  // sequence number of the next job to start (the dispatcher's)
	finished int                  // jobs 0..finished-1 have finished
	told     int                  // jobs 0..told-1 have been told to the sampler
	held     map[int]func() error // tells waiting for settle, by sequence
}

func (o *orderer) init() {
	o.cond = sync.NewCond(&o.mu)
	o.held = map[int]func() error{}
}

// wait blocks until every job started before seq has finished.
func (o *orderer) wait(seq int) {
	o.mu.Lock()
	for o.finished < seq {
		o.cond.Wait()
	}
	o.mu.Unlock()
}

// done marks the next job in order finished.
func (o *orderer) done() {
	o.mu.Lock()
	o.finished++
	o.cond.Broadcast()
	o.mu.Unlock()
}

// hold keeps the tell of job seq until settle.
func (o *orderer) hold(seq int, tell func() error) {
	o.mu.Lock()
	o.held[seq] = tell
	o.mu.Unlock()
}

// settle waits until jobs 0..upto have finished and tells the sampler their
// results in order. Every job below next finishes (the dispatcher numbers a
// job only once it started), so the wait ends.
func (o *orderer) settle(upto int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.finished <= upto {
		o.cond.Wait()
	}
	for ; o.told <= upto; o.told++ {
		if tell := o.held[o.told]; tell != nil {
			delete(o.held, o.told)
			if err := tell(); err != nil {
				return err
			}
		}
	}
	return nil
}

package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
)

// Evaluator runs one trial: trial.Run behind launcher and precheck set-up in
// production (TrialRunner), the simulator in virtual time in benchmarks.
type Evaluator interface {
	Evaluate(ctx context.Context, number int, settings space.Settings, gpus []int) trial.Result
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

// Study runs a tuning study end to end. Set the fields, then call Run once.
type Study struct {
	Spec   *Spec
	Store  *store.Store
	Eval   Evaluator
	Resume bool // continue a stored study: re-run interrupted trials, replay finished ones

	// Reap, when set, runs once the study is created or resumed and before
	// its first trial, to remove what an earlier run of it left behind
	// (the Docker containers of a killed run: see ReapStudy). Its error
	// stops the study before anything is launched.
	Reap func(ctx context.Context) error

	OnStart  func(number int, settings space.Settings, gpus []int) // optional, from the dispatcher
	OnFinish func(TrialReport)                                     // optional, serialised
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

// Run executes the study: it creates (or resumes) the stored study, runs
// trials until the spec's count is reached, the grid is exhausted, or ctx
// ends, and waits for every trial it started. A cancelled study leaves its
// running trials marked interrupted, to be re-run by a later resume.
func (s *Study) Run(ctx context.Context) (Outcome, error) {
	var out Outcome
	sp := s.Spec
	sampler, err := NewSampler(sp.Tuner.Sampler, sp.Space, sp.Tuner.Seed)
	if err != nil {
		return out, err
	}
	st, err := s.Store.GetStudy(ctx, sp.Name)
	switch {
	case err == nil && !s.Resume:
		return out, fmt.Errorf("%q: %w", sp.Name, ErrStudyExists)
	case err == nil:
		if st, err = s.Store.ResumeStudy(ctx, sp.Name); err != nil {
			return out, fmt.Errorf("resume: %w", err)
		}
	case errors.Is(err, store.ErrNotFound):
		st, err = s.Store.CreateStudy(ctx, store.Study{Name: sp.Name, Spec: sp.Text, Seed: uint64(sp.Tuner.Seed), Status: store.StudyRunning})
		if err != nil {
			return out, fmt.Errorf("create study: %w", err)
		}
	case err != nil:
		return out, fmt.Errorf("load study: %w", err)
	}
	out.StudyID = st.ID
	if s.Reap != nil {
		if err := s.Reap(ctx); err != nil {
			_ = s.Store.FinishStudy(context.WithoutCancel(ctx), st.ID, store.StudyFailed)
			return out, fmt.Errorf("remove leftovers of an earlier run: %w", err)
		}
	}

	// Resume: leftovers of a killed run are interrupted and re-run first;
	// finished trials teach the sampler.
	var queue []job
	done := 0
	best := (*float64)(nil)
	if s.Resume {
		if _, err := s.Store.InterruptRunning(ctx, st.ID); err != nil {
			return out, fmt.Errorf("resume: %w", err)
		}
		trials, err := s.Store.Trials(ctx, st.ID)
		if err != nil {
			return out, fmt.Errorf("resume: %w", err)
		}
		for _, t := range trials {
			switch t.Status {
			case store.TrialInterrupted, store.TrialRunning:
				// Not to be proposed again while it re-runs.
				sampler.Reserve(t.Settings)
				queue = append(queue, job{number: t.Number, settings: t.Settings, replay: true})
				out.Rerun = append(out.Rerun, t.Number)
				continue
			}
			done++
			failed := t.Objective == nil
			v := 0.0
			if !failed {
				v = *t.Objective
				if best == nil || sp.Tuner.Objective.better(v, *best) {
					best = &v
				}
			}
			if err := sampler.Replay(t.Settings, sp.Tuner.Objective.score(v), failed); err != nil {
				return out, fmt.Errorf("resume: replay trial %d: %w", t.Number, err)
			}
		}
	}
	next, err := s.Store.NextTrialNumber(ctx, st.ID)
	if err != nil {
		return out, fmt.Errorf("next trial number: %w", err)
	}

	pool, parallel := s.gpuPlan()
	sem := make(chan struct{}, parallel)
	var (
		mu      sync.Mutex // guards done, best, out, firstErr and OnFinish calls
		wg      sync.WaitGroup
		firstEr error
	)
	total := sp.Tuner.Trials
	started := done
	finish := func(j job, gpus []int, res trial.Result) {
		defer wg.Done()
		defer func() { <-sem }()
		defer pool.Release(gpus)
		if res.Status == trial.StatusInterrupted {
			if ctx.Err() != nil {
				// The study is stopping: keep the load levels this trial
				// finished, marked interrupted; --resume re-runs it in place
				// (StartTrial clears them then). The sampler is not told.
				if res.Finished.IsZero() {
					res.Finished = time.Now()
				}
				err := s.Store.FinishTrial(context.WithoutCancel(ctx), storeResult(st.ID, j.number, res, nil))
				mu.Lock()
				if err != nil && firstEr == nil {
					firstEr = fmt.Errorf("trial %d: save interrupted trial: %w", j.number, err)
				}
				mu.Unlock()
				return
			}
			// Interrupted without the study being stopped: count it as failed
			// rather than leave it running.
			res = trial.Failed(trial.FailLaunchError, "trial interrupted")
		}
		pts := PointsOf(j.number, j.settings, sp.Hardware.PricePerGPUHour, res.Levels)
		var value *float64
		if res.Status == trial.StatusOK {
			if v, ok := TrialValue(pts, sp.Tuner.Objective, sp.SLO); ok {
				value = &v
			}
		}
		err := s.Store.FinishTrial(context.WithoutCancel(ctx), storeResult(st.ID, j.number, res, value))
		var tellErr error
		score := sp.Tuner.Objective.score(deref(value))
		if j.replay {
			tellErr = sampler.Replay(j.settings, score, value == nil)
		} else {
			tellErr = sampler.Tell(j.askID, score, value == nil)
		}
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			err = tellErr
		}
		if err != nil && firstEr == nil {
			firstEr = fmt.Errorf("trial %d: %w", j.number, err)
		}
		done++
		if res.Status == trial.StatusOK {
			out.Completed++
		} else {
			out.Failed++
		}
		if value != nil && (best == nil || sp.Tuner.Objective.better(*value, *best)) {
			v := *value
			best = &v
		}
		if s.OnFinish != nil {
			s.OnFinish(TrialReport{Number: j.number, Settings: j.settings, GPUs: gpus, Result: res,
				Value: value, Best: best, Done: done, Total: total})
		}
	}

	fail := func(err error) {
		mu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		mu.Unlock()
	}
	for started < total && ctx.Err() == nil {
		// Take a slot before asking, so the sampler has seen every result
		// it could have (with one slot: every earlier trial).
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		mu.Lock()
		stop := firstEr != nil || ctx.Err() != nil
		mu.Unlock()
		if stop {
			break
		}
		var j job
		if len(queue) > 0 {
			j, queue = queue[0], queue[1:]
		} else {
			p, err := sampler.Ask()
			if errors.Is(err, ErrExhausted) {
				break
			}
			if err != nil {
				fail(err)
				break
			}
			j = job{number: next, settings: p.Settings, askID: p.ID}
			next++
		}
		need := GPUsFor(j.settings)
		var gpus []int
		var early *trial.Result
		if need > pool.total {
			// More GPUs than the study has: a failed trial, not a stop.
			r := trial.Failed(trial.FailInfeasible, fmt.Sprintf("needs %d GPUs, the study has %d on one host", need, pool.total))
			early = &r
		} else if gpus, err = pool.Acquire(ctx, need); err != nil {
			break // cancelled
		}
		if err := s.Store.StartTrial(ctx, st.ID, j.number, j.settings, gpus); err != nil {
			pool.Release(gpus)
			fail(fmt.Errorf("trial %d: %w", j.number, err))
			break
		}
		started++
		wg.Add(1)
		if early != nil {
			finish(j, gpus, *early)
			continue
		}
		if s.OnStart != nil {
			s.OnStart(j.number, j.settings, gpus)
		}
		go func(j job, gpus []int) {
			finish(j, gpus, s.Eval.Evaluate(ctx, j.number, j.settings, gpus))
		}(j, gpus)
	}
	wg.Wait()

	status := store.StudyFinished
	if ctx.Err() != nil {
		status = store.StudyInterrupted
		if _, err := s.Store.InterruptRunning(context.WithoutCancel(ctx), st.ID); err != nil && firstEr == nil {
			firstEr = err
		}
	} else if firstEr != nil {
		status = store.StudyFailed
	}
	if err := s.Store.FinishStudy(context.WithoutCancel(ctx), st.ID, status); err != nil && firstEr == nil {
		firstEr = err
	}
	if trials, err := s.Store.Trials(context.WithoutCancel(ctx), st.ID); err == nil {
		out.Trials = len(trials)
	}
	if firstEr != nil {
		return out, firstEr
	}
	return out, ctx.Err()
}

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// gpuPlan returns the GPU pool and how many trials may run at once. Without
// listed GPUs, trials run one at a time on indices 0..n-1.
func (s *Study) gpuPlan() (*gpuPool, int) {
	gpus := s.Spec.Launcher.GPUs
	if len(gpus) == 0 {
		ids := make([]int, 64)
		for i := range ids {
			ids[i] = i
		}
		return newGPUPool(ids, nil), 1
	}
	var group func(int) int
	if len(s.Spec.Launcher.Hosts) > 0 {
		group = func(g int) int { h, _ := s.Spec.Launcher.HostOf(g); return h }
	}
	parallel := len(gpus) / max(minGPUs(s.Spec.Space), 1)
	if p := s.Spec.Tuner.Parallel; p > 0 && p < parallel {
		parallel = p
	}
	return newGPUPool(gpus, group), max(parallel, 1)
}

// storeResult converts a trial result into the store's one-transaction row.
func storeResult(studyID int64, number int, res trial.Result, value *float64) store.TrialResult {
	tr := store.TrialResult{
		StudyID: studyID, Number: number,
		Status: string(res.Status), Failure: res.Failure, FailureMsg: res.Message,
		LogTail: res.LogTail, Objective: value, Finished: res.Finished,
		Requests: map[string][]bench.Record{},
	}
	for _, lv := range res.Levels {
		tr.LoadPoints = append(tr.LoadPoints, store.LoadPoint{Level: lv.Label, Kind: lv.Kind, Value: lv.Value, Summary: lv.Summary})
		tr.Requests[lv.Label] = lv.Records
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
func PointsOf(number int, settings space.Settings, price float64, levels []trial.Level) []Point {
	pts := make([]Point, 0, len(levels))
	for i, lv := range levels {
		pts = append(pts, Point{Trial: number, Level: i, Settings: settings, GPUs: GPUsFor(settings),
			Price: price, Load: lv.Load, Summary: lv.Summary})
	}
	return pts
}

// StoredPoints returns the (trial, load level) points of stored trials with
// status ok.
func StoredPoints(trials []store.Trial, price float64) []Point {
	var pts []Point
	for _, t := range trials {
		if t.Status != store.TrialOK {
			continue
		}
		for i, lp := range t.LoadPoints {
			load := bench.Load{MaxConcurrency: int(lp.Value)}
			if lp.Kind == "rate" {
				load = bench.Load{Rate: lp.Value, MaxConcurrency: lp.Summary.MaxConcurrency}
			}
			pts = append(pts, Point{Trial: t.Number, Level: i, Settings: t.Settings, GPUs: GPUsFor(t.Settings),
				Price: price, Load: load, Summary: lp.Summary})
		}
	}
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].Trial != pts[j].Trial {
			return pts[i].Trial < pts[j].Trial
		}
		return pts[i].Level < pts[j].Level
	})
	return pts
}

// Elapsed is a helper for progress lines: a trial's wall time.
func Elapsed(r trial.Result) time.Duration { return r.Finished.Sub(r.Started).Round(time.Millisecond) }

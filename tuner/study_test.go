package tuner

import (
	"github.com/servetune/servetune/internal/testspec"
	"math"

	"context"
	"errors"
	"fmt"
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/launcher"
	_ "github.com/servetune/servetune/launcher/kinds" // the launcher kinds of the specs these tests parse

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
)

// studySpec is a small study evaluated by the simulator in virtual time.
var studySpec = testspec.Virtual

func openStore(t *testing.T) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	study, _, err := ParseSpec([]byte(src), "vt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return study
}

// mustLauncher builds the launcher of study's launcher section.
func mustLauncher(t *testing.T, study *spec.Spec) launcher.Launcher {
	t.Helper()
	l, err := NewLauncher(study)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestStudyRunVirtual(t *testing.T) {
	ctx := context.Background()
	study := mustSpec(t, studySpec)
	db := openStore(t)
	var reports []TrialReport
	s := &Study{Spec: study, Store: db, Eval: &TrialRunner{Spec: study, Memory: memory.Model{}},
		OnFinish: func(r TrialReport) { reports = append(reports, r) }}
	out, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Trials != 6 || len(reports) != 6 {
		t.Fatalf("outcome %+v, %d reports", out, len(reports))
	}
	trials, err := db.Trials(ctx, out.StudyID)
	if err != nil {
		t.Fatal(err)
	}
	oom := 0
	for i, tr := range trials {
		if tr.Number != i {
			t.Errorf("trial %d has number %d", i, tr.Number)
		}
		switch tr.Status {
		case measure.StatusOK:
			if len(tr.LoadPoints) != 2 || tr.LoadPoints[1].Summary.Completed == 0 {
				t.Errorf("trial %d: load points %+v", tr.Number, tr.LoadPoints)
			}
		case measure.StatusFailed:
			// 0.1 of an H100 cannot hold the 8B weights: the memory precheck
			// rejects it with vLLM's start-up error, launching nothing.
			if tr.Failure != engine.FailInfeasible || !strings.Contains(tr.FailureMsg, "memory") {
				t.Errorf("trial %d failed as %s: %s", tr.Number, tr.Failure, tr.FailureMsg)
			}
			oom++
		default:
			t.Errorf("trial %d status %s", tr.Number, tr.Status)
		}
	}
	if oom == 0 || oom == len(trials) {
		t.Errorf("%d of %d trials out of memory; want some and not all", oom, len(trials))
	}
	pts := recommend.StoredPoints(trials, study.Hardware.PricePerGPUHour)
	if len(recommend.Front(pts, study.Objectives)) == 0 {
		t.Error("empty Pareto front")
	}
	if _, err := recommend.Recommend(pts, study.Objectives, study.SLO, recommend.PreferCost); err != nil {
		t.Error(err)
	}
	// The same study again is refused without resume.
	if _, err := (&Study{Spec: study, Store: db, Eval: &TrialRunner{Spec: study, Memory: memory.Model{}}}).Run(ctx); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("rerun without resume: %v", err)
	}
}

// TestStudyResume leaves a trial running in the store, as a killed study
// does, and checks that resume re-runs it in place and completes the count.
func TestStudyResume(t *testing.T) {
	ctx := context.Background()
	study := mustSpec(t, strings.Replace(studySpec, "trials: 6", "trials: 4", 1))
	db := openStore(t)
	st, err := db.CreateStudy(ctx, store.Study{Name: study.Name, Spec: study.Text, Seed: 3, Status: store.StudyRunning})
	if err != nil {
		t.Fatal(err)
	}
	done := space.Settings{"tensor_parallel": 1, "max_running_requests": 64, "gpu_memory_fraction": 0.9}
	left := space.Settings{"tensor_parallel": 2, "max_running_requests": 8, "gpu_memory_fraction": 0.9}
	if err := db.StartTrial(ctx, st.ID, 0, done, []int{0}); err != nil {
		t.Fatal(err)
	}
	v := 1.5
	if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusOK, Objective: &v}); err != nil {
		t.Fatal(err)
	}
	if err := db.StartTrial(ctx, st.ID, 1, left, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	s := &Study{Spec: study, Store: db, Eval: &TrialRunner{Spec: study, Memory: memory.Model{}}, Resume: true}
	out, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rerun) != 1 || out.Rerun[0] != 1 {
		t.Errorf("re-run %v, want [1]", out.Rerun)
	}
	trials, _ := db.Trials(ctx, st.ID)
	if len(trials) != 4 {
		t.Fatalf("%d trials, want 4", len(trials))
	}
	for i, tr := range trials {
		if tr.Number != i || tr.Status == measure.StatusRunning || tr.Status == measure.StatusInterrupted {
			t.Errorf("trial %d: number %d status %s", i, tr.Number, tr.Status)
		}
	}
	if tp, _ := trials[1].Settings.Int("tensor_parallel"); tp != 2 || trials[1].Status != measure.StatusOK {
		t.Errorf("re-run trial 1 = %v %s, want the interrupted settings measured", trials[1].Settings, trials[1].Status)
	}
}

// gate is an Evaluator that holds each trial until two run at once, to see
// that TP1 trials share the two GPUs.
type gate struct {
	mu      sync.Mutex
	running int
	maxSeen int
	gpus    map[int]int // GPU -> trials holding it now
	overlap bool
	both    chan struct{}
}

func (g *gate) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	g.mu.Lock()
	g.running++
	g.maxSeen = max(g.maxSeen, g.running)
	for _, id := range gpus {
		if g.gpus[id]++; g.gpus[id] > 1 {
			g.overlap = true
		}
	}
	if g.running == 2 {
		select {
		case <-g.both:
		default:
			close(g.both)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.both:
	case <-time.After(5 * time.Second):
	}
	g.mu.Lock()
	g.running--
	for _, id := range gpus {
		g.gpus[id]--
	}
	g.mu.Unlock()
	return trial.Failed(engine.FailCrash, "test")
}

func TestStudyParallelDisjointGPUs(t *testing.T) {
	src := strings.Replace(studySpec, "tensor_parallel: [1, 2]", "tensor_parallel: [1]", 1)
	study := mustSpec(t, src)
	g := &gate{gpus: map[int]int{}, both: make(chan struct{})}
	out, err := (&Study{Spec: study, Store: openStore(t), Eval: g}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Trials != 6 || out.Failed != 6 {
		t.Errorf("outcome %+v", out)
	}
	if g.maxSeen != 2 || g.overlap {
		t.Errorf("max parallel %d (want 2), GPU shared: %v", g.maxSeen, g.overlap)
	}
}

func TestVirtualCapacity(t *testing.T) {
	src := strings.Replace(studySpec, "load: {concurrency: [4, 16]}", "load: {capacity: true, max_concurrency: 64}", 1)
	study := mustSpec(t, src)
	res := (&TrialRunner{Spec: study, Memory: memory.Model{}}).Evaluate(context.Background(), 0,
		space.Settings{"tensor_parallel": 1, "max_running_requests": 64, "gpu_memory_fraction": 0.9}, nil)
	if res.Status != measure.StatusOK || len(res.Levels) < 2 {
		t.Fatalf("%s/%s %s, %d levels", res.Status, res.Failure, res.Message, len(res.Levels))
	}
	if got := res.Levels[0].Load.MaxConcurrency; got != 1 {
		t.Errorf("capacity search starts at concurrency %d", got)
	}
}

// TestCapacityOnly: a study that reads only the capacity finds the same
// one, probe by probe, with the probes that miss cut short; where no rate
// meets the SLO, the lowest, whose figures say why, goes to its end.
func TestCapacityOnly(t *testing.T) {
	for _, slo := range []string{"ttft_p99_ms: 2000", "ttft_p99_ms: 20"} {
		src := strings.Replace(studySpec, "load: {concurrency: [4, 16]}", "load: {capacity: rate, probe_span: 20s}", 1)
		src = strings.Replace(src, "input: 256, output: 32", "input: 2048, output: 128", 1)
		src = strings.Replace(src, "ttft_p99_ms: 2000", slo, 1)
		study := mustSpec(t, src)
		set := space.Settings{"tensor_parallel": 1, "max_running_requests": 64, "gpu_memory_fraction": 0.9}
		run := func(only bool) trial.Result {
			res := (&TrialRunner{Spec: study, Memory: memory.Model{}, CapacityOnly: only}).Evaluate(context.Background(), 0, set, nil)
			if res.Status != measure.StatusOK {
				t.Fatalf("%s: %s/%s %s", slo, res.Status, res.Failure, res.Message)
			}
			return res
		}
		whole, cut := run(false), run(true)
		if len(cut.Levels) != len(whole.Levels) {
			t.Fatalf("%s: %d probes cut short, %d whole", slo, len(cut.Levels), len(whole.Levels))
		}
		shorter, anyMet := 0, false
		for i, w := range whole.Levels {
			c := cut.Levels[i]
			wm := study.SLO.Met(recommend.Point{GPUs: 1, Level: w}) && !w.Summary.Unsustained
			cm := study.SLO.Met(recommend.Point{GPUs: 1, Level: c}) && !c.Summary.Unsustained
			if c.Load != w.Load || cm != wm {
				t.Fatalf("%s: probe %d: %v met %v, whole %v met %v", slo, i, c.Load, cm, w.Load, wm)
			}
			anyMet = anyMet || wm
			// The same figures, to the nanosecond of each time the
			// engine's clock, started elsewhere after a probe cut short,
			// may round.
			if (wm || !anyMet && i == len(whole.Levels)-1) &&
				(math.Abs(c.Summary.TTFT.P99-w.Summary.TTFT.P99) > 1e-5 || c.Summary.Completed != w.Summary.Completed) {
				t.Errorf("%s: probe %d (met %v) has TTFT %+v, whole %+v", slo, i, wm, c.Summary.TTFT, w.Summary.TTFT)
			}
			if c.Summary.Errors[string(measure.ErrCancelled)] > 0 {
				shorter++
			}
		}
		if shorter == 0 {
			t.Errorf("%s: no probe was cut short", slo)
		}
		if !anyMet && len(whole.Levels) < 5 {
			t.Errorf("%s: no probe met the SLO in %d probes", slo, len(whole.Levels))
		}
	}
}

func TestStoreResultGPUSamples(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	st, err := db.CreateStudy(ctx, store.Study{Name: "g", Spec: "x", Status: store.StudyRunning})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StartTrial(ctx, st.ID, 0, space.Settings{"tensor_parallel": 1}, []int{0}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	res := trial.Result{Status: measure.StatusOK, Started: t0, Finished: t0.Add(2 * time.Second), GPU: []gpu.Sample{
		{Time: t0, GPU: 0, PowerW: 100, EnergyMilliJ: 5_000_000},
		{Time: t0.Add(time.Second), GPU: 0, PowerW: 300, MemUsed: 1 << 30, EnergyMilliJ: 5_300_000},
	}}
	sr := storeResult(0, res, nil)
	sr.StudyID = st.ID
	if err := db.FinishTrial(ctx, sr); err != nil {
		t.Fatal(err)
	}
	tr, err := db.Trial(ctx, st.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.GPUSamples(ctx, tr.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("%d samples, %v", len(got), err)
	}
	if !got[1].Time.Equal(t0.Add(time.Second)) || got[1].EnergyMilliJ-got[0].EnergyMilliJ != 300_000 || got[1].MemUsed != 1<<30 {
		t.Errorf("samples %+v", got)
	}
}

// evalFunc adapts a function to Evaluator.
type evalFunc func(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result

func (f evalFunc) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	return f(ctx, number, set, gpus)
}

// reaping is a launcher that can reap (launcher.Capabilities.Reap).
type reaping struct {
	launcher.Launcher
	reap func() error
}

func (r reaping) Capabilities() launcher.Capabilities {
	c := r.Launcher.Capabilities()
	c.Reap = func(context.Context, string, func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
		return nil, r.reap()
	}
	return c
}

// TestStudyReap: a launcher that can reap reaps before the first trial, on
// a new study and on a resume, and after the last; an error before stops
// the study with nothing launched.
func TestStudyReap(t *testing.T) {
	study := mustSpec(t, strings.Replace(studySpec, "trials: 6,", "trials: 2, parallel: 1,", 1))
	db := openStore(t)
	var (
		mu     sync.Mutex
		events []string
	)
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	eval := evalFunc(func(ctx context.Context, n int, _ space.Settings, _ []int) trial.Result {
		note(fmt.Sprintf("trial %d", n))
		return trial.Failed(engine.FailCrash, "test")
	})
	l := reaping{mustLauncher(t, study), func() error { note("reap"); return nil }}
	for _, resume := range []bool{false, true} {
		if _, err := (&Study{Spec: study, Launcher: l, Store: db, Eval: eval, Resume: resume}).Run(t.Context()); err != nil {
			t.Fatalf("resume=%v: %v", resume, err)
		}
	}
	if got := strings.Join(events, ","); got != "reap,trial 0,trial 1,reap,reap,reap" {
		t.Errorf("events %s", got)
	}

	other := mustSpec(t, strings.Replace(studySpec, "name: vt", "name: vt2", 1))
	boom := errors.New("daemon unreachable")
	l = reaping{mustLauncher(t, other), func() error { return boom }}
	_, err := (&Study{Spec: other, Launcher: l, Store: db, Eval: eval}).Run(t.Context())
	if !errors.Is(err, boom) || len(events) != 6 {
		t.Errorf("err %v, events %v", err, events)
	}
}

// interruptAfterLevel measures one level, then stops the study (as Ctrl-C
// does) and reports the trial interrupted with that level.
type interruptAfterLevel struct{ stop context.CancelFunc }

func (e interruptAfterLevel) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	e.stop()
	<-ctx.Done()
	return trial.Result{Status: measure.StatusInterrupted, Started: time.Now(), Levels: []measure.Level{{
		Label: "concurrency=8", Kind: "concurrency", Value: 8, Load: measure.Load{MaxConcurrency: 8},
		Summary: measure.Summary{Completed: 16, OutputThroughput: 900},
		Records: []measure.Record{{Index: 0, OutputTokens: 128}},
	}}}
}

// TestStudyInterruptSavesMeasuredLevels: the levels a trial finished before
// the study was stopped are stored with it, marked interrupted.
func TestStudyInterruptSavesMeasuredLevels(t *testing.T) {
	study := mustSpec(t, strings.Replace(studySpec, "trials: 6", "trials: 1", 1))
	db := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := (&Study{Spec: study, Store: db, Eval: interruptAfterLevel{cancel}}).Run(ctx); err == nil {
		t.Log("Run returned no error after the interrupt")
	}
	st, err := db.GetStudy(context.Background(), study.Name)
	if err != nil {
		t.Fatal(err)
	}
	trials, _ := db.Trials(context.Background(), st.ID)
	if len(trials) != 1 || trials[0].Status != measure.StatusInterrupted || len(trials[0].LoadPoints) != 1 ||
		trials[0].LoadPoints[0].Summary.Completed != 16 {
		t.Fatalf("stored trials after the interrupt: %+v", trials)
	}
}

// TestStudyMinObjective: with a "min" objective the best trial is the one
// with the lowest value, in the reports and after a resume.
func TestStudyMinObjective(t *testing.T) {
	src := strings.Replace(studySpec, "tuner: {sampler: tpe, trials: 6, seed: 3, confirm: false}",
		"tuner: {sampler: random, trials: 3, seed: 3, parallel: 1, objective: min ttft_p99, confirm: false}", 1)
	study := mustSpec(t, src)
	ttft := []float64{300, 100, 200, 400, 50}
	eval := evalFunc(func(ctx context.Context, n int, _ space.Settings, _ []int) trial.Result {
		return trial.Result{Status: measure.StatusOK, Levels: []measure.Level{{
			Label: "concurrency=4", Kind: "concurrency", Value: 4, Load: measure.Load{MaxConcurrency: 4},
			Summary: measure.Summary{Completed: 10, OutputThroughput: 100,
				TTFT: measure.Stats{N: 10, Mean: ttft[n], P50: ttft[n], P99: ttft[n]}},
		}}}
	})
	db := openStore(t)
	var bests []float64
	onFinish := func(r TrialReport) {
		if r.Best == nil {
			t.Fatalf("trial %d: no best", r.Number)
		}
		bests = append(bests, *r.Best)
	}
	if _, err := (&Study{Spec: study, Store: db, Eval: eval, OnFinish: onFinish}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bests) != "[300 100 100]" {
		t.Errorf("best so far %v, want [300 100 100]", bests)
	}
	// Resume with two more trials: the stored best (100) carries over.
	sp2 := mustSpec(t, strings.Replace(src, "trials: 3", "trials: 5", 1))
	bests = nil
	if _, err := (&Study{Spec: sp2, Store: db, Eval: eval, OnFinish: onFinish, Resume: true}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bests) != "[100 50]" {
		t.Errorf("best so far after resume %v, want [100 50]", bests)
	}
}

// TestStudyResumeGridNoDuplicate: on a resume with parallel trials, the
// interrupted trial re-runs while the grid proposes the next points; the
// grid must not propose the interrupted trial's settings a second time.
func TestStudyResumeGridNoDuplicate(t *testing.T) {
	src := strings.Replace(studySpec, "tensor_parallel: [1, 2]", "tensor_parallel: [1]", 1)
	src = strings.Replace(src, "tuner: {sampler: tpe, trials: 6, seed: 3, confirm: false}", "tuner: {sampler: grid, trials: 4, seed: 3, confirm: false}", 1)
	study := mustSpec(t, src)
	ctx := context.Background()
	db := openStore(t)
	st, err := db.CreateStudy(ctx, store.Study{Name: study.Name, Spec: study.Text, Seed: 3, Status: store.StudyRunning})
	if err != nil {
		t.Fatal(err)
	}
	// What the killed run did: the grid's first point finished, its second
	// was in flight.
	g, err := sampler.New(spec.SamplerGrid, study.Space, study.Tuner.Seed)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := g.Ask()
	p1, _ := g.Ask()
	if err := db.StartTrial(ctx, st.ID, 0, p0.Settings, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusFailed, Failure: engine.FailCrash}); err != nil {
		t.Fatal(err)
	}
	if err := db.StartTrial(ctx, st.ID, 1, p1.Settings, []int{1}); err != nil {
		t.Fatal(err)
	}
	// The re-run of trial 1 holds until trial 2 has started, so the grid
	// proposes trial 2 while trial 1 runs.
	started2 := make(chan struct{})
	eval := evalFunc(func(ctx context.Context, n int, _ space.Settings, _ []int) trial.Result {
		switch n {
		case 1:
			select {
			case <-started2:
			case <-time.After(5 * time.Second):
			}
		case 2:
			close(started2)
		}
		return trial.Failed(engine.FailCrash, "test")
	})
	if _, err := (&Study{Spec: study, Store: db, Eval: eval, Resume: true}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	trials, err := db.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, tr := range trials {
		k := tr.Settings.Key()
		if prev, dup := seen[k]; dup {
			t.Errorf("trials %d and %d both measured %v", prev, tr.Number, tr.Settings)
		}
		seen[k] = tr.Number
	}
	if len(trials) != 4 {
		t.Errorf("%d trials, want 4", len(trials))
	}
}

// TestSeededStudiesAgree: two seeded studies with parallel trials, run at
// once in one process, propose the same settings in the same order and
// measure the same figures: the sampler owns its random source (no global
// state, no go:debug setting) and a virtual study tells the sampler in
// trial order whichever trial ends first.
func TestSeededStudiesAgree(t *testing.T) {
	src := strings.Replace(studySpec, "max_running_requests: [8, 64]", "max_running_requests: {int: [8, 256], log: true}", 1)
	src = strings.Replace(src, "gpu_memory_fraction: [0.1, 0.9]", "gpu_memory_fraction: {float: [0.5, 0.95]}", 1)
	src = strings.Replace(src, "trials: 6,", "trials: 16,", 1)
	run := func() []store.Trial {
		study := mustSpec(t, src)
		db, err := store.Open(context.Background(), store.Memory)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer db.Close()
		out, err := (&Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(context.Background())
		if err != nil {
			t.Error(err)
			return nil
		}
		trials, err := db.Trials(context.Background(), out.StudyID)
		if err != nil {
			t.Error(err)
		}
		return trials
	}
	var a, b []store.Trial
	var wg sync.WaitGroup
	wg.Go(func() { a = run() })
	wg.Go(func() { b = run() })
	wg.Wait()
	if len(a) != 16 || len(b) != 16 {
		t.Fatalf("trials: %d and %d, want 16", len(a), len(b))
	}
	for i := range a {
		if a[i].Settings.Key() != b[i].Settings.Key() {
			t.Fatalf("trial %d: %s vs %s", i, a[i].Settings.Key(), b[i].Settings.Key())
		}
		if fmt.Sprint(a[i].Objective) != fmt.Sprint(b[i].Objective) && (a[i].Objective == nil || b[i].Objective == nil || *a[i].Objective != *b[i].Objective) {
			t.Errorf("trial %d: objective %v vs %v", i, a[i].Objective, b[i].Objective)
		}
	}
}

// TestCapacityByRate runs a virtual study whose trials search the highest
// Poisson rate meeting the SLOs: every level is a rate, the SLOs hold at
// the trial's value and not at the next probe above it, and a larger
// running-request limit carries more load.
func TestCapacityByRate(t *testing.T) {
	ctx := context.Background()
	study := mustSpec(t, `name: cap
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [4, 64]}
workload:
  dataset: {kind: random, input: 512, output: 64}
  load: {capacity: rate, start_rate: 4, max_rate: 500, rate_precision: 0.05}
  requests_per_level: 150
  warmup: 0
slo: {ttft_p99_ms: 400, tpot_p99_ms: 30}
tuner: {sampler: grid, trials: 2, seed: 1, objective: max request_rate, confirm: false}
`)
	db, err := store.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, err := (&Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trials, err := db.Trials(ctx, out.StudyID)
	if err != nil {
		t.Fatal(err)
	}
	caps := map[int]float64{}
	for _, tr := range trials {
		pts := recommend.PointsOf(tr.Number, tr.Settings, 0, tr.LoadPoints)
		v, ok := recommend.TrialValue(pts, study.Tuner.Objective, study.SLO)
		if !ok {
			t.Fatalf("trial %d (%v): no level met the SLOs", tr.Number, tr.Settings)
		}
		missAbove := false
		for _, p := range pts {
			if p.Load.Rate <= 0 || p.Load.MaxConcurrency != 0 {
				t.Fatalf("trial %d: level %s is not a rate", tr.Number, p.Label)
			}
			if p.Load.Rate > v && p.Load.Rate <= v*1.06 && !study.SLO.Met(p) {
				missAbove = true
			}
		}
		if !missAbove {
			t.Errorf("trial %d: capacity %.2f req/s not bracketed within 6%% by a probe that missed", tr.Number, v)
		}
		n, _ := tr.Settings.Int("max_running_requests")
		caps[n] = v
		t.Logf("max_running_requests %d: capacity %.2f req/s after %d probes", n, v, len(pts))
	}
	if caps[64] <= caps[4] {
		t.Errorf("capacity with 64 running requests %.2f <= with 4 %.2f", caps[64], caps[4])
	}
}

// TestStudyEnqueue: configurations enqueued by the caller run first,
// count toward the trials, and teach the sampler (its proposals differ
// from them).
func TestStudyEnqueue(t *testing.T) {
	ctx := context.Background()
	study := mustSpec(t, strings.Replace(studySpec, "trials: 6", "trials: 4", 1))
	first := space.Settings{"tensor_parallel": 2, "max_running_requests": 8, "gpu_memory_fraction": 0.9}
	study.Tuner.Enqueue = []space.Settings{first, {"tensor_parallel": 3}} // the second is outside the space: skipped
	db := openStore(t)
	out, err := (&Study{Spec: study, Store: db, Eval: &TrialRunner{Spec: study, Memory: memory.Model{}}}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trials, err := db.Trials(ctx, out.StudyID)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 4 || trials[0].Settings.Key() != first.Key() {
		t.Fatalf("%d trials, the first %v; want 4 starting with %v", len(trials), trials[0].Settings, first)
	}
	for _, tr := range trials[1:] {
		if tr.Settings.Key() == first.Key() {
			t.Errorf("trial %d repeats the enqueued configuration", tr.Number)
		}
	}
}

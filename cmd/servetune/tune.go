package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/ui"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/term"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// studyDBDefault is the database the study commands use without --db:
// $SERVETUNE_DB, else .servetune/servetune.db (an ignored directory).
func studyDBDefault() string {
	if p := os.Getenv("SERVETUNE_DB"); p != "" {
		return p
	}
	return filepath.Join(".servetune", "servetune.db")
}

// tuneOptions are the flags of `servetune tune`.
type tuneOptions struct {
	db        string
	resume    bool
	forceSpec bool
	fresh     bool
	ui        string // serve the live dashboard on this address
	dryRun    bool
}

func newTuneCmd() *cobra.Command {
	var o tuneOptions
	cmd := &cobra.Command{
		Use:   "tune STUDY.yaml",
		Short: "Run a tuning study: propose settings, launch, measure, store, recommend",
		Long: `Run the study a spec describes (docs/spec.md; examples/quickstart.yaml). Every
trial is stored in the SQLite database; a study killed at any moment continues
with --resume (the trial in flight is re-run). The spec is validated, and what
would make every trial fail (a missing image, a model the simulator does not
know, a space where nothing fits in memory) is checked, before anything is
launched. One process owns a study at a time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			study, l, err := tuner.ParseSpecFile(args[0])
			if err != nil {
				return usageError(err)
			}
			if o.resume && o.fresh {
				return usageErrorf("--resume and --fresh exclude each other")
			}
			if o.dryRun {
				return runDryRun(cmd.Context(), study, cmd.OutOrStdout())
			}
			return runTune(cmd.Context(), study, l, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.db, "db", studyDBDefault(), "SQLite database of studies (env SERVETUNE_DB)")
	cmd.Flags().BoolVar(&o.resume, "resume", false, "continue a stored study: re-run interrupted trials, keep finished ones")
	cmd.Flags().BoolVar(&o.forceSpec, "force-spec", false, "with --resume: accept a changed spec whose trials stay comparable (not model, GPU, engine or workload)")
	cmd.Flags().BoolVar(&o.fresh, "fresh", false, "delete the stored study of this name first (refused while a run owns it)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the simulator's ranking of the space (top 10, predicted figures) and the predicted infeasible share; launch nothing, store nothing")
	cmd.Flags().StringVar(&o.ui, "ui", "", "serve the live dashboard on this address while the study runs, e.g. "+defaultUIAddr+" (read-only, loopback unless you say otherwise)")
	return cmd
}

func runTune(ctx context.Context, studySpec *spec.Spec, l launcher.Launcher, o tuneOptions, stdout, stderr io.Writer) error {
	db, err := openDBForWrite(ctx, o.db)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.fresh {
		if err := db.DeleteStudy(ctx, studySpec.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return usageError(err)
		}
	}

	study := &tuner.Study{Spec: studySpec, Launcher: l, Store: db, Memory: memory.Model{}, Resume: o.resume, ForceSpec: o.forceSpec, Tool: "servetune " + version}
	prog := &tuneProgress{w: stderr, last: map[int]int{}, bars: map[int]*progressBar{}, tty: isTerminal(stderr) && study.Parallelism() == 1,
		term: isTerminal(stderr), start: time.Now()}
	live := &ui.Live{}
	study.OnProgress = func(n int, level string, done, total int) {
		live.Progress(n, level, done, total)
		prog.level(n, level, done, total)
	}
	study.OnNote = func(msg string) { prog.printf("%s\n", msg) }
	study.OnForecast = prog.forecast
	study.OnStart = func(n int, set space.Settings, gpus []int) {
		live.Start(n, set, gpus)
		prog.printf("trial %d start  gpus=%v  %s\n", n, gpus, settingsLine(set))
	}
	clock := &studyClock{start: time.Now(), spec: studySpec, parallel: study.Parallelism()}
	study.OnFinish = func(r tuner.TrialReport) {
		live.Finish(r.Number)
		// The live line: one per finished trial, on stdout.
		fmt.Fprintln(stdout, clock.finished(r)+" "+trialLine(r, studySpec.Tuner.Objective))
	}
	if o.ui != "" {
		srv := &ui.Server{DB: db, Source: o.db, Tool: "servetune " + version, Live: live, LiveStudy: studySpec.Name, Poll: 500 * time.Millisecond}
		stop, err := startTuneUI(ctx, srv, o.ui, studySpec.Name, stderr)
		if err != nil {
			return err
		}
		defer func() {
			stop()
			fmt.Fprintf(stderr, "dashboard stopped with the run; servetune ui --db %s serves the stored study\n", o.db)
		}()
	}
	study.OnBegin = func(resumed bool, stored int) {
		how := ""
		if resumed {
			how = fmt.Sprintf(" (resumed: %d stored)", stored)
		}
		fmt.Fprintf(stderr, "study %s%s: %d trials, sampler %s (seed %d), objective %s, db %s\n",
			studySpec.Name, how, studySpec.Tuner.Trials, studySpec.Tuner.Sampler, studySpec.Tuner.Seed, studySpec.Tuner.Objective, o.db)
	}
	stopWatch := watchInterrupt(ctx, stderr, studySpec, l)
	out, err := study.Run(ctx)
	stopWatch()
	if len(out.Rerun) > 0 {
		fmt.Fprintf(stderr, "re-ran interrupted trials %v\n", out.Rerun)
	}
	var owned *store.OwnedError
	switch {
	case errors.Is(err, tuner.ErrStudyExists), errors.Is(err, spec.ErrSpecChanged), errors.Is(err, tuner.ErrPreflight),
		errors.As(err, &owned), errors.Is(err, store.ErrNotFound):
		return usageError(err)
	case ctx.Err() != nil:
		// Exit 1, not 130: the run failed to finish (docs/architecture.md's
		// exit codes), and what it measured is stored; a second Ctrl-C
		// exits 130 at once.
		return failedError(fmt.Errorf("study %s interrupted: %d trials stored (%d ok, %d failed this run; the one in flight marked interrupted); continue with: servetune tune %s --db %s --resume",
			studySpec.Name, out.Trials, out.Completed, out.Failed, studySpec.File, o.db))
	case err != nil:
		return failedError(err)
	}
	fmt.Fprintf(stdout, "study %s: %d trials (%d ok, %d failed this run)\n", studySpec.Name, out.Trials, out.Completed, out.Failed)
	if out.Stop.Stopped() {
		// The study's last word: not a line that scrolls past among the
		// trials' (store.Study.Stop keeps it for report and dashboard).
		fmt.Fprintf(stdout, "study %s: %s\n", studySpec.Name, out.Stop)
	}
	trials, err := db.Trials(ctx, out.StudyID)
	if err != nil {
		return failedError(err)
	}
	if !anyOK(trials) {
		return failedError(fmt.Errorf("study %s: no trial succeeded: %s", studySpec.Name, failureSummary(trials)))
	}
	rec, err := recommend.RecommendStudy(trials, studySpec.Terms(), recommend.PreferObjective)
	if err != nil {
		fmt.Fprintf(stdout, "no recommendation: %v\n", err)
		return nil
	}
	st, err := db.GetStudy(ctx, studySpec.Name)
	if err != nil {
		return failedError(err)
	}
	return writeRecommendation(stdout, studySpec, rec, shapeAlternative(trials, studySpec, recommend.PreferObjective, rec.Best), recommend.PreferObjective, string(studySpec.Engine), recommendedQuality(studySpec, st, trials, rec.Best.Point.Trial), engine.Version{})
}

func anyOK(trials []store.Trial) bool {
	for _, t := range trials {
		if t.Status == measure.StatusOK {
			return true
		}
	}
	return false
}

// failureSummary counts failed trials by class, each with its first
// message: "12 launch_error (model x: not in the catalog)".
func failureSummary(trials []store.Trial) string {
	counts := map[engine.Failure]int{}
	first := map[engine.Failure]string{}
	for _, t := range trials {
		if t.Status != measure.StatusFailed {
			continue
		}
		if counts[t.Failure] == 0 {
			first[t.Failure] = term.Line(t.FailureMsg)
		}
		counts[t.Failure]++
	}
	var parts []string
	for _, f := range engine.Failures {
		if n := counts[f]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n, f, first[f]))
		}
	}
	if len(parts) == 0 {
		return "none was measured"
	}
	return strings.Join(parts, "; ")
}

// watchInterrupt tells the user, once ctx is cancelled by Ctrl-C or
// SIGTERM, what the study is doing before it exits, and makes a second
// Ctrl-C exit at once (status 130) for a user who cannot wait for the
// engines to stop. The returned function ends the watch and waits for it.
func watchInterrupt(ctx context.Context, stderr io.Writer, study *spec.Spec, l launcher.Launcher) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		// Registered only now: before, main's NotifyContext owns the signal.
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		cleanup := ""
		if reaperOf(study, l) != nil {
			cleanup = "servetune cleanup --study " + study.Name
		}
		if cleanup != "" {
			fmt.Fprintf(stderr, "interrupted: stopping the load, saving finished trials, stopping the engine (Ctrl-C again to exit at once, then run %s)\n", cleanup)
		} else {
			fmt.Fprintln(stderr, "interrupted: stopping the load, saving finished trials, stopping the engine (Ctrl-C again to exit at once)")
		}
		select {
		case <-done:
		case <-again:
			if cleanup != "" {
				fmt.Fprintf(stderr, "interrupted again: exiting now; remove what is left with: %s\n", cleanup)
			} else {
				fmt.Fprintln(stderr, "interrupted again: exiting now")
			}
			os.Exit(130)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// tuneProgress shows each trial's progress through its load levels on
// stderr: on a terminal with one trial at a time, the shared progress bar
// redrawn in place; otherwise (a pipe, a log, parallel trials) a line at
// every quarter of a level, which interleaves readably. Before the first
// trial it shows the sampler's forecast of the space (forecast) the same
// way, so that minutes of forecasting read as such and not as trials.
type tuneProgress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	last  map[int]int          // trial -> last quarter printed
	bars  map[int]*progressBar // trial -> bar of its current level (tty)
	term  bool                 // stderr is a terminal (the forecast's line is redrawn)
	start time.Time            // the study's start, for the forecast's elapsed time
	// The forecast's total when last printed and the quarter of it.
	fTotal, fQuarter int
	fDrawn           time.Time // last redraw on a terminal
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *tuneProgress) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}

func (p *tuneProgress) level(trialN int, level string, done, total int) {
	if total <= 0 {
		return
	}
	if p.tty {
		p.mu.Lock()
		b := p.bars[trialN]
		if b == nil || done == 0 {
			b = newProgress(p.w, fmt.Sprintf("trial %d %s", trialN, level), total, 0)
			p.bars[trialN] = b
		}
		p.mu.Unlock()
		b.Update(done, total)
		if done == total {
			b.Done()
			p.mu.Lock()
			delete(p.bars, trialN)
			p.mu.Unlock()
		}
		return
	}
	q := done * 4 / total
	key := trialN
	p.mu.Lock()
	defer p.mu.Unlock()
	if done == 0 {
		p.last[key] = 0
		return
	}
	if q <= p.last[key] && done != total {
		return
	}
	p.last[key] = q
	const width = 20
	n := done * width / total
	fmt.Fprintf(p.w, "trial %d %-16s [%s%s] %d/%d\n", trialN, level, strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
	if done == total {
		p.last[key] = 0
	}
}

// forecast shows the sampler's forecast before the first trial:
// "forecasting: 12/40 configurations, 3m11s elapsed", redrawn in place on
// a terminal (at most every 100 ms), else a line at every quarter. The
// total grows when the forecast refines around its best: the quarters
// count again from there.
func (p *tuneProgress) forecast(done, total int) {
	if total <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("forecasting: %d/%d configurations, %s elapsed", done, total, spec.ShortDuration(time.Since(p.start)))
	if p.term {
		if now := time.Now(); done == total || now.Sub(p.fDrawn) >= 100*time.Millisecond {
			p.fDrawn = now
			fmt.Fprintf(p.w, "\r%s\x1b[K", line)
			if done == total {
				fmt.Fprintln(p.w)
			}
		}
		return
	}
	if total != p.fTotal {
		p.fTotal, p.fQuarter = total, done*4/total
		if done == 0 || done == total {
			return // the batch's start, or one already counted
		}
	}
	if q := done * 4 / total; q > p.fQuarter {
		p.fQuarter = q
		fmt.Fprintln(p.w, line)
	}
}

// settingsLine prints settings as k=v in name order.
func settingsLine(s space.Settings) string { return s.Line() }

// studyClock times a study for its progress lines: elapsed wall time and
// an ETA from the measured durations of the trials this run finished.
// Calls are serialised by Study (OnFinish).
type studyClock struct {
	start     time.Time
	spec      *spec.Spec
	parallel  int
	durations []time.Duration
}

// finished records r's duration and returns "[3/24, 12s elapsed, ETA
// 1m10s]" (confirmation runs: "[confirm 1/6, ...]").
func (c *studyClock) finished(r tuner.TrialReport) string {
	// Only launched trials tell how long one takes: a rejection before
	// launch (infeasible, 0 s) would pull the mean, and the ETA, to nothing
	// while minutes of measuring remain.
	if r.Result.Failure != engine.FailInfeasible {
		c.durations = append(c.durations, max(r.Result.Finished.Sub(r.Result.Started), 0))
	}
	conf := c.spec.Tuner.Confirm.Top * c.spec.Tuner.Confirm.Runs
	count, remaining := fmt.Sprintf("%d/%d", r.Done, r.Total), r.Total-r.Done+conf
	if r.Confirms != nil {
		count, remaining = "confirm "+count, r.Total-r.Done
	}
	s := fmt.Sprintf("[%s, %s elapsed", count, spec.ShortDuration(time.Since(c.start)))
	if eta, ok := spec.ETA(c.durations, remaining, c.parallel); ok {
		s += ", ETA " + spec.ShortDuration(eta)
	} else if remaining <= 0 {
		s += ", done"
	} else {
		s += ", ETA unknown" // no launched trial has finished yet
	}
	return s + "]"
}

// trialLine is the one line printed when a trial ends.
func trialLine(r tuner.TrialReport, obj recommend.Objective) string {
	var b strings.Builder
	if r.Confirms != nil {
		fmt.Fprintf(&b, "trial %d (run %d of trial %d) %s", r.Number, r.Replica+1, *r.Confirms, r.Result.Status)
	} else {
		fmt.Fprintf(&b, "trial %d %s", r.Number, r.Result.Status)
	}
	if r.Result.Status == measure.StatusFailed {
		fmt.Fprintf(&b, "/%s", r.Result.Failure)
	}
	fmt.Fprintf(&b, " %s", tuner.Elapsed(r.Result))
	if r.Value != nil {
		fmt.Fprintf(&b, " %s=%s", obj.Metric, recommend.Format(obj.Metric, *r.Value))
	}
	if r.Best != nil && r.Confirms == nil {
		fmt.Fprintf(&b, " best=%s", recommend.Format(obj.Metric, *r.Best))
	}
	fmt.Fprintf(&b, "  %s", settingsLine(r.Settings))
	if f := recommend.RequestFailures(r.Result.Levels); f != "" && r.Result.Status != measure.StatusFailed {
		fmt.Fprintf(&b, "  [%s]", f)
	}
	if r.Result.Message != "" {
		msg := r.Result.Message
		if len(msg) > 300 {
			msg = msg[:297] + "... (whole message: servetune trials)"
		}
		fmt.Fprintf(&b, "  (%s)", msg)
	}
	return term.Line(b.String()) // the engine's message, the spec's settings
}

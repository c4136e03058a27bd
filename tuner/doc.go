// Package tuner runs tuning studies: it proposes engine launch settings
// with the spec's seeded sampler (tuner/sampler; the default is guided,
// tuner/guided, when the simulator can forecast the study, else TPE;
// random, CMA-ES and grid on request), evaluates them as trials on
// disjoint GPU sets, and stores every trial. The spec is tuner/spec's;
// ranking what was stored (Pareto front, recommendation under the SLOs)
// is tuner/recommend's.
//
// A Study owns its run: it opens the stored study (Store.Begin), removes
// what a killed run of it left running when its launcher can
// (launcher.Capabilities.Reap), samples the trials' GPUs when the launcher
// says they are this machine's, runs as many trials at once as its GPUs
// hold (Parallelism), and reaps again when its trials are done. The command line
// only parses flags and prints what the study reports (OnStart, OnFinish,
// OnProgress, OnNote).
//
// The memory precheck (tuner.precheck) asks the memory model the caller
// hands in, Study.Memory or TrialRunner.Memory: tuner/memory's Model, the
// simulator's. Package tuner does not import it, so it links no simulator.
//
// Failed trials (out of memory at start-up, crash under load, not ready in
// time, infeasible by the memory model) are results: they are stored with
// their class and told to the sampler as worse than any success, so it moves
// away from them. A study killed at any moment resumes: running trials are
// marked interrupted and re-run with the same settings first, and finished
// trials are replayed into the sampler.
//
// The scalar the sampler optimises is the spec's tuner.objective, by default
// "max goodput_per_gpu": the best request goodput per GPU over the trial's
// load levels. The Pareto front runs over every (trial, load level) point.
//
// ParseSpec is the full parse of a study spec: tuner/spec's plain parse,
// then the launcher its launcher section names, built by its kind
// (NewLauncher), and the spec's checks that need that launcher's
// capabilities (spec.Spec.CheckLauncher).
//
// Example:
//
//	study, l, err := tuner.ParseSpecFile("examples/quickstart.yaml")
//	if err != nil {
//		return err // a *yamlpos.Error: file:line: field: problem
//	}
//	db, _ := store.Open(ctx, ":memory:")
//	out, err := (&tuner.Study{Spec: study, Launcher: l, Store: db, Memory: memory.Model{}}).Run(ctx)
//	trials, _ := db.Trials(ctx, out.StudyID)
//	best, err := recommend.RecommendStudy(trials, study.Terms(), recommend.PreferThroughput)
//
// Concurrency: every sampler is safe for concurrent use and owns its
// seeded random source, so one seed proposes the same settings in the same
// order in any program. A Study's Run drives its own worker goroutines and
// waits for them before it returns.
package tuner

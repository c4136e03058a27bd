// Package tuner runs tuning studies: it parses the study spec, proposes
// engine launch settings with a seeded goptuna sampler (TPE by default;
// random, CMA-ES, grid), evaluates them as trials on disjoint GPU sets,
// stores every trial, and reads the results back as a Pareto front and a
// recommendation under the user's SLOs.
//
// Failed trials (out of memory at start-up, crash under load, not ready in
// time, infeasible by the memory model) are results: they are stored with
// their class and told to the sampler as worse than any success, so it moves
// away from them. A study killed at any moment resumes: running trials are
// marked interrupted and re-run with the same settings first, and finished
// trials are replayed into the sampler.
//
// Docker studies: a study may span several Docker hosts (launcher.hosts,
// each with its own GPUs); a trial runs on one host, chosen by the GPU pool,
// and its GPUs are numbered host×HostGPUStride+index. Study.Reap (ReapStudy
// for docker studies) removes a study's containers on every host before its
// first trial, new or resumed: a study that is not running owns none.
//
// The scalar the sampler optimises is the spec's tuner.objective, by default
// "max goodput_per_gpu": the best request goodput per GPU over the trial's
// load levels. The Pareto front runs over every (trial, load level) point.
//
// Trials are evaluated through the Evaluator interface: TrialRunner launches
// real engines (or the simulated engine as a process) and benchmarks them;
// VirtualEvaluator runs the simulator in virtual time, which the sampler
// benchmark (Exhaustive, TrialsToReach, cmd tuner/samplerbench) uses to
// compare samplers against the exhaustive optimum of a discrete space.
//
// Example:
//
//	spec, err := tuner.ParseSpecFile("examples/quickstart.yaml")
//	if err != nil {
//		return err // a *space.Error: file:line: field: problem
//	}
//	pts := ... // stored load points as []tuner.Point
//	best, err := tuner.Recommend(pts, spec.Objectives, spec.SLO, tuner.PreferThroughput)
//
// Concurrency: a Sampler is safe for concurrent use; Front, Recommend and
// the spec parser are pure functions. A Study's Run drives its own worker
// goroutines and waits for them before it returns.
package tuner

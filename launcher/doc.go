// Package launcher starts and stops inference engines for trials.
//
// A Launcher turns a Spec (engine, model, settings by neutral name, extra
// flags, env, GPUs, labels) into a running Instance; the trial waits for
// Ready, measures against Endpoint, and calls Stop, which releases
// everything the engine held. Launchers render the settings themselves
// (Spec.Args, through package engine).
//
// Launchers are registered by kind (Register): each kind decodes its own
// keys of a study spec's launcher section, and its launcher says what it
// can do beside Launch in one value, Launcher.Capabilities (launcher.go):
// GPU placement on several hosts (GPUs, HostOf), Reap (removes what a
// killed run left running), LocalGPUs (the trial's GPUs are this
// machine's, for telemetry), TimeScale (a simulated engine faster than
// real time), Preflight (checks before the first launch), Deterministic
// (virtual time), FixedSettings (settings cannot be changed). The kinds of
// this package:
//
//   - process: a local command in its own process group. "{port}",
//     "{host}", "{model}" and "{args}" in the command template are filled per
//     trial; Stop sends SIGTERM to the group, waits StopTimeout, then
//     SIGKILLs it.
//   - endpoint: a server someone else runs; nothing is started or stopped.
//
// The simulated engine's kinds, sim and virtual, are launcher/simulated's.
//
// launcher/docker is the docker kind (a container per trial, on one or
// several Docker hosts); launcher/kinds imports every kind. Adding a kind
// is one package (or file) and one import line there.
//
// Instances of Process, simulated.Sim and Docker implement Exiter, so a trial tells a
// crash under load from a slow server. Ready returns an *ExitError (wrapping
// ErrExited, with the exit code and whether the kernel OOM-killed it) when
// the engine ends first; Logs returns the tail of its output, where engines
// print why; engine.Classify names the failure.
//
// Example:
//
//	l := &simulated.Sim{GPU: "H100-SXM", Scale: 10}
//	in, err := l.Launch(ctx, launcher.Spec{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []int{0}})
//	if err != nil {
//		return err
//	}
//	defer in.Stop(context.WithoutCancel(ctx))
//	if err := in.Ready(ctx); err != nil {
//		return fmt.Errorf("%w\n%s", err, in.Logs())
//	}
//	// benchmark in.Endpoint() ...
//
// Orphans: on Linux, Process and simulated.Sim engines are started with the
// parent-death signal (SIGKILL), so they die with a servetune killed by
// SIGKILL, when no Stop runs.
//
// Secrets: Spec.Env values and launcher.env variables (API keys, HF tokens)
// are handed to the engine and never logged or kept.
//
// Concurrency: launchers are safe for concurrent Launch calls once
// configured (a study runs trials in parallel on disjoint GPU sets). An
// Instance's methods are safe to call from several goroutines; Stop is
// idempotent. Every instance owns the goroutine that waits for its engine;
// Stop waits for it. The registry is safe for concurrent use.
package launcher

// Package launcher starts and stops inference engines for trials.
//
// A Launcher turns a Spec (engine, model, rendered flags, env, GPUs, labels)
// into a running Instance; the trial waits for Ready, measures against
// Endpoint, and calls Stop, which releases everything the engine held. Four
// launchers exist:
//
//   - Process: a local command in its own process group. "{port}", "{host}",
//     "{model}" and "{args}" in the command template are filled per trial;
//     Stop sends SIGTERM to the group, waits StopTimeout, then SIGKILLs it.
//   - Endpoint: a server someone else runs; nothing is started or stopped.
//   - Sim: `servetune sim serve` as a subprocess, a drop-in for `vllm serve`.
//   - Docker: a container per trial (see Docker), with a reaper, Reap, for
//     the containers a crashed or interrupted study left behind.
//
// Instances of Process, Sim and Docker also implement Exiter, so a trial can
// tell a crash under load from a slow server. Ready returns an error wrapping
// ErrExited (an *ExitError with the exit code) when the engine ends first;
// Logs returns the tail of its output, where engines print why.
//
// Example:
//
//	l := &launcher.Sim{GPU: "H100-SXM", TimeScale: 10}
//	in, err := l.Launch(ctx, launcher.Spec{Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []int{0}})
//	if err != nil {
//		return err
//	}
//	defer in.Stop(context.WithoutCancel(ctx))
//	if err := in.Ready(ctx); err != nil {
//		return fmt.Errorf("%w\n%s", err, in.Logs())
//	}
//	// benchmark in.Endpoint() ...
//
// Docker hosts: a Docker launcher talks to Docker.Host, or DOCKER_HOST when
// that is empty, or the local socket. unix://, tcp:// (with DOCKER_CERT_PATH
// and DOCKER_TLS_VERIFY as the docker CLI reads them) and ssh://[user@]host[:port]
// all work; ssh runs `ssh -- host docker system dial-stdio` per connection, so
// the remote account needs the docker CLI and key- or agent-based login. The
// container's port is published on the Docker host's 127.0.0.1, so with a
// remote host the benchmark must run there too (or tunnel the port), unless
// Docker.Address names the host as this machine reaches it: the port is then
// published on all the host's interfaces. Reaping works against any host:
// `servetune cleanup [--study S] [--all]`. The API version is negotiated, so
// daemons as old as Engine 20.10 work.
//
// Orphans: on Linux, Process and Sim engines are started with the
// parent-death signal (SIGKILL), so they die with a servetune killed by
// SIGKILL, when no Stop runs. Containers do not: the reaper removes them.
//
// The launcher never pulls images: a missing image is ErrImageMissing, naming
// the image and `make sim-image` (for SimImage) or `docker pull`.
//
// Secrets: Spec.Env values (API keys, HF tokens) are handed to the engine and
// never logged or kept; the Docker launcher takes host variables by name only.
//
// Concurrency: launchers are safe for concurrent Launch calls once configured
// (a study runs trials in parallel on disjoint GPU sets). An Instance's methods
// are safe to call from several goroutines; Stop is idempotent. Every instance
// owns one goroutine that waits for its engine and ends when the engine does;
// Stop waits for it.
package launcher

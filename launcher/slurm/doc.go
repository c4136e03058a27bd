// Package slurm is the slurm launcher kind: each trial's engine is a Slurm
// batch job. The scheduler decides where it runs; servetune reads the
// job's node and port from a file the job writes, checks /health and
// benchmarks it over the network from the submitting host.
//
// Slurm is driven through its command-line tools, which every submit host
// has, and nothing else (no slurmrestd: it needs a daemon and tokens a site
// may not run):
//
//   - sbatch --parsable submits (it prints "id[;cluster]", stable across
//     releases), and sbatch --test-only is the preflight;
//   - squeue --json reads jobs: names and comments may hold any character,
//     which JSON carries without a delimiter to escape, and it gives the
//     state, the reason, the wait status, the batch host and the GRES
//     indices typed. Slurm 22.05 (Debian 12's slurm-wlm; openapi
//     v0.0.38) ignores squeue's filters with --json and lists every job it
//     remembers, ended ones for MinJobAge, so jobs are filtered here; the
//     later shapes (v0.0.39+: numbers as {set, infinite, number}, the state
//     a list of flags, the exit code an object) are read too;
//   - scancel cancels.
//
// A job is named servetune-STUDY-tN and its comment is its launcher.Label
// (servetune.io/study=...&servetune.io/trial=...&servetune.io/owner=...,
// the owner the run, launcher.Spec.Owner; an older servetune's
// "servetune:study=..." comment reads too). The
// reaper (Slurm.Reap, `servetune cleanup --study`) cancels only this
// user's active jobs whose comment parses and names the study, and spares
// those of runs still alive (its keep function): never another user's job,
// never a job without that comment.
//
// The job's script (in WorkDir, a directory this machine and the nodes
// share) notes its node and GPUs in its log, loads the modules, picks a
// free port with bash's /dev/tcp, writes "NODE PORT" to its address file
// and execs the engine's serve command (engine.ServeCommand, listening on
// all of the node's interfaces) or the simulated engine's, optionally
// inside the site's container runtime. Jobs are submitted with
// --no-requeue (a requeued engine would come back elsewhere) and
// --export=ALL: launcher.env values travel in sbatch's environment, never
// in the script.
//
// Times: pending is from submission to the job's start (its log or
// address file appears, or squeue says RUNNING), launch from its start to
// a healthy /health, both measured here on the monotonic clock to within
// the poll interval (200 ms; squeue every 500 ms). The ready timeout
// counts from submission: a job still queued then fails not_ready with the
// scheduler's reason; one pending for a reason that never clears
// (PartitionTimeLimit, InvalidQOS, ...) is cancelled at once.
//
// Ends: a job the scheduler ends (CANCELLED, TIMEOUT, NODE_FAIL,
// PREEMPTED, BOOT_FAIL, DEADLINE) reports engine.Exit.Scheduler and is
// classified engine.FailScheduler; OUT_OF_MEMORY is OOMKilled; COMPLETED
// and FAILED give the engine's exit code, classified by its log. A
// submission Slurm refuses (an unknown partition, more GRES than any node
// has) fails the launch with sbatch's message.
//
// Capabilities: Reap, Preflight, TimeScale (the simulated engine). Not
// LocalGPUs (the GPUs are the job's, on its node) and no HostOf: the
// study's launcher.gpus only bounds how many GPUs its jobs hold at once.
//
// A Slurm launcher is safe for concurrent Launch calls; each job owns one
// goroutine, which Stop ends.
package slurm

// Package simulated holds the launcher kinds of the simulated engine
// (internal/model/sim), registering like every other kind:
//
//   - sim: `servetune sim serve` as a subprocess, a drop-in for `vllm serve`
//     (launcher.Process underneath), optionally faster than real time.
//   - virtual: the simulated engine in this process on a virtual clock; its
//     instance hands the benchmark a transport (measure.Transport) instead
//     of a URL, and its results depend on settings and seed only.
//
// The keys and checks the docker and slurm kinds share when they run the
// simulated engine's image or binary are here too (SimKeys, SimPreflight),
// so that package launcher does not import the simulator.
package simulated

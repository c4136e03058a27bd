// Package simulated holds the launcher kinds of the simulated engine
// (internal/model/sim), registering like every other kind:
//
//   - sim: `servetune sim serve` as a subprocess, a drop-in for `vllm serve`
//     (launcher.Process underneath), optionally faster than real time.
//   - virtual: the simulated engine in this process on a virtual clock; its
//     instance hands the benchmark a transport (measure.Transport) instead
//     of a URL, and its results depend on settings and seed only.
//
// The keys and checks these kinds share with the docker, slurm and
// kubernetes kinds when those run the simulated engine's image or binary
// are launcher/simenv's, which reads the catalog only, so that no real
// launcher links the simulator.
package simulated

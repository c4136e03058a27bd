// Package gpu reads GPU telemetry through NVML: power, memory used and total,
// utilisation, SM clock, temperature and the energy counter, per GPU index,
// and summarises a load level's samples (Usage: energy, output tokens per
// joule, mean power and utilisation).
//
// Open starts an NVML session. Where there is no NVIDIA driver, no GPU, or the
// binary was built without cgo (the static sim image), Open returns an error
// wrapping ErrNoTelemetry whose text is "no GPU telemetry: <reason>"; callers
// log it once and go on without GPU metrics. Nothing here panics on a host
// without GPUs.
//
// A Sampler reads a set of GPUs at a fixed interval into memory between Start
// and Stop:
//
//	n, err := gpu.Open()
//	if err != nil {
//		log.Print(err) // no GPU telemetry: ...
//	} else {
//		defer n.Close()
//		s := gpu.NewSampler(n, []int{0, 1}, 500*time.Millisecond)
//		s.Start(ctx)
//		// ... run the benchmark ...
//		samples := s.Stop()
//		fmt.Printf("%.0f J\n", gpu.EnergyJoules(samples))
//	}
//
// Concurrency: an *NVML is safe for concurrent use, so several samplers (one
// per parallel trial) may share it. A Sampler's Start and Stop must be called
// once each, from one goroutine; Err may be called at any time. The sampling
// goroutine belongs to the Sampler and has ended when Stop returns.
package gpu

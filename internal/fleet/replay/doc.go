// Package replay runs a planned fleet for real on this machine and
// measures it: replicas of the simulated engine (`servetune sim serve`,
// each its own process on its own loopback port, started through the
// process launcher so it dies with its parent), behind a router that
// picks each request's replica with internal/fleet's routers (on the
// requests the router has in flight to each replica and an approximate
// index of the prompts it sent each one), scaled by internal/fleet's
// target-tracking rule on the gauges scraped from each replica's
// /metrics, while the plan's traffic is sent through the router at its
// times in the trace divided by a speed-up.
//
// Everything runs Speed times faster than the trace: each replica runs
// with --time-scale Speed (its steps and its weight loading), arrivals
// come at their offsets over Speed, and the autoscaler samples, decides
// and cools down on the trace's clock, read off the real one times
// Speed. Latencies come back in the trace's time through the engine's
// own clock in its stream (measure.EngineTime), so this machine's
// overhead counts once, not Speed times.
//
//	res, err := replay.Run(ctx, reqs, replay.Options{Binary: exe, EngineArgs: args, Speed: 60,
//		Policy: pol, UpDelay: 61, SLO: slo, KVTokens: est.KVCacheTokens, Log: os.Stderr})
//	fmt.Println(res.Attainment, res.PeakReplicas, res.ReplicaHours)
package replay

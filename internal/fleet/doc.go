// Package fleet plans a fleet of simulated engines over a day of traffic:
// replicas of one serve configuration behind a router (round-robin,
// least outstanding requests, or prefix-aware with a load bound) and an
// autoscaler (target tracking on an engine gauge: running or waiting
// requests, KV-cache usage; minimum and maximum replicas; the delay a
// new replica needs to load its weights; a scale-down cooldown), or a
// fixed count. Every replica is the simulator's engine
// (internal/model/sim, sim.Replica) stepped on one virtual clock, so a
// replica's service is its scheduler's and step-time model's, and the
// router sees each replica's queue and prefix cache as they are when a
// request arrives.
//
// The traffic is a list of requests in arrival order: a trace
// (FromTrace over internal/load/trace), or generated on a rate curve
// (Day: a published daily shape; Independent single-turn requests, or
// Conversations whose turns share their session's prefix).
//
//	reqs, _ := fleet.Conversations(fleet.Day(20), fleet.DefaultChat, 1)
//	capacity, _ := fleet.MeasureCapacity(cfg, reqs, slo, 0.99, fleet.DefaultHeadroom, 1)
//	scale := &fleet.Autoscaler{Signal: fleet.SignalRunning, Target: capacity.Running, Min: 1, Max: 64,
//		Interval: fleet.DefaultInterval, UpDelay: 60, Cooldown: fleet.DefaultCooldown, Tolerance: fleet.DefaultTolerance}
//	res, _ := fleet.Simulate(cfg, reqs, slo, fleet.Policy{Router: fleet.RouterPrefix, Replicas: 2, Scale: scale})
//	fmt.Println(res.Attainment, res.ReplicaHours, res.PrefixHitRate())
//
// Simulate holds nothing shared: distinct calls may run concurrently.
package fleet

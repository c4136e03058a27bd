package fleet

import (
	"fmt"
	"math/rand/v2"

	"github.com/servetune/servetune/internal/model/sim"
)

// Capacity is what one replica serves of a traffic's requests: the
// highest Poisson rate at which it meets the SLO for Goal of them, and
// its gauges at Headroom of that rate (the autoscaler's targets: a
// replica tracked at these runs at Headroom of its capacity).
type Capacity struct {
	Rate     float64 `json:"requests_per_second"`
	Goal     float64 `json:"goal"`
	Headroom float64 `json:"headroom"`
	Running  float64 `json:"running"`
	Waiting  float64 `json:"waiting"`
	KV       float64 `json:"kv_usage"`
}

// Target is the gauge the capacity gives signal s at Headroom.
func (c Capacity) Target(s Signal) float64 {
	switch s {
	case SignalWaiting:
		return c.Waiting
	case SignalKV:
		return c.KV
	}
	return c.Running
}

// CapacitySample is how many of a traffic's requests a capacity probe
// sends.
const CapacitySample = 2000

// DefaultHeadroom is the share of its capacity a replica is scaled to
// run at.
const DefaultHeadroom = 0.8

// MeasureCapacity finds one replica's capacity for reqs' lengths and
// sharing: the first CapacitySample requests, in their order, sent as a
// Poisson stream (seeded) to one replica at rates doubling from
// 0.25 request/s while goal of them meet slo, then bisected 8 times.
// The gauges at headroom of the rate are means over 1-second samples.
func MeasureCapacity(cfg sim.Config, reqs []Request, slo SLO, goal, headroom float64, seed uint64) (Capacity, error) {
	c := Capacity{Goal: goal, Headroom: headroom}
	sample := reqs[:min(len(reqs), CapacitySample)]
	if len(sample) == 0 {
		return c, ErrNoTraffic
	}
	probe := func(rate float64) (Result, error) {
		rng := rand.New(rand.NewPCG(seed, 0xca9))
		q := make([]Request, len(sample))
		t := 0.0
		for i, r := range sample {
			t += rng.ExpFloat64() / rate
			q[i] = r
			q[i].At = t
		}
		return Simulate(cfg, q, slo, Policy{Router: RouterLeastLoad, Replicas: 1, Sample: 1})
	}
	lo, hi := 0.0, 0.25
	for {
		r, err := probe(hi)
		if err != nil {
			return c, err
		}
		if r.Attainment < goal {
			break
		}
		lo, hi = hi, 2*hi
		if hi > 1e5 {
			return c, fmt.Errorf("a replica meets the SLO at over %g requests/s: the probe stops there", lo)
		}
	}
	for range 8 {
		mid := (lo + hi) / 2
		r, err := probe(mid)
		if err != nil {
			return c, err
		}
		if r.Attainment >= goal {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return c, fmt.Errorf("one replica cannot meet the SLO for %.0f%% of the requests even at %g requests/s", 100*goal, hi)
	}
	c.Rate = lo
	r, err := probe(lo * headroom)
	if err != nil {
		return c, err
	}
	c.Running, c.Waiting, c.KV = r.MeanRunning, r.MeanWaiting, r.MeanKV
	return c, nil
}

// Start-up of a new replica, servetune's assumption where the simulator
// is given none (sim's LoadTime is a test stand-in of a second): the
// engine's own initialisation (process start, CUDA context, the KV
// cache's profiling, CUDA graph capture) in EngineInitSeconds, and its
// weights read at WeightReadBytesPerSecond, one GPU's shard per GPU at
// once. The node and the image are taken as warm: a pod that must wait
// for a node or pull an image waits longer (give --scale-up-delay).
const (
	EngineInitSeconds        = 45.0
	WeightReadBytesPerSecond = 1e9
)

// StartupSeconds is how long a replica whose GPUs each hold
// weightBytes of weights takes to serve.
func StartupSeconds(weightBytes float64) float64 {
	return EngineInitSeconds + weightBytes/WeightReadBytesPerSecond
}

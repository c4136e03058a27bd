package fleet

import (
	"fmt"
	"math"

	"github.com/servetune/servetune/internal/registry"
)

// Signal is an engine gauge an autoscaler tracks, as the engines export
// it on /metrics.
type Signal string

// The signals.
const (
	// SignalRunning is the requests in the running batch
	// (vllm:num_requests_running, sglang:num_running_reqs).
	SignalRunning Signal = "running"
	// SignalWaiting is the requests queued for a seat
	// (vllm:num_requests_waiting, sglang:num_queue_reqs).
	SignalWaiting Signal = "waiting"
	// SignalKV is the share of the KV cache that requests hold
	// (vllm:kv_cache_usage_perc, sglang:token_usage).
	SignalKV Signal = "kv"
)

// Signals lists the signals, in the order help text shows them.
var Signals = []Signal{SignalRunning, SignalWaiting, SignalKV}

// ParseSignal returns the signal named s.
func ParseSignal(s string) (Signal, error) {
	return registry.Parse("scaling signal", s, Signals)
}

// index is the signal's place in a gauge triple (run.tick).
func (s Signal) index() int {
	switch s {
	case SignalWaiting:
		return 1
	case SignalKV:
		return 2
	}
	return 0
}

// Defaults of an autoscaler, Kubernetes' HorizontalPodAutoscaler's: it
// evaluates every 15 s (the controller manager's
// --horizontal-pod-autoscaler-sync-period), ignores a ratio within 10%
// of 1 (--horizontal-pod-autoscaler-tolerance) and scales down to the
// highest recommendation of the last 300 s (the default scale-down
// stabilization window).
const (
	DefaultInterval  = 15.0
	DefaultTolerance = 0.1
	DefaultCooldown  = 300.0
)

// Autoscaler is target tracking on one engine signal: every Interval
// seconds the desired replicas are the signal (its mean per ready
// replica over the interval, sampled every SampleInterval) times the
// ready replicas, divided by Target (the HPA's AverageValue target:
// ceil(current x mean / target)), left as they are while the ratio is
// within Tolerance of 1, between Min and Max. A new replica takes
// UpDelay seconds (its weights loading) before it serves; scaling down
// waits out Cooldown seconds of lower recommendations.
type Autoscaler struct {
	Signal    Signal
	Target    float64
	Min, Max  int
	Interval  float64
	UpDelay   float64
	Cooldown  float64
	Tolerance float64
}

// String is the scaler in short: "running=12 [1,20]".
func (a Autoscaler) String() string {
	return fmt.Sprintf("%s=%.3g [%d,%d]", a.Signal, a.Target, a.Min, a.Max)
}

// Check reports the first setting that cannot run.
func (a Autoscaler) Check() error {
	switch {
	case !(a.Target > 0) || math.IsInf(a.Target, 0):
		return fmt.Errorf("autoscaler target %g: want a positive number", a.Target)
	case a.Signal == SignalKV && a.Target > 1:
		return fmt.Errorf("autoscaler target %g on kv: the KV-cache usage is a share, at most 1", a.Target)
	case a.Min < 1 || a.Max < a.Min:
		return fmt.Errorf("autoscaler replicas [%d,%d]: want 1 <= min <= max", a.Min, a.Max)
	case !(a.Interval > 0):
		return fmt.Errorf("autoscaler interval %gs: want a positive number", a.Interval)
	case a.UpDelay < 0 || a.Cooldown < 0 || a.Tolerance < 0:
		return fmt.Errorf("autoscaler delay %gs, cooldown %gs, tolerance %g: none may be negative", a.UpDelay, a.Cooldown, a.Tolerance)
	}
	return nil
}

// desired is the scaler's recommendation from the gauges summed over
// the ready replicas (running, waiting, KV usage; each the mean per
// replica over the interval times the ready replicas), with prov
// replicas provisioned.
func (a Autoscaler) desired(sums [3]float64, ready, prov int) int {
	return a.Desired(sums[a.Signal.index()], ready, prov)
}

// Desired is the scaler's recommendation from sum, its signal summed
// over the ready replicas (each replica's mean over the interval), with
// prov replicas provisioned: prov while the mean per replica is within
// Tolerance of Target, else ceil(sum / Target) between Min and Max.
func (a Autoscaler) Desired(sum float64, ready, prov int) int {
	ratio := sum / float64(ready) / a.Target
	if math.Abs(ratio-1) <= a.Tolerance {
		return prov
	}
	return min(max(int(math.Ceil(sum/a.Target-1e-9)), a.Min), a.Max)
}

// Window is the scale-down stabilization: the recommendations of the
// last Cooldown seconds, of which a scale-down keeps the highest
// (Kubernetes' stabilization window). The zero value is empty.
type Window struct{ recs []rec }

// Keep records the recommendation desired at t (seconds, never going
// back) and returns the fewest replicas a scale-down may leave: the
// highest recommendation of the window ending at t.
func (w *Window) Keep(cooldown, t float64, desired int) int {
	w.recs = append(w.recs, rec{t, desired})
	k := 0
	for k < len(w.recs) && w.recs[k].at < t-cooldown {
		k++
	}
	w.recs = w.recs[k:]
	keep := desired
	for _, r := range w.recs {
		keep = max(keep, r.desired)
	}
	return keep
}

package measure

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Load is one load level: open-loop rate, closed-loop concurrency cap, or both.
type Load struct {
	Rate           float64 `json:"request_rate"`         // requests/s; 0 means all at once (inf)
	Burstiness     float64 `json:"burstiness,omitempty"` // gamma shape; 1 (or 0) = Poisson
	MaxConcurrency int     `json:"max_concurrency"`      // 0 = unbounded
}

// Schedule returns the intended send offsets of n requests under l: all zero
// for an infinite rate (Rate <= 0), otherwise gamma-distributed gaps with
// shape Burstiness (1 = Poisson) and mean 1/Rate. Pure: equal seeds give equal
// schedules.
func (l Load) Schedule(rng *rand.Rand, n int) []time.Duration {
	out := make([]time.Duration, n)
	p := l.Pacer(rng)
	for i := range out {
		out[i] = p.Next()
	}
	return out
}

// Pacer yields successive intended send offsets; it is the lazy form of
// Schedule, for duration-bound runs. Not safe for concurrent use.
type Pacer struct {
	rate  float64
	gamma distuv.Gamma
	t     float64 // seconds
}

// Pacer returns l's arrival process drawing from rng.
func (l Load) Pacer(rng *rand.Rand) *Pacer {
	shape := l.Burstiness
	if shape <= 0 {
		shape = 1
	}
	p := &Pacer{rate: l.Rate}
	if l.Rate > 0 && !math.IsInf(l.Rate, 1) {
		// Gamma(shape, rate*shape) has mean 1/rate; shape 1 is exponential.
		p.gamma = distuv.Gamma{Alpha: shape, Beta: shape * l.Rate, Src: rng}
	}
	return p
}

// Next returns the intended send offset of the next request.
func (p *Pacer) Next() time.Duration {
	if p.rate <= 0 || math.IsInf(p.rate, 1) {
		return 0
	}
	p.t += p.gamma.Rand()
	return time.Duration(p.t * float64(time.Second))
}

// Unlimited reports whether l sends as fast as it may: no rate (0) or an
// infinite one.
func (l Load) Unlimited() bool { return l.Rate <= 0 || math.IsInf(l.Rate, 1) }

// Label names a load level as it is stored and shown: "concurrency=N",
// "rate=R", or "rate=R,concurrency=N" for both, R by FormatRate; kind and
// value say which axis the level varies.
func (l Load) Label() (label, kind string, value float64) {
	switch {
	case l.Rate > 0 && l.MaxConcurrency > 0:
		return "rate=" + FormatRate(l.Rate) + ",concurrency=" + strconv.Itoa(l.MaxConcurrency), "rate", l.Rate
	case l.Rate > 0:
		return "rate=" + FormatRate(l.Rate), "rate", l.Rate
	}
	return "concurrency=" + strconv.Itoa(l.MaxConcurrency), "concurrency", float64(l.MaxConcurrency)
}

// Name names a load level wherever one is shown: Label, with "rate=inf"
// for a level with neither a rate nor a concurrency cap.
func (l Load) Name() string {
	if l.Unlimited() && l.MaxConcurrency <= 0 {
		return "rate=inf"
	}
	label, _, _ := l.Label()
	return label
}

// FormatRate writes a request rate (requests/s) with at most four
// significant digits, "inf" for 0 (all at once) or +Inf: a searched rate
// such as 6.441961327797018 is 6.442. Every level name uses it.
func FormatRate(r float64) string {
	if r <= 0 || math.IsInf(r, 1) || math.IsNaN(r) {
		return "inf"
	}
	return strconv.FormatFloat(sig4(r), 'f', -1, 64)
}

// sig4 rounds v to four significant digits.
func sig4(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return r
}

// Level is one measured load level: the load as run, what was measured, and
// (when kept) the per-request records. It is the one shape a load point
// takes from the benchmark through the trial, the store and the tuner.
type Level struct {
	Label   string   `json:"level"` // Load.Label
	Kind    string   `json:"kind"`  // "concurrency" or "rate"
	Value   float64  `json:"value"`
	Load    Load     `json:"load"`
	Summary Summary  `json:"summary"`
	Records []Record `json:"-"`
}

// NewLevel labels a measured load level.
func NewLevel(load Load, sum Summary, recs []Record) Level {
	label, kind, value := load.Label()
	return Level{Label: label, Kind: kind, Value: value, Load: load, Summary: sum, Records: recs}
}

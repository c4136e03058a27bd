package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Dist kinds.
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistLognormal = "lognormal"
	DistNormal    = "normal"
)

// ParseDist parses a length distribution written as on the command line:
//
//	1024                              fixed
//	fixed:1024                        fixed
//	uniform:64,512                    uniform on [64, 512]
//	lognormal:median=1024,sigma=0.6   lognormal (optional min=, max= clip)
//	normal:mean=512,sigma=100         normal truncated to [min, max] (min defaults to 1)
//
// Errors name the offending part in one line.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Dist{}, fmt.Errorf("%w: empty distribution", ErrBadDist)
	}
	kind, args, hasArgs := strings.Cut(s, ":")
	if !hasArgs {
		n, err := strconv.Atoi(s)
		if err != nil {
			return Dist{}, fmt.Errorf("%w: %q: want N, fixed:N, uniform:A,B, lognormal:median=M,sigma=S or normal:mean=M,sigma=S", ErrBadDist, s)
		}
		d := Dist{Kind: DistFixed, Value: n}
		return d, d.Validate()
	}
	var d Dist
	switch kind {
	case DistFixed:
		n, err := strconv.Atoi(args)
		if err != nil {
			return Dist{}, fmt.Errorf("%w: fixed: %q is not an integer", ErrBadDist, args)
		}
		d = Dist{Kind: DistFixed, Value: n}
	case DistUniform:
		a, b, ok := strings.Cut(args, ",")
		lo, err1 := strconv.Atoi(strings.TrimSpace(a))
		hi, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil {
			return Dist{}, fmt.Errorf("%w: uniform: want uniform:MIN,MAX, got %q", ErrBadDist, args)
		}
		d = Dist{Kind: DistUniform, Min: lo, Max: hi}
	case DistLognormal, DistNormal:
		d.Kind = kind
		for _, kv := range strings.Split(args, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return Dist{}, fmt.Errorf("%w: %s: %q is not key=value", ErrBadDist, kind, kv)
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return Dist{}, fmt.Errorf("%w: %s: %s=%q is not a number", ErrBadDist, kind, k, v)
			}
			switch k {
			case "median":
				d.Median = f
			case "mean":
				d.Mean = f
			case "sigma", "std":
				d.Sigma = f
			case "min":
				d.Min = int(f)
			case "max":
				d.Max = int(f)
			default:
				return Dist{}, fmt.Errorf("%w: %s: unknown key %q", ErrBadDist, kind, k)
			}
		}
	default:
		return Dist{}, fmt.Errorf("%w: unknown kind %q (fixed, uniform, lognormal, normal)", ErrBadDist, kind)
	}
	return d, d.Validate()
}

// String renders d in ParseDist's syntax.
func (d Dist) String() string {
	switch d.Kind {
	case DistFixed, "":
		return strconv.Itoa(d.Value)
	case DistUniform:
		return fmt.Sprintf("uniform:%d,%d", d.Min, d.Max)
	case DistLognormal:
		s := fmt.Sprintf("lognormal:median=%g,sigma=%g", d.Median, d.Sigma)
		return s + d.clipString()
	case DistNormal:
		return fmt.Sprintf("normal:mean=%g,sigma=%g", d.Mean, d.Sigma) + d.clipString()
	}
	return d.Kind
}

func (d Dist) clipString() string {
	s := ""
	if d.Min > 0 {
		s += fmt.Sprintf(",min=%d", d.Min)
	}
	if d.Max > 0 {
		s += fmt.Sprintf(",max=%d", d.Max)
	}
	return s
}

// isSet reports whether d was given (the zero Dist means "not given").
func (d Dist) isSet() bool { return d != Dist{} }

// MaxLen bounds every length a distribution may give: ten million tokens,
// the longest context any model publishes (Llama 4 Scout). Past it a
// mistyped length would build prompts of gigabytes before any server
// could refuse them; a sample is clipped to it.
const MaxLen = 10_000_000

// Validate reports a distribution that cannot produce positive lengths.
func (d Dist) Validate() error {
	for _, v := range []float64{float64(d.Value), float64(d.Min), float64(d.Max), d.Median, d.Mean} {
		if v > MaxLen {
			return fmt.Errorf("%w: length %.0f is over %d tokens", ErrBadDist, v, MaxLen)
		}
	}
	if math.IsNaN(d.Sigma) || math.IsNaN(d.Median) || math.IsNaN(d.Mean) || d.Sigma > MaxLen ||
		d.Kind == DistLognormal && d.Sigma > 10 {
		return fmt.Errorf("%w: sigma %g out of range (lognormal: at most 10, on the log scale)", ErrBadDist, d.Sigma)
	}
	switch d.Kind {
	case DistFixed, "":
		if d.Value < 1 {
			return fmt.Errorf("%w: fixed length %d must be >= 1", ErrBadDist, d.Value)
		}
	case DistUniform:
		if d.Min < 1 || d.Max < d.Min {
			return fmt.Errorf("%w: uniform:%d,%d needs 1 <= MIN <= MAX", ErrBadDist, d.Min, d.Max)
		}
	case DistLognormal:
		if d.Median < 1 || d.Sigma < 0 {
			return fmt.Errorf("%w: lognormal needs median >= 1 and sigma >= 0", ErrBadDist)
		}
	case DistNormal:
		if d.Mean < 1 || d.Sigma < 0 {
			return fmt.Errorf("%w: normal needs mean >= 1 and sigma >= 0", ErrBadDist)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadDist, d.Kind)
	}
	if d.Max > 0 && d.Min > d.Max {
		return fmt.Errorf("%w: min %d > max %d", ErrBadDist, d.Min, d.Max)
	}
	return nil
}

// Sample draws one length (>= 1) from d with rng.
func (d Dist) Sample(rng *rand.Rand) int {
	var x float64
	switch d.Kind {
	case DistFixed, "":
		return max(d.Value, 1)
	case DistUniform:
		return d.Min + rng.IntN(d.Max-d.Min+1)
	case DistLognormal:
		x = d.Median * math.Exp(d.Sigma*rng.NormFloat64())
	case DistNormal:
		x = d.Mean + d.Sigma*rng.NormFloat64()
	}
	n := int(math.Round(x))
	lo := max(d.Min, 1)
	if n < lo {
		n = lo
	}
	if d.Max > 0 && n > d.Max {
		n = d.Max
	}
	// A lognormal's tail, or a NaN from math.Round of an overflow.
	if n > MaxLen || n < 1 {
		n = min(max(n, 1), MaxLen)
	}
	return n
}

// Mean returns the distribution's nominal mean length (used for sizing).
func (d Dist) MeanLen() float64 {
	switch d.Kind {
	case DistUniform:
		return float64(d.Min+d.Max) / 2
	case DistLognormal:
		return d.Median * math.Exp(d.Sigma*d.Sigma/2)
	case DistNormal:
		return d.Mean
	}
	return float64(d.Value)
}

// RangeDist returns vLLM's random-dataset length: uniform on
// [n(1-r), n(1+r)], or fixed n when r is 0.
func RangeDist(n int, r float64) (Dist, error) {
	if n < 1 {
		return Dist{}, fmt.Errorf("%w: length %d must be >= 1", ErrBadDist, n)
	}
	if r < 0 || r >= 1 || math.IsNaN(r) {
		return Dist{}, fmt.Errorf("%w: range ratio %g must be in [0, 1)", ErrBadDist, r)
	}
	if r == 0 {
		return Dist{Kind: DistFixed, Value: n}, nil
	}
	lo := max(int(math.Floor(float64(n)*(1-r))), 1)
	hi := int(math.Ceil(float64(n) * (1 + r)))
	return Dist{Kind: DistUniform, Min: lo, Max: hi}, nil
}

package measure

import (
	"math"
	"math/rand/v2"
	"time"
)

// Folded keeps what Summarize needs of a level's chunk times, folded in as
// each request ends (Add), so that the level keeps a few numbers per
// request rather than every token's instant: 200,000 conversation turns
// kept about 6.5 KB each with their chunks, and the pooled ITL arrays cost
// as much again when summarized.
//
// ITL and ITL per token are exact up to foldedCap (524,288) gaps each; past it each
// is a uniform sample of foldedCap gaps (reservoir sampling, seeded) for
// the percentiles and their intervals, while the count, mean and standard
// deviation stay exact. The peak output throughput counts tokens on a 10 ms
// grid, so its 1-second windows start within 10 ms of the first send.
type Folded struct {
	itl, itlTok reservoir
	tokens      map[int64]int // output tokens per foldGrid slot of arrival
}

// foldedCap is the most ITL gaps a Folded keeps of each kind: 4 MB,
// percentiles to a fraction of a percent.
const foldedCap = 1 << 19

// foldGrid is the resolution of the peak output throughput's windows.
const foldGrid = 10 * time.Millisecond

// NewFolded returns an empty Folded whose samples are drawn from seed.
func NewFolded(seed uint64) *Folded {
	rng := rand.New(rand.NewPCG(seed, 0xf01d))
	return &Folded{itl: reservoir{rng: rng}, itlTok: reservoir{rng: rng}, tokens: map[int64]int{}}
}

// Add folds finished record r in: first into the engine's time when the
// engine ran k times faster than real time (EngineTime), then its gaps
// and token arrivals when it is a measured success; it drops r's chunks
// and marks r folded, so that EngineTime leaves it alone afterwards.
func (f *Folded) Add(r *Record, k float64) {
	if r.folded {
		return
	}
	if k != 1 {
		one := []Record{*r}
		EngineTime(one, k)
		*r = one[0]
	}
	if !r.Warmup && r.Error == ErrNone {
		for j, c := range r.Chunks {
			f.tokens[int64(c.At/foldGrid)] += c.Tokens
			if j == 0 {
				continue
			}
			gap := ms(c.At - r.Chunks[j-1].At)
			f.itl.add(gap)
			n := max(c.Tokens, 1)
			for range n {
				f.itlTok.add(gap / float64(n))
			}
		}
	}
	r.Chunks = nil
	r.folded = true
}

// peakOutput is the most output tokens in one 1-second window [k, k+1) s
// after first, on the fold's grid.
func (f *Folded) peakOutput(first time.Duration) float64 {
	origin := int64(first / foldGrid)
	per := int64(time.Second / foldGrid)
	win := map[int64]int{}
	for slot, n := range f.tokens {
		win[floorDiv(slot-origin, per)] += n
	}
	peak := 0
	for _, n := range win {
		peak = max(peak, n)
	}
	return float64(peak)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// reservoir keeps up to foldedCap values, a uniform sample of all it was
// given past that, with their exact count, sum and sum of squares.
type reservoir struct {
	rng     *rand.Rand
	values  []float64
	n       int64
	sum, sq float64
}

func (r *reservoir) add(v float64) {
	r.n++
	r.sum += v
	r.sq += v * v
	if len(r.values) < foldedCap {
		r.values = append(r.values, v)
		return
	}
	if j := r.rng.Int64N(r.n); j < foldedCap {
		r.values[j] = v
	}
}

// stats is NewStats of the sample with the count, mean and standard
// deviation of every value given.
func (r *reservoir) stats(rng *rand.Rand, b int) Stats {
	s := NewStats(r.values, rng, b)
	if r.n > int64(len(r.values)) {
		s.N = int(r.n)
		s.Mean = r.sum / float64(r.n)
		s.Std = math.Sqrt(max(r.sq/float64(r.n)-s.Mean*s.Mean, 0))
	}
	return s
}

package measure

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultBootstrap is the number of bootstrap resamples for confidence
// intervals when SummaryOptions.Bootstrap is 0.
const DefaultBootstrap = 2000

// The statistics every package uses, one definition each (a check in
// stats_test.go keeps other packages from defining their own):
//
//   - percentiles: linear interpolation between the closest ranks
//     (Hyndman and Fan's type 7, numpy.percentile's default, the method
//     vLLM's benchmark uses): Percentile on sorted values, PercentileOf on
//     any, Median their 50th;
//   - bootstrap 95% intervals of a percentile (BootstrapCI,
//     BootstrapDiffCI, ClusterBootstrapDiffCI);
//   - Student's t 95% interval of a mean (MeanCI) and Welch's of a
//     difference of means (Welch);
//   - values of the data itself where an estimate must be one (a count
//     of requests, a bin edge that equal values share): the time-weighted
//     median of a gauge (WeightedMedian) and quartile edges (Quartiles).

// Number is a value the statistics accept.
type Number interface {
	~int | ~int64 | ~float64
}

// PercentileOf returns the p-th percentile (0..100) of xs, in any order,
// by Percentile's estimator; NaN for no values. xs is not changed.
func PercentileOf[T Number](xs []T, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := make([]float64, len(xs))
	for i, x := range xs {
		s[i] = float64(x)
	}
	slices.Sort(s)
	return Percentile(s, p)
}

// Median is the 50th percentile of xs (the mean of the middle two for an
// even count); NaN for no values. xs is not changed.
func Median[T Number](xs []T) float64 { return PercentileOf(xs, 50) }

// WeightedMedian is the median of values each held for a weight (a
// gauge's values and the time it held each): the smallest value at which
// the weights, values in ascending order, add up to half their total. It
// is one of the values, never between two, so a count stays a count. NaN
// when the total weight is not above 0.
func WeightedMedian(weights map[float64]float64) float64 {
	values := make([]float64, 0, len(weights))
	total := 0.0
	for v := range weights {
		values = append(values, v)
	}
	slices.Sort(values)
	for _, v := range values {
		total += weights[v]
	}
	if !(total > 0) {
		return math.NaN()
	}
	acc := 0.0
	for _, v := range values {
		acc += weights[v]
		if acc >= total/2 {
			return v
		}
	}
	return values[len(values)-1]
}

// Quartiles are the edges that split sorted values into four bins: the
// smallest values with more than a quarter, a half and three quarters of
// the values at or below them (sorted[⌊n/4⌋], sorted[⌊n/2⌋],
// sorted[⌊3n/4⌋]). Each is one of the values, not interpolated as
// Percentile's are, so that equal values fall in one bin. NaN for no
// values.
func Quartiles(sorted []float64) [3]float64 {
	n := len(sorted)
	if n == 0 {
		return [3]float64{math.NaN(), math.NaN(), math.NaN()}
	}
	return [3]float64{sorted[n/4], sorted[n/2], sorted[3*n/4]}
}

// MeanCI is the mean of xs and its 95% interval by Student's t
// ([mean, mean] for fewer than two values: nothing is known of the
// noise). The mean of no values is NaN.
func MeanCI(xs []float64) (mean float64, ci [2]float64) {
	if len(xs) == 0 {
		return math.NaN(), [2]float64{math.NaN(), math.NaN()}
	}
	v, m := sampleVariance(xs)
	if len(xs) < 2 {
		return m, [2]float64{m, m}
	}
	n := float64(len(xs))
	se := math.Sqrt(v / n)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(0.975)
	return m, [2]float64{m - t*se, m + t*se}
}

// Welch is the difference of the means of a and b (mean(a) − mean(b)) and
// its 95% interval by Welch's t (unequal variances, Welch–Satterthwaite
// degrees of freedom). ok is false with fewer than two values on either
// side. Samples without spread give the exact difference as the interval.
func Welch(a, b []float64) (diff float64, ci [2]float64, ok bool) {
	if len(a) < 2 || len(b) < 2 {
		return 0, ci, false
	}
	va, ma := sampleVariance(a)
	vb, mb := sampleVariance(b)
	na, nb := float64(len(a)), float64(len(b))
	sa, sb := va/na, vb/nb
	se := math.Sqrt(sa + sb)
	diff = ma - mb
	if se == 0 {
		return diff, [2]float64{diff, diff}, true
	}
	df := (sa + sb) * (sa + sb) / (sa*sa/(na-1) + sb*sb/(nb-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(0.975)
	return diff, [2]float64{diff - t*se, diff + t*se}, true
}

// sampleVariance is the unbiased variance of xs (0 for one value) and
// their mean.
func sampleVariance(xs []float64) (v, m float64) {
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	if len(xs) < 2 {
		return 0, m
	}
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return v / float64(len(xs)-1), m
}

// Percentile returns the p-th percentile (0..100) of sorted values with
// linear interpolation between closest ranks, as numpy.percentile does (the
// method vLLM's benchmark uses). It returns 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := p / 100 * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// NewStats summarises values (milliseconds). It sorts values in place. The
// standard deviation is the population one (numpy's default, as in vLLM).
// Confidence intervals use rng; nil rng or b <= 0 leaves them zero.
func NewStats(values []float64, rng *rand.Rand, b int) Stats {
	n := len(values)
	if n == 0 {
		return Stats{}
	}
	sortFloats(values)
	sum := 0.0
	for _, v := range values {
		sum += v
	}
	mean := sum / float64(n)
	ss := 0.0
	for _, v := range values {
		ss += (v - mean) * (v - mean)
	}
	s := Stats{
		N: n, Mean: mean, Std: math.Sqrt(ss / float64(n)),
		Median: Percentile(values, 50), P50: Percentile(values, 50),
		P90: Percentile(values, 90), P95: Percentile(values, 95),
		P99: Percentile(values, 99), P999: Percentile(values, 99.9),
	}
	if rng != nil && b > 0 {
		s.MedianCI = BootstrapCI(values, 50, rng, b)
		s.P99CI = BootstrapCI(values, 99, rng, b)
	}
	return s
}

// orderStatSampler draws, for a sorted sample of n values, the index of the
// p-th percentile of a bootstrap resample (n draws with replacement).
//
// Why not resample: the k-th smallest of n draws with replacement from the
// sorted sample is sorted[floor(n·U(k))], where U(k), the k-th order statistic
// of n uniforms, is Beta(k, n+1-k) distributed. Drawing U(k) directly is the
// same bootstrap distribution (for the nearest-rank percentile) at O(1) per
// resample instead of O(n log n), which matters for pooled ITL samples of
// hundreds of thousands of values.
type orderStatSampler struct {
	n    int
	beta distuv.Beta
}

func newOrderStatSampler(n int, p float64, rng *rand.Rand) orderStatSampler {
	k := int(math.Round(p/100*float64(n-1))) + 1 // 1-based rank
	return orderStatSampler{n: n, beta: distuv.Beta{Alpha: float64(k), Beta: float64(n + 1 - k), Src: rng}}
}

func (o orderStatSampler) index() int {
	return min(int(o.beta.Rand()*float64(o.n)), o.n-1)
}

// BootstrapCI returns the percentile-bootstrap 95% confidence interval of the
// p-th percentile of sorted, with b resamples.
func BootstrapCI(sorted []float64, p float64, rng *rand.Rand, b int) [2]float64 {
	n := len(sorted)
	if n == 0 || b <= 0 {
		return [2]float64{}
	}
	if n == 1 {
		return [2]float64{sorted[0], sorted[0]}
	}
	o := newOrderStatSampler(n, p, rng)
	est := make([]float64, b)
	for i := range est {
		est[i] = sorted[o.index()]
	}
	slices.Sort(est)
	return [2]float64{Percentile(est, 2.5), Percentile(est, 97.5)}
}

// BootstrapDiffCI returns the 95% bootstrap confidence interval of
// pct(new) - pct(base), the two samples resampled independently. Both inputs
// must be sorted.
func BootstrapDiffCI(base, new []float64, p float64, rng *rand.Rand, b int) [2]float64 {
	if len(base) == 0 || len(new) == 0 || b <= 0 {
		return [2]float64{}
	}
	ob, on := newOrderStatSampler(len(base), p, rng), newOrderStatSampler(len(new), p, rng)
	est := make([]float64, b)
	for i := range est {
		est[i] = new[on.index()] - base[ob.index()]
	}
	slices.Sort(est)
	return [2]float64{Percentile(est, 2.5), Percentile(est, 97.5)}
}

// ClusterBootstrapDiffCI is the bootstrap 95% interval of the difference
// new − base of the p-th percentile (0-100) when values come in clusters:
// counts gives each cluster's size, in the order of the values. Whole
// clusters are resampled, as the gaps of one stream are not independent;
// resampling single values would give too narrow an interval. Percentiles
// are found by selection, not sorting, so b resamples of 10^5 values stay
// fast.
func ClusterBootstrapDiffCI(base []float64, baseCounts []int, new []float64, newCounts []int, p float64, rng *rand.Rand, b int) [2]float64 {
	bo, no := clusterOffsets(baseCounts, len(base)), clusterOffsets(newCounts, len(new))
	if bo == nil || no == nil || b <= 0 {
		return [2]float64{}
	}
	var buf []float64
	est := make([]float64, 0, b)
	for range b {
		n, okN := resampleClusters(new, no, p, rng, &buf)
		o, okB := resampleClusters(base, bo, p, rng, &buf)
		if okN && okB {
			est = append(est, n-o)
		}
	}
	if len(est) == 0 {
		return [2]float64{}
	}
	slices.Sort(est)
	return [2]float64{Percentile(est, 2.5), Percentile(est, 97.5)}
}

// clusterOffsets turns cluster sizes into start offsets (len+1 entries),
// nil when they do not add up to n or there is no cluster.
func clusterOffsets(counts []int, n int) []int {
	if len(counts) == 0 {
		return nil
	}
	off := make([]int, len(counts)+1)
	for i, c := range counts {
		if c < 0 {
			return nil
		}
		off[i+1] = off[i] + c
	}
	if off[len(counts)] != n {
		return nil
	}
	return off
}

// resampleClusters draws len(off)-1 clusters with replacement into *buf and
// returns the p-th percentile of their values (numpy's linear method).
func resampleClusters(vals []float64, off []int, p float64, rng *rand.Rand, buf *[]float64) (float64, bool) {
	*buf = (*buf)[:0]
	k := len(off) - 1
	for range k {
		c := rng.IntN(k)
		*buf = append(*buf, vals[off[c]:off[c+1]]...)
	}
	x := *buf
	if len(x) == 0 {
		return 0, false
	}
	h := (float64(len(x)) - 1) * p / 100
	lo := int(math.Floor(h))
	v := selectKth(x, lo)
	if lo+1 < len(x) && h > float64(lo) {
		// After selection every value right of lo is >= x[lo]; the next
		// order statistic is their minimum.
		next := slices.Min(x[lo+1:])
		v += (h - float64(lo)) * (next - v)
	}
	return v, true
}

// selectKth reorders x so that x[k] is its k-th smallest value (Hoare's
// quickselect with a middle pivot) and returns it.
func selectKth(x []float64, k int) float64 {
	lo, hi := 0, len(x)-1
	for lo < hi {
		pivot := x[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for x[i] < pivot {
				i++
			}
			for x[j] > pivot {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return x[k]
		}
	}
	return x[k]
}

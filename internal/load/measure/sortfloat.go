package measure

import (
	"math"
	"slices"
	"sync"
)

// radixMin is the fewest values sortFloats radix-sorts: below it the
// comparison sort is as fast.
const radixMin = 1024

// radixBufs are sortFloats' key buffers, reused: a study sorts a level's
// gaps after every probe.
var radixBufs = sync.Pool{New: func() any { return new([]uint64) }}

// sortFloats sorts v in ascending order, as slices.Sort does: a level's
// inter-token gaps (hundreds of thousands) by an LSD radix sort over the
// values' bits, ordered as the numbers are, 11 bits a pass, a pass
// skipped where every value has the same digit, and none when v is
// already sorted. Equal numbers have equal bits but for NaN and the two
// zeros, so the order is the one any sort gives; a slice holding NaN or
// -0 takes slices.Sort.
func sortFloats(v []float64) {
	n := len(v)
	if n < radixMin {
		slices.Sort(v)
		return
	}
	buf := radixBufs.Get().(*[]uint64)
	defer radixBufs.Put(buf)
	if cap(*buf) < 2*n {
		*buf = make([]uint64, 2*n)
	}
	keys := (*buf)[:2*n]
	src, dst := keys[:n], keys[n:]
	sorted := true
	for i, x := range v {
		b := math.Float64bits(x)
		if x != x || b == 1<<63 { // NaN or -0
			slices.Sort(v)
			return
		}
		// Negative numbers' bits are flipped, positive ones' sign set:
		// the keys then order as unsigned integers as the numbers do.
		if b>>63 != 0 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		src[i] = b
		sorted = sorted && (i == 0 || src[i-1] <= b)
	}
	if sorted {
		return
	}
	const bits, size = 11, 1 << 11
	var count [size]int
	for shift := uint(0); shift < 64; shift += bits {
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&(size-1)]++
		}
		if count[(src[0]>>shift)&(size-1)] == n {
			continue // one digit: the pass would keep the order
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range src {
			d := (k >> shift) & (size - 1)
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	for i, k := range src {
		if k>>63 != 0 {
			k &^= 1 << 63
		} else {
			k = ^k
		}
		v[i] = math.Float64frombits(k)
	}
}

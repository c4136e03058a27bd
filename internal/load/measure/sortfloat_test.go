package measure

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortFloats orders every slice as slices.Sort does, bit for bit:
// negative and positive values, repeats, infinities, and the NaN and -0
// it leaves to slices.Sort.
func TestSortFloats(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := map[string]func(i int) float64{
		"gaps":    func(int) float64 { return math.Round(rng.ExpFloat64()*4000) / 100 },
		"signed":  func(int) float64 { return rng.NormFloat64() * 1e3 },
		"repeats": func(i int) float64 { return float64(i % 7) },
		"sorted":  func(i int) float64 { return float64(i/3) - 100 },
		"extremes": func(i int) float64 {
			return []float64{math.Inf(1), math.Inf(-1), 0, math.SmallestNonzeroFloat64, -math.MaxFloat64, 1}[i%6]
		},
		"nan":     func(i int) float64 { return []float64{math.NaN(), 1, -2}[i%3] },
		"negzero": func(i int) float64 { return []float64{math.Copysign(0, -1), 0, 3}[i%3] },
	}
	for name, f := range gen {
		for _, n := range []int{0, 1, 10, radixMin, 50_000} {
			v := make([]float64, n)
			for i := range v {
				v[i] = f(i)
			}
			want := slices.Clone(v)
			slices.Sort(want)
			sortFloats(v)
			for i := range v {
				if math.Float64bits(v[i]) != math.Float64bits(want[i]) && !(math.IsNaN(v[i]) && math.IsNaN(want[i])) {
					t.Fatalf("%s, %d values: [%d] = %v, want %v", name, n, i, v[i], want[i])
				}
			}
		}
	}
}

// BenchmarkSortFloats sorts a level's inter-token gaps: 150,000 values
// with few distinct ones (a step's tokens share its gap).
func BenchmarkSortFloats(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float64, 150_000)
	for i := range v {
		v[i] = math.Round(rng.ExpFloat64()*4000) / 100
	}
	w := make([]float64, len(v))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(w, v)
			sortFloats(w)
		}
	})
	b.Run("slices.Sort", func(b *testing.B) {
		for b.Loop() {
			copy(w, v)
			slices.Sort(w)
		}
	})
}

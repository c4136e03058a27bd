package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

func TestParseDist(t *testing.T) {
	tests := []struct {
		in      string
		want    Dist
		wantErr bool
	}{
		{"1024", Dist{Kind: DistFixed, Value: 1024}, false},
		{"fixed:7", Dist{Kind: DistFixed, Value: 7}, false},
		{"uniform:64,512", Dist{Kind: DistUniform, Min: 64, Max: 512}, false},
		{"uniform: 64 , 512", Dist{Kind: DistUniform, Min: 64, Max: 512}, false},
		{"lognormal:median=1024,sigma=0.6", Dist{Kind: DistLognormal, Median: 1024, Sigma: 0.6}, false},
		{"lognormal:median=1024,sigma=0.6,min=16,max=4096", Dist{Kind: DistLognormal, Median: 1024, Sigma: 0.6, Min: 16, Max: 4096}, false},
		{"normal:mean=512,sigma=100", Dist{Kind: DistNormal, Mean: 512, Sigma: 100}, false},
		{"normal:mean=512,std=100", Dist{Kind: DistNormal, Mean: 512, Sigma: 100}, false},
		{"", Dist{}, true},
		{"0", Dist{}, true},
		{"-5", Dist{}, true},
		{"abc", Dist{}, true},
		{"uniform:5", Dist{}, true},
		{"uniform:9,3", Dist{}, true},
		{"lognormal:median=x,sigma=1", Dist{}, true},
		{"lognormal:median=100,sigma=-1", Dist{}, true},
		{"lognormal:median=100,shape=1", Dist{}, true},
		{"lognormal:median", Dist{}, true},
		{"normal:mean=NaN,sigma=1", Dist{}, true},
		{"zipf:1.1", Dist{}, true},
		{"lognormal:median=100,sigma=1,min=50,max=10", Dist{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDist(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrBadDist) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line wrapping ErrBadDist", err)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			back, err := ParseDist(got.String())
			if err != nil || back != got {
				t.Errorf("String round trip %q -> %+v, %v", got.String(), back, err)
			}
		})
	}
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"12", "uniform:1,9", "lognormal:median=100,sigma=0.5,max=300", "normal:mean=5,sigma=2,min=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			return
		}
		rng := newRNG(1, 1)
		for range 20 {
			n := d.Sample(rng)
			if n < 1 || (d.Max > 0 && n > d.Max) {
				t.Fatalf("%q: sample %d out of range", s, n)
			}
		}
	})
}

func TestDistSample(t *testing.T) {
	rng := newRNG(1, 2)
	tests := []struct {
		d        Dist
		lo, hi   int
		wantMean float64 // 0: not checked
	}{
		{Dist{Kind: DistFixed, Value: 9}, 9, 9, 9},
		{Dist{Kind: DistUniform, Min: 10, Max: 20}, 10, 20, 15},
		{Dist{Kind: DistLognormal, Median: 100, Sigma: 0.5}, 1, 1 << 30, 100 * math.Exp(0.125)},
		{Dist{Kind: DistNormal, Mean: 200, Sigma: 20, Min: 150, Max: 250}, 150, 250, 200},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			sum := 0.0
			const n = 20000
			for range n {
				v := tc.d.Sample(rng)
				if v < tc.lo || v > tc.hi {
					t.Fatalf("sample %d outside [%d, %d]", v, tc.lo, tc.hi)
				}
				sum += float64(v)
			}
			if mean := sum / n; tc.wantMean > 0 && math.Abs(mean-tc.wantMean)/tc.wantMean > 0.02 {
				t.Errorf("mean %g, want %g ± 2%%", mean, tc.wantMean)
			}
		})
	}
}

func TestRangeDist(t *testing.T) {
	tests := []struct {
		n       int
		r       float64
		want    Dist
		wantErr bool
	}{
		{100, 0, Dist{Kind: DistFixed, Value: 100}, false},
		{100, 0.5, Dist{Kind: DistUniform, Min: 50, Max: 150}, false},
		{1, 0.9, Dist{Kind: DistUniform, Min: 1, Max: 2}, false},
		{0, 0, Dist{}, true},
		{100, 1, Dist{}, true},
		{100, -0.1, Dist{}, true},
	}
	for _, tc := range tests {
		got, err := RangeDist(tc.n, tc.r)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("RangeDist(%d, %g) = %+v, %v; want %+v", tc.n, tc.r, got, err, tc.want)
		}
	}
}

func TestSchedule(t *testing.T) {
	t.Run("infinite rate sends at once", func(t *testing.T) {
		for _, s := range (measure.Load{}).Schedule(newRNG(1, 1), 5) {
			if s != 0 {
				t.Fatalf("offset %v, want 0", s)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		l := measure.Load{Rate: 10, Burstiness: 0.5}
		if !slices.Equal(l.Schedule(newRNG(7, 1), 50), l.Schedule(newRNG(7, 1), 50)) {
			t.Error("equal seeds gave different schedules")
		}
	})
	for _, shape := range []float64{1, 0.25, 4} {
		t.Run("gamma mean and spread", func(t *testing.T) {
			const n = 20000
			s := measure.Load{Rate: 50, Burstiness: shape}.Schedule(newRNG(3, 1), n)
			if !slices.IsSorted(s) {
				t.Fatal("offsets not increasing")
			}
			gaps := make([]float64, n)
			prev := time.Duration(0)
			for i, v := range s {
				gaps[i] = (v - prev).Seconds()
				prev = v
			}
			mean, varsum := 0.0, 0.0
			for _, g := range gaps {
				mean += g
			}
			mean /= n
			for _, g := range gaps {
				varsum += (g - mean) * (g - mean)
			}
			cv2 := varsum / n / (mean * mean) // gamma: 1/shape
			if math.Abs(mean-0.02)/0.02 > 0.03 {
				t.Errorf("shape %g: mean gap %g s, want 0.02", shape, mean)
			}
			if math.Abs(cv2-1/shape)/(1/shape) > 0.1 {
				t.Errorf("shape %g: squared CV %g, want %g", shape, cv2, 1/shape)
			}
		})
	}
}

func newRNG(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

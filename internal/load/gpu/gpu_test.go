package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestOpen checks the real NVML: on a host without a driver (CI, this
// machine) Open must fail softly with "no GPU telemetry: <reason>"; on a GPU
// host it must list devices and read them.
func TestOpen(t *testing.T) {
	n, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNoTelemetry) {
			t.Fatalf("Open error %v does not wrap ErrNoTelemetry", err)
		}
		if !strings.HasPrefix(err.Error(), "no GPU telemetry: ") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Open error %q is not one line starting with %q", err, "no GPU telemetry: ")
		}
		t.Logf("degraded as expected: %v", err)
		return
	}
	defer n.Close()
	devs, err := n.Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices = %v, %v", devs, err)
	}
	for _, d := range devs {
		s, err := n.Read(d.Index)
		if err != nil {
			t.Fatalf("Read(%d): %v", d.Index, err)
		}
		if s.MemTotal == 0 || s.MemTotal != d.MemTotal {
			t.Errorf("gpu %d: MemTotal %d, device says %d", d.Index, s.MemTotal, d.MemTotal)
		}
		t.Logf("gpu %d %s: %+v", d.Index, d.Name, s)
	}
	sm := NewSampler(n, []int{devs[0].Index}, 50*time.Millisecond)
	sm.Start(context.Background())
	time.Sleep(300 * time.Millisecond) // the window the sampler measures, on real GPUs
	got := sm.Stop()
	if len(got) < 2 {
		t.Errorf("sampler took %d samples in 300ms at 50ms", len(got))
	}
	t.Logf("energy over %d samples: %.3f J", len(got), EnergyJoules(got))
}

// counter is a Reader whose readings count up, so tests can check order.
type counter struct {
	mu   sync.Mutex
	n    map[int]uint64
	fail int // GPU index whose reads fail
}

func (c *counter) Read(g int) (Sample, error) {
	if g == c.fail {
		return Sample{}, fmt.Errorf("gpu %d: gone", g)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[g]++
	return Sample{GPU: g, EnergyMilliJ: 1000 * c.n[g], PowerW: 100}, nil
}

func TestSamplerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &counter{n: map[int]uint64{}, fail: -1}
		s := NewSampler(r, []int{0, 1}, time.Second)
		s.Start(context.Background())
		time.Sleep(5*time.Second + time.Millisecond)
		got := s.Stop()
		// 1 at Start, 5 ticks, 1 at Stop, for each of 2 GPUs.
		if len(got) != 14 {
			t.Fatalf("got %d samples, want 14", len(got))
		}
		for i := 2; i < len(got); i++ {
			if got[i].Time.Before(got[i-1].Time) {
				t.Fatalf("samples out of order at %d", i)
			}
		}
		if e := EnergyJoules(got); e != 12 { // each GPU: counter 1000→7000 mJ
			t.Errorf("EnergyJoules = %v, want 12", e)
		}
		if n, err := s.Err(); n != 0 || err != nil {
			t.Errorf("Err = %d, %v", n, err)
		}
	})
}

func TestSamplerContextEndsAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &counter{n: map[int]uint64{}, fail: 7}
		ctx, cancel := context.WithCancel(context.Background())
		s := NewSampler(r, []int{0, 7}, 0)
		s.Start(ctx)
		time.Sleep(DefaultInterval + time.Millisecond)
		cancel()
		time.Sleep(10 * DefaultInterval) // no more ticks after ctx ends
		got := s.Stop()
		if len(got) != 3 { // start, one tick, stop; GPU 7 always fails
			t.Fatalf("got %d samples, want 3", len(got))
		}
		n, err := s.Err()
		if n != 3 || err == nil || !strings.Contains(err.Error(), "gpu 7") {
			t.Errorf("Err = %d, %v; want 3 failures naming gpu 7", n, err)
		}
	})
}

func TestSamplerStopWithoutStart(t *testing.T) {
	if got := NewSampler(&counter{}, []int{0}, 0).Stop(); got != nil {
		t.Errorf("Stop without Start = %v", got)
	}
}

func TestEnergyJoules(t *testing.T) {
	tests := []struct {
		name string
		in   []Sample
		want float64
	}{
		{"empty", nil, 0},
		{"one sample", []Sample{{GPU: 0, EnergyMilliJ: 5000}}, 0},
		{"two GPUs", []Sample{{GPU: 0, EnergyMilliJ: 1000}, {GPU: 1, EnergyMilliJ: 10}, {GPU: 0, EnergyMilliJ: 3500}, {GPU: 1, EnergyMilliJ: 1010}}, 3.5},
		{"no counter", []Sample{{GPU: 0}, {GPU: 0}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EnergyJoules(tt.in); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []Sample{
		// GPU 0 has an energy counter: 600 J over the level.
		{Time: at(0), GPU: 0, PowerW: 300, UtilGPU: 90, UtilMem: 40, MemUsed: 70 << 30, SMClockMHz: 1980, TempC: 60, EnergyMilliJ: 1_000_000},
		// GPU 1 has none: 2 s at 100 W, then 2 s at 300 W (trapezoids: 200 + 400 + 600 J).
		{Time: at(0), GPU: 1, PowerW: 100, UtilGPU: 10, UtilMem: 5, MemUsed: 60 << 30, SMClockMHz: 1410, TempC: 50},
		{Time: at(2), GPU: 0, PowerW: 320, UtilGPU: 100, UtilMem: 50, MemUsed: 71 << 30, SMClockMHz: 1980, TempC: 66, EnergyMilliJ: 1_600_000},
		{Time: at(2), GPU: 1, PowerW: 100, UtilGPU: 10, UtilMem: 5, MemUsed: 60 << 30, SMClockMHz: 1410, TempC: 51},
		{Time: at(4), GPU: 1, PowerW: 300, UtilGPU: 30, UtilMem: 15, MemUsed: 61 << 30, SMClockMHz: 1410, TempC: 52},
	}
	u := Usage(samples, 24_000)
	if u.GPUs != 2 || u.Samples != 5 {
		t.Fatalf("usage %+v", u)
	}
	if u.EnergyJ != 600+600 {
		t.Errorf("energy %v J, want 1200 (600 from GPU 0's counter, 600 from GPU 1's power)", u.EnergyJ)
	}
	if u.OutputTokensPerJoule != 20 {
		t.Errorf("tokens per joule %v, want 20", u.OutputTokensPerJoule)
	}
	if u.PeakPowerW != 320 || u.PeakTempC != 66 || u.PeakMemUsedBytes != 71<<30 {
		t.Errorf("peaks %+v", u)
	}
	if want := 310.0 + 500.0/3; math.Abs(u.MeanPowerW-want) > 1e-9 {
		t.Errorf("mean power %v, want %v (the GPUs' means summed)", u.MeanPowerW, want)
	}
	if u.MeanUtilPct != 48 {
		t.Errorf("mean utilisation %v, want 48", u.MeanUtilPct)
	}
	if Usage(nil, 10) != nil {
		t.Error("usage of no sample")
	}
}

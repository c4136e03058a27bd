package gpu

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/periodic"
)

// ErrNoTelemetry is wrapped by Open's error when NVML cannot be used: no
// driver library, no GPU, or a binary built without cgo. Callers go on
// without GPU metrics.
var ErrNoTelemetry = errors.New("no GPU telemetry")

// Sample is one reading of one GPU. Fields NVML does not support on a device
// stay zero.
type Sample struct {
	Time         time.Time `json:"time"`
	GPU          int       `json:"gpu"` // NVML index
	PowerW       float64   `json:"power_w"`
	MemUsed      uint64    `json:"mem_used_bytes"`
	MemTotal     uint64    `json:"mem_total_bytes"`
	UtilGPU      float64   `json:"util_gpu_pct"` // share of time a kernel ran, percent
	UtilMem      float64   `json:"util_mem_pct"` // share of time memory was read or written, percent
	SMClockMHz   uint32    `json:"sm_clock_mhz"`
	TempC        uint32    `json:"temp_c"`    // GPU core temperature, Celsius
	EnergyMilliJ uint64    `json:"energy_mj"` // counter since the driver loaded
}

// Device describes one GPU.
type Device struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	MemTotal uint64 `json:"mem_total_bytes"`
}

// Reader reads one sample of a GPU. *NVML implements it.
type Reader interface {
	Read(gpu int) (Sample, error)
}

// DefaultInterval is the sampling period when none is given.
const DefaultInterval = 500 * time.Millisecond

// Sampler reads a set of GPUs at a fixed interval into memory between Start
// and Stop. One reading is taken at Start and one at Stop, so energy counters
// span the whole window.
type Sampler struct {
	r     Reader
	gpus  []int
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	samples []Sample
	errs    int
	first   error

	loop *periodic.Loop
}

// NewSampler returns a sampler of gpus (NVML indices) read from r every
// interval (DefaultInterval when <= 0).
func NewSampler(r Reader, gpus []int, every time.Duration) *Sampler {
	if every <= 0 {
		every = DefaultInterval
	}
	return &Sampler{r: r, gpus: append([]int(nil), gpus...), every: every, now: time.Now}
}

// Start begins sampling until Stop or ctx ends. Calling Start twice panics,
// like starting a second loop on one slice would corrupt it.
func (s *Sampler) Start(ctx context.Context) {
	if s.loop != nil {
		panic("gpu: Sampler started twice")
	}
	s.loop = periodic.Start(ctx, s.every, func(context.Context) { s.readAll() })
}

func (s *Sampler) readAll() {
	for _, g := range s.gpus {
		smp, err := s.r.Read(g)
		s.mu.Lock()
		if err != nil {
			s.errs++
			if s.first == nil {
				s.first = err
			}
		} else {
			if smp.Time.IsZero() {
				smp.Time = s.now()
			}
			s.samples = append(s.samples, smp)
		}
		s.mu.Unlock()
	}
}

// Stop ends sampling, takes a last reading and returns every sample in time
// order. It returns nil when Start was never called.
func (s *Sampler) Stop() []Sample {
	if s.loop == nil {
		return nil
	}
	s.loop.Stop()
	s.readAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.samples
	s.samples = nil
	return out
}

// Err reports how many reads failed and the first failure.
func (s *Sampler) Err() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs, s.first
}

// EnergyJoules sums, over GPUs, the energy counter's rise between a GPU's
// first and last sample. GPUs without an energy counter add nothing.
func EnergyJoules(samples []Sample) float64 {
	type span struct{ first, last uint64 }
	by := map[int]*span{}
	for _, s := range samples {
		if s.EnergyMilliJ == 0 {
			continue
		}
		if r, ok := by[s.GPU]; ok {
			r.last = s.EnergyMilliJ
		} else {
			by[s.GPU] = &span{s.EnergyMilliJ, s.EnergyMilliJ}
		}
	}
	var mj uint64
	for _, r := range by {
		if r.last > r.first {
			mj += r.last - r.first
		}
	}
	return float64(mj) / 1000
}

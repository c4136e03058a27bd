//go:build cgo && linux

package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is an open NVML session. Safe for concurrent use (NVML is thread-safe).
type NVML struct {
	mu      sync.Mutex
	handles map[int]nvml.Device
	closed  bool
}

var _ Reader = (*NVML)(nil)

// Open initialises NVML. Without a driver or GPU it returns an error wrapping
// ErrNoTelemetry that reads "no GPU telemetry: <reason>"; it never panics.
func Open() (n *NVML, err error) {
	defer func() {
		// go-nvml loads libnvidia-ml with dlopen; guard against a broken
		// library turning into a crash of the whole study.
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("%w: NVML panicked: %v", ErrNoTelemetry, r)
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: NVML init: %v", ErrNoTelemetry, nvmlError(ret))
	}
	count, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("%w: NVML device count: %v", ErrNoTelemetry, nvmlError(ret))
	}
	if count == 0 {
		nvml.Shutdown()
		return nil, fmt.Errorf("%w: NVML sees no GPU", ErrNoTelemetry)
	}
	return &NVML{handles: map[int]nvml.Device{}}, nil
}

func nvmlError(ret nvml.Return) string {
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		return "libnvidia-ml.so.1 not found (no NVIDIA driver on this host)"
	}
	return nvml.ErrorString(ret)
}

// Close ends the NVML session.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %v", nvml.ErrorString(ret))
	}
	return nil
}

func (n *NVML) handle(i int) (nvml.Device, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("gpu %d: NVML session closed", i)
	}
	if d, ok := n.handles[i]; ok {
		return d, nil
	}
	d, ret := nvml.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("gpu %d: %v", i, nvml.ErrorString(ret))
	}
	n.handles[i] = d
	return d, nil
}

// Devices lists the GPUs NVML sees.
func (n *NVML) Devices() ([]Device, error) {
	count, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %v", nvml.ErrorString(ret))
	}
	out := make([]Device, 0, count)
	for i := range count {
		d, err := n.handle(i)
		if err != nil {
			return nil, err
		}
		dev := Device{Index: i}
		dev.Name, _ = d.GetName()
		dev.UUID, _ = d.GetUUID()
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			dev.MemTotal = m.Total
		}
		out = append(out, dev)
	}
	return out, nil
}

// Read samples GPU i. Fields the device does not support stay zero; only a
// missing device is an error.
func (n *NVML) Read(i int) (Sample, error) {
	d, err := n.handle(i)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{GPU: i}
	if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
		s.PowerW = float64(mw) / 1000
	}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.MemUsed, s.MemTotal = m.Used, m.Total
	}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		s.UtilGPU, s.UtilMem = float64(u.Gpu), float64(u.Memory)
	}
	if c, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		s.SMClockMHz = c
	}
	if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		s.TempC = t
	}
	if e, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
		s.EnergyMilliJ = e
	}
	return s, nil
}

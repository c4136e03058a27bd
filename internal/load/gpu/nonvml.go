//go:build !cgo || !linux

package gpu

import (
	"errors"
	"fmt"
)

// NVML is an open NVML session; this build has none (go-nvml needs cgo on
// Linux), so Open always fails. Static binaries such as the sim image use it.
type NVML struct{}

var _ Reader = (*NVML)(nil)

// Open reports that this binary has no NVML support.
func Open() (*NVML, error) {
	return nil, fmt.Errorf("%w: binary built without cgo/NVML support", ErrNoTelemetry)
}

// Close does nothing.
func (*NVML) Close() error { return nil }

// Devices is never reached: Open fails.
func (*NVML) Devices() ([]Device, error) { return nil, errors.New("gpu: no NVML in this build") }

// Read is never reached: Open fails.
func (*NVML) Read(int) (Sample, error) { return Sample{}, errors.New("gpu: no NVML in this build") }

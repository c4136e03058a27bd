package launcher

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Environment variables that carry sim-only facts to `servetune sim serve`.
const (
	EnvSimGPU       = "SERVETUNE_SIM_GPU"
	EnvSimNumGPUs   = "SERVETUNE_SIM_NUM_GPUS"
	EnvSimTimeScale = "SERVETUNE_SIM_TIME_SCALE"
)

// Sim launches the simulated engine as a subprocess:
//
//	<Binary> sim serve --model M <Spec.Args> --host 127.0.0.1 --port P [--sim-load-time D]
//
// with the GPU type, GPU count and time scale in SERVETUNE_SIM_* variables.
// It is the Process launcher underneath, so Stop, Logs and Exiter behave alike.
type Sim struct {
	Binary    string        // servetune binary; default os.Executable()
	GPU       string        // catalog GPU name, e.g. H100-SXM; "" = the sim's default
	NumGPUs   int           // 0 = len(Spec.GPUs), or the sim's default when that is empty too
	TimeScale float64       // >1 runs faster than real time; 0 = the sim's default
	LoadTime  time.Duration // simulated start-up time; 0 = the sim's default

	StopTimeout  time.Duration // default DefaultStopTimeout
	PollInterval time.Duration // default DefaultPollInterval
	LogBytes     int           // default DefaultLogBytes
}

var _ Launcher = (*Sim)(nil)

// Launch starts `servetune sim serve` for spec.
func (s *Sim) Launch(ctx context.Context, spec Spec) (Instance, error) {
	if spec.Model == "" {
		return nil, fmt.Errorf("%w: sim launcher needs a model", ErrBadSpec)
	}
	if s.NumGPUs < 0 || s.TimeScale < 0 || s.LoadTime < 0 {
		return nil, fmt.Errorf("%w: sim launcher: negative GPU count, time scale or load time", ErrBadSpec)
	}
	bin := s.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sim launcher: find the servetune binary: %w", err)
		}
	}
	cmd := []string{bin, "sim", "serve", "--model", "{model}", "{args}", "--host", "{host}", "--port", "{port}"}
	if s.LoadTime > 0 {
		cmd = append(cmd, "--sim-load-time", s.LoadTime.String())
	}
	spec.Env = append(append([]string(nil), spec.Env...), s.env(spec)...)
	p := Process{
		Command:      cmd,
		StopTimeout:  s.StopTimeout,
		PollInterval: s.PollInterval,
		LogBytes:     s.LogBytes,
	}
	return p.Launch(ctx, spec)
}

// env returns the SERVETUNE_SIM_* settings for spec.
func (s *Sim) env(spec Spec) []string {
	var env []string
	if s.GPU != "" {
		env = append(env, EnvSimGPU+"="+s.GPU)
	}
	n := s.NumGPUs
	if n == 0 {
		n = len(spec.GPUs)
	}
	if n > 0 {
		env = append(env, EnvSimNumGPUs+"="+strconv.Itoa(n))
	}
	if s.TimeScale > 0 {
		env = append(env, EnvSimTimeScale+"="+strconv.FormatFloat(s.TimeScale, 'g', -1, 64))
	}
	return env
}

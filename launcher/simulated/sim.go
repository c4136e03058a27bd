package simulated

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

// Sim launches the simulated engine as a subprocess, `servetune sim serve`,
// a drop-in for `vllm serve`: the engine's command line, with the GPU type,
// GPU count, engine and time scale in the SERVETUNE_SIM_* variables
// (engine.SimEnv). It is the Process launcher underneath, so Stop, Logs and
// Exiter behave alike.
type Sim struct {
	Binary    string        // servetune binary; default os.Executable()
	GPU       string        // catalog GPU name, e.g. H100-SXM; "" = the sim's default
	NumGPUs   int           // 0 = len(launcher.Spec.GPUs), or the sim's default when that is empty too
	Scale     float64       // time scale: >1 runs faster than real time; 0 = real time
	LoadTime  time.Duration // simulated start-up time; 0 = the sim's default
	PassEnv   []string      // names of variables handed to the engine
	ModelConf string        // a Hugging Face config.json for a model the catalog lacks
	// Calibration is a calibration profile for the simulator's constants
	// (SERVETUNE_SIM_CALIBRATION), refused for another GPU or engine
	// unless ForceCalibration.
	Calibration      string
	ForceCalibration bool

	StopTimeout  time.Duration // default launcher.DefaultStopTimeout
	PollInterval time.Duration // default DefaultPollInterval
	LogBytes     int           // default DefaultLogBytes
}

var _ launcher.Launcher = (*Sim)(nil)

// Capabilities: the engine's time scale, reaping of the local engines a
// killed run left, and the simulator's preflight.
func (s *Sim) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{Reap: s.Reap, TimeScale: s.TimeScale(), Preflight: s.Preflight}
}

// TimeScale is how many times faster than real time the engine runs.
func (s *Sim) TimeScale() float64 { return simenv.TimeScale(s.Scale) }

// Launch starts `servetune sim serve` for spec.
func (s *Sim) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	if spec.Model == "" {
		return nil, fmt.Errorf("%w: sim launcher needs a model", launcher.ErrBadSpec)
	}
	if s.NumGPUs < 0 || s.Scale < 0 || s.LoadTime < 0 {
		return nil, fmt.Errorf("%w: sim launcher: negative GPU count, time scale or load time", launcher.ErrBadSpec)
	}
	bin := s.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sim launcher: find the servetune binary: %w", err)
		}
	}
	cmd := append([]string{bin}, engine.SimServeArgs()...)
	if s.LoadTime > 0 {
		cmd = append(cmd, engine.SimLoadTimeArgs(s.LoadTime.String())...)
	}
	n := s.NumGPUs
	if n == 0 {
		n = len(spec.GPUs)
	}
	env := engine.SimEnv(s.GPU, n, s.Scale, "")
	env = append(env, engine.EnvSimEngine+"="+string(spec.Engine))
	if s.ModelConf != "" {
		env = append(env, engine.EnvSimModelConfig+"="+s.ModelConf)
	}
	if s.Calibration != "" {
		cal := s.Calibration
		if abs, err := filepath.Abs(cal); err == nil {
			cal = abs
		}
		env = append(env, engine.EnvSimCalibration+"="+cal)
		if s.ForceCalibration {
			cmd = append(cmd, engine.Flag(engine.VLLM, "sim_force_calibration"))
		}
	}
	spec.Env = append(env, spec.Env...)
	p := launcher.Process{
		Command:      cmd,
		PassEnv:      s.PassEnv,
		StopTimeout:  s.StopTimeout,
		PollInterval: s.PollInterval,
		LogBytes:     s.LogBytes,
	}
	return p.Launch(ctx, spec)
}

func init() {
	launcher.Register(launcher.Kind{
		Name: "sim",
		Doc:  "the simulated engine as a subprocess on the real clock (`servetune sim serve`), optionally time-scaled: tests the real path without a GPU",
		Keys: append(slices.Clone(simenv.Keys), CalibrationKeys...),
		Decode: func(d *yamlpos.Decoder, keys map[string]*yaml.Node, c launcher.Common) launcher.Launcher {
			scale, load := simenv.DecodeKeys(d, keys)
			s := &Sim{GPU: c.GPU, Scale: scale, LoadTime: load, PassEnv: c.Env, ModelConf: c.ModelConfig}
			s.Calibration, s.ForceCalibration = DecodeCalibration(d, keys)
			return s
		},
		Cleanup: launcher.CleanupLocal("sim"),
	})
}

// Reap stops the simulated engines that runs of study left.
func (s *Sim) Reap(ctx context.Context, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	return launcher.ReapLocal(ctx, "sim", study, keep, launcher.OrDefaultDuration(s.StopTimeout, launcher.DefaultStopTimeout))
}

// Preflight checks that the simulator knows the model and the GPU, and
// that the servetune binary is there.
func (s *Sim) Preflight(_ context.Context, spec launcher.Spec) error {
	if s.Binary != "" {
		if _, err := os.Stat(s.Binary); err != nil {
			return fmt.Errorf("sim launcher: %w", err)
		}
	}
	if err := simenv.Preflight(spec.Model, s.ModelConf, s.GPU); err != nil {
		return err
	}
	return CalibrationPreflight(s.Calibration, s.ForceCalibration, s.GPU, spec.Engine)
}

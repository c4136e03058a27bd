package tuner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/gpu"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/sim"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
)

// NewLauncher builds the launcher a spec names. binary is the servetune
// executable the sim launcher runs ("" = this process's executable).
func NewLauncher(sp *Spec, binary string) (launcher.Launcher, error) {
	l := sp.Launcher
	switch l.Kind {
	case LauncherSim:
		return &launcher.Sim{Binary: binary, GPU: sp.Hardware.GPU, TimeScale: l.TimeScale, LoadTime: l.LoadTime}, nil
	case LauncherProcess:
		return &launcher.Process{Command: l.Command}, nil
	case LauncherEndpoint:
		return &launcher.Endpoint{URL: l.BaseURL}, nil
	case LauncherDocker:
		profile := launcher.ProfileVLLM
		if sp.Engine == space.SGLang {
			profile = launcher.ProfileSGLang
		}
		hosts := l.DockerHosts()
		r := &hostRouter{}
		for _, h := range hosts {
			d := &launcher.Docker{Image: l.Image, Profile: profile, PassEnv: l.Env, Host: h.DockerHost, Address: h.Address}
			if l.SimImage() {
				d.NoGPU = true
				d.Env = []string{launcher.EnvSimTimeScale + "=" + strconv.FormatFloat(l.TimeScale, 'g', -1, 64)}
				if sp.Hardware.GPU != "" {
					d.Env = append(d.Env, launcher.EnvSimGPU+"="+sp.Hardware.GPU)
				}
				if l.LoadTime > 0 {
					d.Env = append(d.Env, sim.EnvLoadTime+"="+l.LoadTime.String())
				}
			}
			if len(l.Hosts) == 0 {
				return d, nil
			}
			r.hosts = append(r.hosts, d)
		}
		return r, nil
	}
	return nil, fmt.Errorf("launcher kind %q: want docker, process, endpoint or sim", l.Kind)
}

// TrialRunner is the production Evaluator: it checks the settings against
// the space's constraints and the simulator's memory model, renders the
// engine flags and runs the trial.
type TrialRunner struct {
	Spec     *Spec
	Launcher launcher.Launcher
	Bench    trial.BenchFunc                                 // default bench.Run
	GPUs     gpu.Reader                                      // NVML telemetry of real GPUs; nil = none
	Progress func(number int, level string, done, total int) // optional
}

var _ Evaluator = (*TrialRunner)(nil)

// Evaluate runs trial number with settings on gpus.
func (r *TrialRunner) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	sp := r.Spec
	if err := sp.Space.Check(set, r.checkContext(len(gpus))); err != nil {
		if msg, ok := oomMessage(err); ok {
			return trial.Failed(trial.FailOOM, msg)
		}
		return trial.Failed(trial.FailInfeasible, err.Error())
	}
	args, err := space.Render(sp.Engine, set)
	if err != nil {
		return trial.Failed(trial.FailInfeasible, err.Error())
	}
	args = append(args, sp.Space.Extra...)
	var env []string
	if sp.Launcher.SimImage() {
		env = append(env, launcher.EnvSimNumGPUs+"="+strconv.Itoa(max(len(gpus), 1)))
	}
	if sp.Launcher.Kind != LauncherDocker {
		// Docker reads PassEnv itself; values never reach the store.
		for _, name := range sp.Launcher.Env {
			if v, ok := os.LookupEnv(name); ok {
				env = append(env, name+"="+v)
			}
		}
	}
	plan := trial.Plan{
		Launcher: r.Launcher,
		Spec: launcher.Spec{Engine: string(sp.Engine), Model: sp.Model, Args: args, Env: env,
			GPUs: gpus, Study: sp.Name, Trial: number},
		ReadyTimeout:     sp.Launcher.ReadyTimeout,
		Dataset:          sp.Workload.Dataset,
		Levels:           sp.Workload.Levels,
		RequestsPerLevel: sp.Workload.RequestsPerLevel,
		Warmup:           sp.Workload.Warmup,
		Timeout:          sp.Workload.Timeout,
		Goodput:          sp.SLO.Goodput(),
		Seed:             uint64(sp.Tuner.Seed)*1_000_003 + uint64(number),
		TimeScale:        timeScale(sp),
		Bench:            r.Bench,
		GPUs:             r.GPUs,
		IsOOM: func(logs string) (string, bool) {
			if !sim.IsOOM(logs) {
				return trial.IsOOM(logs)
			}
			msg, _ := trial.IsOOM(logs)
			if msg == "" {
				msg = "out of GPU memory"
			}
			return msg, true
		},
	}
	if sp.Workload.Capacity {
		slo := sp.SLO
		plan.Capacity = &trial.Capacity{MaxConcurrency: sp.Workload.MaxConcurrency,
			Met: func(s bench.Summary) bool { return slo.Met(Point{GPUs: 1, Summary: s}) }}
	}
	if r.Progress != nil {
		plan.Progress = func(level string, done, total int) { r.Progress(number, level, done, total) }
	}
	return trial.Run(ctx, plan)
}

// checkContext gives space.Check the model's heads and, with precheck on,
// the simulator's memory model. Models the catalog does not know skip both.
func (r *TrialRunner) checkContext(gpus int) space.Context {
	sp := r.Spec
	c := space.Context{GPUs: gpus}
	cfg, err := sim.ParseArgs([]string{sp.Model}, r.simEnv(gpus))
	if err != nil {
		return c
	}
	c.AttentionHeads, c.KVHeads = cfg.Model.Heads, cfg.Model.KVHeads
	if sp.Tuner.Precheck {
		c.Fits = func(set space.Settings) error { return r.fits(set, gpus) }
	}
	return c
}

func (r *TrialRunner) simEnv(gpus int) func(string) string {
	return func(k string) string {
		switch k {
		case sim.EnvGPU:
			return r.Spec.Hardware.GPU
		case sim.EnvNumGPUs:
			return strconv.Itoa(max(gpus, 1))
		case sim.EnvEngine:
			return string(r.Spec.Engine)
		}
		return ""
	}
}

// fits runs the simulator's start-up memory accounting for set.
func (r *TrialRunner) fits(set space.Settings, gpus int) error {
	args, err := space.Render(r.Spec.Engine, set)
	if err != nil {
		return err
	}
	// The engine is launched with the extra arguments too (Evaluate).
	args = append(args, r.Spec.Space.Extra...)
	cfg, err := sim.ParseArgs(append([]string{r.Spec.Model}, args...), r.simEnv(gpus))
	if err != nil {
		return nil // flags the simulator does not model: let the engine decide
	}
	_, err = sim.Estimate(cfg)
	return err
}

// oomMessage returns the engine's message when err is the memory model's
// start-up failure.
func oomMessage(err error) (string, bool) {
	var se *sim.StartupError
	if errors.As(err, &se) {
		return se.Message, true
	}
	if errors.Is(err, sim.ErrOOM) {
		return err.Error(), true
	}
	return "", false
}

// timeScale is how much faster than real time the spec's engine runs.
func timeScale(sp *Spec) float64 {
	if sp.Launcher.Kind == LauncherSim || sp.Launcher.SimImage() {
		return sp.Launcher.TimeScale
	}
	return 1
}

package tuner

import (
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/calibrate"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
)

// ErrNoGPU is returned by CalibrationRuns for a study that names no GPU:
// the simulator must model the hardware the measurements came from.
var ErrNoGPU = errors.New("the study names no hardware.gpu: the simulator needs the GPU the measurements were made on")

// CalibrationRuns are a stored study's measurements as calibration runs:
// every trial with status ok (search trials and confirmation runs), its
// engine as the simulator models it (the study's model and hardware.gpu,
// the trial's settings and extra flags, on the trial's GPUs) and each load
// level with the exact benchmark the trial sent (workload, seed, load; in
// the engine's time). A trial whose settings the simulator cannot model
// is left out and counted in skipped.
func CalibrationRuns(sp *Spec, trials []store.Trial) (runs []calibrate.Run, skipped int, err error) {
	if sp.Hardware.GPU == "" {
		return nil, 0, ErrNoGPU
	}
	r := &TrialRunner{Spec: sp}
	v := &simulated.Virtual{GPU: sp.Hardware.GPU, ModelConfig: sp.Launcher.ModelConfig}
	for _, t := range trials {
		if t.Status != measure.StatusOK || len(t.LoadPoints) == 0 {
			continue
		}
		replica := 0
		if t.Confirms != nil {
			replica = replicaOf(t, trials)
		}
		gpus := t.GPUs
		if len(gpus) == 0 {
			gpus = make([]int, GPUsFor(t.Settings))
		}
		run, err := r.calibrationRun(v, fmt.Sprintf("trial %d", t.Number), t.Number, replica, t.Settings, gpus, t.LoadPoints)
		if err != nil {
			skipped++
			continue
		}
		runs = append(runs, run)
	}
	if len(runs) == 0 {
		return nil, skipped, calibrate.ErrNoPoints
	}
	return runs, skipped, nil
}

// calibrationRun is one trial's measured levels as a calibration run: the
// engine as v simulates it (the trial's settings and extra flags on gpus)
// and each level with the exact benchmark the trial sent.
func (r *TrialRunner) calibrationRun(v *simulated.Virtual, name string, number, replica int, set space.Settings, gpus []int, levels []measure.Level) (calibrate.Run, error) {
	ls := r.launchSpec(number, set, gpus)
	cfg, err := v.Config(ls)
	if err != nil {
		return calibrate.Run{}, err
	}
	plan := r.plan(ls, replica)
	run := calibrate.Run{Name: name, Config: cfg}
	for i, lv := range levels {
		run.Levels = append(run.Levels, calibrate.Level{Bench: plan.BenchConfig(plan.SeedIndex(i), lv.Load), Measured: lv.Summary})
	}
	return run, nil
}

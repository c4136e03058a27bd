package guided

import (
	"errors"
	"fmt"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/calibrate"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
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
func CalibrationRuns(study *spec.Spec, trials []store.Trial) (runs []calibrate.Run, skipped int, err error) {
	if study.Hardware.GPU == "" {
		return nil, 0, ErrNoGPU
	}
	r := &tuner.TrialRunner{Spec: study}
	v := &simulated.Virtual{GPU: study.Hardware.GPU, ModelConfig: study.Launcher.ModelConfig}
	if study.ModelConfigText != "" {
		// The config.json the study stored: the engine that was measured,
		// whether or not the model's files are still there.
		m, err := catalog.ParseHFConfig(strings.NewReader(study.ModelConfigText), study.Model)
		if err != nil {
			return nil, 0, err
		}
		v.Model = &m
	}
	for _, t := range trials {
		if t.Status != measure.StatusOK || len(t.LoadPoints) == 0 {
			continue
		}
		replica := 0
		if t.Confirms != nil {
			replica = tuner.ReplicaOf(t, trials)
		}
		gpus := t.GPUs
		if len(gpus) == 0 {
			gpus = make([]int, spec.GPUsFor(t.Settings))
		}
		run, err := calibrationRun(r, v, fmt.Sprintf("trial %d", t.Number), t.Number, replica, t.Settings, gpus, t.LoadPoints)
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
func calibrationRun(r *tuner.TrialRunner, v *simulated.Virtual, name string, number, replica int, set space.Settings, gpus []int, levels []measure.Level) (calibrate.Run, error) {
	ls := r.LaunchSpec(number, set, gpus)
	cfg, err := v.Config(ls)
	if err != nil {
		return calibrate.Run{}, err
	}
	plan := r.Plan(ls, replica)
	run := calibrate.Run{Name: name, Config: cfg}
	for i, lv := range levels {
		run.Levels = append(run.Levels, calibrate.Level{Bench: plan.BenchConfig(plan.SeedIndex(i), lv.Load), Measured: lv.Summary})
	}
	return run, nil
}

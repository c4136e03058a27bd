// Package memory is a trial's start-up memory check before launch
// (tuner.precheck): the simulator's memory model (sim.Estimate) on the
// trial's settings and extra flags, as the engine would start them.
// Package tuner does not import it: whoever runs a study hands Model to
// tuner.Study.Memory or tuner.TrialRunner.Memory, so that tuner links no
// simulator.
package memory

import (
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simulated"
)

// Fits runs the simulator's start-up memory accounting for launch spec ls
// on gpu (the study's hardware.gpu) with the model's config.json
// (modelConfig, "" for a catalog model), from its settings (and the extra
// flags) directly. Settings the simulator does not model fit: the engine
// decides.
//
// A disaggregated configuration fits when each of its parts does
// (engine.Settings.Parts), each on its own GPUs.
func Fits(gpu, modelConfig string, ls launcher.Spec) error {
	v := &simulated.Virtual{GPU: gpu, ModelConfig: modelConfig}
	if ls.Settings.Disaggregated() {
		for _, p := range ls.Settings.Parts() {
			ps := ls
			ps.Settings, ps.GPUs = p.Settings, make([]int, p.GPUs())
			if err := Fits(gpu, modelConfig, ps); err != nil {
				return fmt.Errorf("%s: %w", p.Name(), err)
			}
		}
		return nil
	}
	cfg, err := v.Config(ls)
	if err != nil {
		return nil // settings the simulator does not model: let the engine decide
	}
	_, err = sim.Estimate(cfg)
	return err
}

// OOM returns the engine's message when err is the memory model's start-up
// failure.
func OOM(err error) (string, bool) {
	var se *sim.StartupError
	if errors.As(err, &se) {
		return se.Message, true
	}
	if errors.Is(err, sim.ErrOOM) {
		return err.Error(), true
	}
	return "", false
}

// Model is the simulator's memory model as a study's precheck asks it
// (tuner.MemoryModel): Fits and OOM.
type Model struct{}

// Fits is the package's Fits.
func (Model) Fits(gpu, modelConfig string, ls launcher.Spec) error { return Fits(gpu, modelConfig, ls) }

// OOM is the package's OOM.
func (Model) OOM(err error) (string, bool) { return OOM(err) }

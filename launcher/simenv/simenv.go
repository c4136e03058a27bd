// Package simenv holds what every launcher kind that can run the simulated
// engine's binary or image shares: the spec keys time_scale and load_time,
// the one reading of a time scale, and the check that the simulator can
// model a study's model and GPU. It reads the catalog only; the simulator
// itself (internal/model/sim) and its own kinds (launcher/simulated) stay
// out, so the docker, slurm and kubernetes kinds do not link them.
//
// Everything here is safe for concurrent use.
package simenv

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
)

// Keys are the keys of the launchers that can run the simulated engine
// (the sim kind, and docker, slurm and kubernetes with the servetune-sim
// image or binary).
var Keys = []launcher.Key{
	{Name: "time_scale", Doc: "how many times faster than real time the simulated engine runs: above 0, at most 1000 (default 1)"},
	{Name: "load_time", Doc: "simulated start-up time before /health turns ready, e.g. 10s"},
}

// DecodeKeys reads time_scale and load_time.
func DecodeKeys(d *yamlpos.Decoder, keys map[string]*yaml.Node) (scale float64, load time.Duration) {
	scale = 1
	if x := keys["time_scale"]; x != nil {
		scale = d.PositiveAtMost(x, "launcher.time_scale", engine.MaxTimeScale)
	}
	if x := keys["load_time"]; x != nil {
		load = d.Duration(x, "launcher.load_time")
	}
	return scale, load
}

// TimeScale is the one reading of a simulated engine's time_scale that
// the sim, docker, slurm and kubernetes kinds report as
// Capabilities.TimeScale: the scale the engine is started with
// (engine.SimEnv), 1 when unset.
func TimeScale(scale float64) float64 {
	if scale > 0 {
		return scale
	}
	return 1
}

// Preflight checks that the simulated engine can model a study: its
// model (from the catalog or a config.json) and its GPU.
func Preflight(model, modelConfig, gpu string) error {
	m, err := catalog.LoadModel(model, modelConfig)
	if err == nil {
		err = m.Simulable()
	}
	if err != nil {
		return fmt.Errorf("the simulated engine cannot model %s: %w (give a config.json as model: for a model outside the catalog)", model, err)
	}
	if gpu != "" {
		if _, err := catalog.LookupGPU(gpu); err != nil {
			return fmt.Errorf("the simulated engine cannot model hardware.gpu: %w", err)
		}
	}
	return nil
}

package tuner

import (
	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/yamlspec"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner/spec"
)

// The spec parser decodes the launcher section and asks the simulator's
// reach through these; the spec package itself imports neither.
func init() {
	spec.SetRuntime(spec.Runtime{Launcher: decodeLauncher, Forecastable: Forecastable})
}

// decodeLauncher reads the launcher section with launcher.Decode.
func decodeLauncher(d *yamlspec.Decoder, n *yaml.Node, sp *spec.Spec) spec.LauncherSpec {
	l, c := launcher.Decode(d, n, launcher.Common{
		Engine: sp.Engine, Model: sp.Model, ModelConfig: sp.ModelConfig, GPU: sp.Hardware.GPU, Study: sp.Name})
	ls := spec.LauncherSpec{Kind: c.Kind, GPUs: c.GPUs, ReadyTimeout: c.ReadyTimeout, Env: c.Env, ModelConfig: c.ModelConfig}
	if l != nil {
		ls.Launcher = l
	}
	return ls
}

// launcherOf is the launcher the spec's kind built (spec.LauncherSpec
// holds it untyped).
func launcherOf(sp *spec.Spec) launcher.Launcher {
	l, _ := sp.Launcher.Launcher.(launcher.Launcher)
	return l
}

package tuner

import (
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/yamlspec"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner/spec"
	"gopkg.in/yaml.v3"
)

// The spec parser decodes the launcher section and asks the simulator's
// reach through these; the spec package itself imports neither.
func init() {
	spec.SetRuntime(spec.Runtime{Launcher: decodeLauncher, Forecastable: Forecastable, Capabilities: specCaps})
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
	if d := sp.Disaggregation; d != nil {
		if in, ok := l.(interface{ RunsDisaggregated(kvLink string) }); ok {
			// The virtual kind runs the whole deployment on its clock:
			// no parts to start, no router.
			in.RunsDisaggregated(d.KVLink)
			return l
		}
	}
	if d := sp.Disaggregation; d != nil && l != nil {
		// A disaggregated configuration runs as its parts and a router;
		// an aggregated one of the same space as l alone.
		return &launcher.Disaggregated{Base: l, KV: d.KV, KVLink: d.KVLink, Router: launcher.Router{
			Command: d.Router.Command, EachPrefill: d.Router.EachPrefill, EachDecode: d.Router.EachDecode,
			HealthPath: d.Router.HealthPath}}
	}
	return l
}

// LauncherOf is the launcher the study's trials start with: the kind's,
// in front of it the disaggregated parts' when the spec has a
// disaggregation section (what cleanup reaps through too).
func LauncherOf(sp *spec.Spec) launcher.Launcher { return launcherOf(sp) }

// capsOf is the capabilities of the spec's launcher; none without one.
func capsOf(sp *spec.Spec) launcher.Capabilities {
	if l := launcherOf(sp); l != nil {
		return l.Capabilities()
	}
	return launcher.Capabilities{}
}

// specCaps is spec.Runtime.Capabilities: what the spec reads of a
// launcher's capabilities.
func specCaps(l any) spec.LauncherCaps {
	ln, ok := l.(launcher.Launcher)
	if !ok {
		return spec.LauncherCaps{}
	}
	c := ln.Capabilities()
	return spec.LauncherCaps{GPUs: c.GPUs, HostOf: c.HostOf, FixedSettings: c.FixedSettings, Deterministic: c.Deterministic}
}

// Forecastable says whether the simulator can forecast sp: a catalog GPU
// and a model it knows (the catalog, or a config.json). nil when it can.
func Forecastable(sp *spec.Spec) error {
	if sp.Hardware.GPU == "" {
		return errors.New("the study names no hardware.gpu, so the simulator has no GPU to forecast on")
	}
	if _, err := catalog.LookupGPU(sp.Hardware.GPU); err != nil {
		return fmt.Errorf("hardware.gpu: %w", err)
	}
	m, err := (&TrialRunner{Spec: sp}).model()
	if err == nil {
		err = m.Simulable()
	}
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

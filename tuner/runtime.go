package tuner

import (
	"fmt"

	"github.com/servetune/servetune/internal/yamlspec"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner/spec"
)

// ParseSpec parses a study spec (spec.ParseSpec), builds its launcher from
// the launcher section (NewLauncher), and runs the spec's checks that need
// the launcher's capabilities (spec.Spec.CheckLauncher). Every error is a
// *yamlspec.Error naming the file, line and field.
func ParseSpec(data []byte, file string) (*spec.Spec, launcher.Launcher, error) {
	sp, err := spec.ParseSpec(data, file)
	if err != nil {
		return nil, nil, err
	}
	return withLauncher(sp)
}

// ParseSpecFile reads a study spec file and parses it as ParseSpec does.
func ParseSpecFile(path string) (*spec.Spec, launcher.Launcher, error) {
	sp, err := spec.ParseSpecFile(path)
	if err != nil {
		return nil, nil, err
	}
	return withLauncher(sp)
}

// withLauncher builds sp's launcher and checks sp against it.
func withLauncher(sp *spec.Spec) (*spec.Spec, launcher.Launcher, error) {
	l, err := NewLauncher(sp)
	if err != nil {
		return nil, nil, err
	}
	if err := sp.CheckLauncher(specCaps(l)); err != nil {
		return nil, nil, err
	}
	return sp, l, nil
}

// NewLauncher builds the launcher sp's launcher section names: its kind's
// own keys decoded by the kind (launcher.Decode), with file:line errors.
// The kinds are those the program registered (launcher/kinds imports
// them all).
func NewLauncher(sp *spec.Spec) (launcher.Launcher, error) {
	if sp.Launcher.Section == nil {
		return nil, fmt.Errorf("%s: the spec has no launcher section to build a launcher from", sp.File)
	}
	d := &yamlspec.Decoder{File: sp.File}
	l, _ := launcher.Decode(d, sp.Launcher.Section, launcher.Common{
		Engine: sp.Engine, Model: sp.Model, ModelConfig: sp.ModelConfig, GPU: sp.Hardware.GPU, Study: sp.Name})
	if err := d.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

// specCaps is what the spec's checks read of l's capabilities.
func specCaps(l launcher.Launcher) spec.LauncherCaps {
	if l == nil {
		return spec.LauncherCaps{}
	}
	c := l.Capabilities()
	return spec.LauncherCaps{GPUs: c.GPUs, HostOf: c.HostOf, FixedSettings: c.FixedSettings, Deterministic: c.Deterministic}
}

// launcherFor is the launcher a study of sp starts its trials with, l
// being the one its kind built: l itself, or in front of it a
// disaggregated configuration's parts and router when sp has a
// disaggregation section and l does not run one itself
// (Capabilities.Disaggregates).
func launcherFor(sp *spec.Spec, l launcher.Launcher) launcher.Launcher {
	d := sp.Disaggregation
	if d == nil || l == nil {
		return l
	}
	if runs := l.Capabilities().Disaggregates; runs != nil {
		// The virtual kind runs the whole deployment on its clock:
		// no parts to start, no router.
		runs(d.KVLink)
		return l
	}
	// A disaggregated configuration runs as its parts and a router;
	// an aggregated one of the same space as l alone.
	return &launcher.Disaggregated{Base: l, KV: d.KV, KVLink: d.KVLink, Router: launcher.Router{
		Command: d.Router.Command, EachPrefill: d.Router.EachPrefill, EachDecode: d.Router.EachDecode,
		HealthPath: d.Router.HealthPath}}
}

// LauncherOf is the launcher a study of sp with the launcher l its kind
// built starts its trials with: l, in front of it the disaggregated parts'
// when the spec has a disaggregation section (what cleanup reaps through
// too).
func LauncherOf(sp *spec.Spec, l launcher.Launcher) launcher.Launcher { return launcherFor(sp, l) }

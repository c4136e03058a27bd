package tuner

import (
	"fmt"

	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner/spec"
)

// ParseSpec parses a study spec (spec.ParseSpec), builds its launcher from
// the launcher section (NewLauncher), and runs the spec's checks that need
// the launcher's capabilities (spec.Spec.CheckLauncher). Every error is a
// *yamlpos.Error naming the file, line and field.
func ParseSpec(data []byte, file string) (*spec.Spec, launcher.Launcher, error) {
	study, err := spec.ParseSpec(data, file)
	if err != nil {
		return nil, nil, err
	}
	return withLauncher(study)
}

// ParseSpecFile reads a study spec file and parses it as ParseSpec does.
func ParseSpecFile(path string) (*spec.Spec, launcher.Launcher, error) {
	study, err := spec.ParseSpecFile(path)
	if err != nil {
		return nil, nil, err
	}
	return withLauncher(study)
}

// withLauncher builds study's launcher and checks study against it.
func withLauncher(study *spec.Spec) (*spec.Spec, launcher.Launcher, error) {
	l, err := NewLauncher(study)
	if err != nil {
		return nil, nil, err
	}
	if err := study.CheckLauncher(specCaps(l)); err != nil {
		return nil, nil, err
	}
	return study, l, nil
}

// NewLauncher builds the launcher study's launcher section names: its kind's
// own keys decoded by the kind (launcher.Decode), with file:line errors.
// The kinds are those the program registered (launcher/kinds imports
// them all).
func NewLauncher(study *spec.Spec) (launcher.Launcher, error) {
	if study.Launcher.Section == nil {
		return nil, fmt.Errorf("%s: the spec has no launcher section to build a launcher from", study.File)
	}
	d := &yamlpos.Decoder{File: study.File}
	l, _ := launcher.Decode(d, study.Launcher.Section, launcher.Common{
		Engine: study.Engine, Model: study.Model, ModelConfig: study.ModelConfig, GPU: study.Hardware.GPU, Study: study.Name})
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
	return spec.LauncherCaps{GPUs: c.GPUs, HostOf: c.HostOf, FixedSettings: c.FixedSettings}
}

// launcherFor is the launcher the study starts its trials with, l
// being the one its kind built: l itself, or in front of it a
// disaggregated configuration's parts and router when study has a
// disaggregation section and l does not run one itself
// (Capabilities.Disaggregates).
func launcherFor(study *spec.Spec, l launcher.Launcher) launcher.Launcher {
	d := study.Disaggregation
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

// LauncherOf is the launcher the study with the launcher l its kind
// built starts its trials with: l, in front of it the disaggregated parts'
// when the spec has a disaggregation section (what cleanup reaps through
// too).
func LauncherOf(study *spec.Spec, l launcher.Launcher) launcher.Launcher {
	return launcherFor(study, l)
}

// Package testspec holds the study specs that tests of several packages
// share, as YAML files under testdata/; only tests import it.
package testspec

import (
	"embed"
	"strings"
)

//go:embed testdata/*.yaml
var files embed.FS

// Sim is a two-GPU study of Llama-3.1-8B on the simulated engine
// (launcher kind sim: a process a trial), a random sampler over
// tensor_parallel and max_running_requests, five trials
// (testdata/sim.yaml).
var Sim = read("sim.yaml")

// Virtual is a two-GPU study of Llama-3.1-8B evaluated by the simulator
// in virtual time (launcher kind virtual), TPE over tensor_parallel,
// max_running_requests and gpu_memory_fraction, six trials
// (testdata/virtual.yaml).
var Virtual = read("virtual.yaml")

// EarlyStop is a guided study of Llama-3.1-8B in virtual time whose
// forecast stops it after a few of its 30 trials, leaving the small
// max_running_requests unmeasured (testdata/earlystop.yaml).
var EarlyStop = read("earlystop.yaml")

// read is a spec file's text without its leading comment lines, so
// positions in errors count from the spec's first key.
func read(name string) string {
	b, err := files.ReadFile("testdata/" + name)
	if err != nil {
		panic(err)
	}
	s := string(b)
	for strings.HasPrefix(s, "#") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

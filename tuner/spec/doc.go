// Package spec is the study spec: parsing and validating the YAML
// (docs/spec.md), its sections as types, the diff and resume check that
// keep a stored study's identity, and the serve command a point of it
// gives. It runs nothing: what it needs from the packages that run
// studies (the launcher kinds, the simulator's reach) comes through
// Runtime, which package tuner sets.
package spec

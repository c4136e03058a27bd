// Package spec is the study spec: parsing and validating the YAML
// (docs/spec.md), its sections as types, the diff and resume check that
// keep a stored study's identity, and the serve command a point of it
// gives. It is plain data and runs nothing: the launcher section's own
// keys are kept as written for package tuner, which builds the launcher
// from them and runs the checks that need its capabilities
// (Spec.CheckLauncher) after ParseSpec.
package spec

// Package guided is the guided sampler: it forecasts the study's space with
// the simulated engine in virtual time (tuner.TrialRunner on a virtual
// launcher), measures the best forecast first, refits the simulator to
// every measurement (internal/model/calibrate) and hands over to TPE when
// forecasts and measurements disagree (docs/architecture.md, "Guided
// search"). It registers itself as sampler kind "guided"; a program that
// runs studies imports it (cmd/servetune does). It also turns a stored
// study's measurements into calibration runs (CalibrationRuns).
package guided

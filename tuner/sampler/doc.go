// Package sampler proposes a study's settings: the Sampler interface (ask,
// observe, tell, replay, reserve) and its kinds, one file each (TPE,
// random, CMA-ES, grid), registered by name. A kind outside this package
// registers itself the same way (tuner/guided); a new sampler is one file
// with an init that calls Register.
package sampler

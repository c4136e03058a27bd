// Package recommend ranks a study's measurements: the metrics a point has,
// objectives and SLOs, the Pareto front, a configuration's mean over its
// runs with its interval, and the recommendation. It reads stored trials
// and the study's terms (objectives, SLOs, price, space), never a whole
// spec, so what only shows stored studies (report, ui) needs no sampler,
// simulator or launcher.
package recommend

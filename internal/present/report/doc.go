// Package report turns stored measurements into pages a person reads: the
// study report (StudyReport.WriteHTML, StudyReport.WriteMarkdown) and the bench
// reports, with charts drawn by gonum.org/v1/plot as inline SVG.
//
// An HTML report is one self-contained file: inline CSS and SVG, no
// script, no font, image or style loaded from anywhere (its
// Content-Security-Policy forbids it), so it can be mailed and opened
// offline. Markdown leaves the charts out, for pull requests.
//
//	s, err := report.Load(ctx, db, "quickstart")
//	...
//	err = s.WriteHTML(f)
//
// The study report shows the recommendation first (serve commands, SLO,
// figures with 95% intervals, the runner-up), then the Pareto front,
// latency against load, the search history and each parameter's effect
// (Importance, η²), failures, GPU telemetry and what was run. Findings
// (StudyReport.Findings) are the place for diagnoses with evidence.
//
// Rendering is pure over its inputs and safe for concurrent use on
// different values.
package report

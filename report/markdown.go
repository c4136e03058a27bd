package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the study's report as Markdown for a pull request
// or an issue: the recommendation, the front, failures and what was run,
// without the charts (the HTML report has them).
func (s *Study) WriteMarkdown(w io.Writer) error {
	v := s.build()
	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## servetune study report: %s\n\n", v.Name)
	p("%s on %s · %s · study %s · written %s by %s\n\n", v.Model, v.Engine, v.Counts, v.Status, v.Generated, v.Tool)
	p("### Recommendation\n\n")
	if r := v.Rec; r != nil {
		p("Serve **trial %d** (`%s`), measured at **%s**. %s\n\n", r.Trial, r.Settings, r.Level, r.Why)
		for _, c := range r.Commands {
			p("```sh\n%s\n```\n\n", c.Line)
		}
		ci := ""
		if r.Runs > 1 {
			ci = " 95% CI |"
		}
		p("SLO: `%s`. Mean over %d run(s):\n\n| metric | value |%s\n|---|---:|%s\n", v.SLO, r.Runs, ci, map[bool]string{true: "---:|", false: ""}[r.Runs > 1])
		for _, f := range r.Figures {
			if r.Runs > 1 {
				p("| %s | %s | %s |\n", f.Name, f.Value, f.CI)
			} else {
				p("| %s | %s |\n", f.Name, f.Value)
			}
		}
		p("\n")
		if u := r.RunnerUp; u != nil {
			p("Runner-up: trial %d, %s %s; it %s. It differs in `%s`.\n\n", u.Trial, u.Figure, u.CI, u.Verdict, u.Differs)
		}
	} else {
		p("%s\n\n", v.NoRec)
	}
	if len(v.Findings) > 0 {
		p("### Findings\n\n")
		for _, f := range v.Findings {
			p("- **%s** (trial %d %s): %s %s\n", f.Title, f.Trial, f.Level, f.Evidence, f.Advice)
		}
		p("\n")
	}
	p("### Pareto front (points that meet the SLO)\n\n")
	if len(v.Front) == 0 {
		p("No measured point meets the SLO.\n\n")
	} else {
		p("| trial | level | %s | settings |\n|---|---|%s---|\n", strings.Join(v.FrontHead, " | "), strings.Repeat("---:|", len(v.FrontHead)))
		for _, r := range v.Front {
			mark := ""
			if r.Chosen {
				mark = " ★"
			}
			same := ""
			if r.Same != "" {
				same = " (same figures: trials " + r.Same + ")"
			}
			p("| %d%s | %s | %s | `%s`%s |\n", r.Trial, mark, r.Level, strings.Join(r.Values, " | "), r.Settings, same)
		}
		p("\n")
	}
	p("### Parameter effect\n\n| parameter | η² | groups | trials |\n|---|---:|---:|---:|\n")
	for _, e := range v.EffectRows {
		p("| %s | %s | %d | %d |\n", e.Param, e.Eta2, e.Groups, e.N)
	}
	p("\n%s\n\n", v.EffectMethod)
	p("### Failures\n\n")
	if len(v.FailClasses) == 0 {
		p("No trial failed.\n\n")
	} else {
		for _, c := range v.FailClasses {
			p("- %s: %d (trials %s)\n", c.Class, c.Count, c.Trials)
		}
		p("\n")
		for _, f := range v.Failed {
			p("**trial %d: %s** `%s`\n\n```\n%s\n```\n\n", f.Trial, f.Class, f.Settings, f.Message)
		}
	}
	for _, f := range v.ReqFailures {
		p("- trial %d at %s: %d request(s) %s: `%s`\n", f.Trial, f.Level, f.Count, f.Class, f.Message)
	}
	if len(v.Interrupted) > 0 {
		p("Interrupted (not yet re-run): %s.\n\n", ints(v.Interrupted))
	}
	if len(v.Reruns) > 0 {
		var ns []int
		for _, r := range v.Reruns {
			ns = append(ns, r.Trial)
		}
		p("Re-run after an interruption: %s.\n\n", ints(ns))
	}
	p("### What was run\n\n| | |\n|---|---|\n")
	for _, f := range v.Facts {
		p("| %s | %s |\n", f.Key, strings.ReplaceAll(f.Value, "|", `\|`))
	}
	p("\n<details><summary>study spec</summary>\n\n```yaml\n%s\n```\n\n</details>\n", strings.TrimRight(v.SpecText, "\n"))
	return b.Flush()
}

func ints(ns []int) string { return intList(ns) }

package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the study's report as Markdown for a pull request
// or an issue: the recommendation, the front, failures and what was run,
// without the charts (the HTML report has them). Every value goes through
// the Markdown encoder (mdenc.go).
func (s *StudyReport) WriteMarkdown(w io.Writer) error {
	v := s.build()
	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	t := mdText
	p("## servetune study report: %s\n\n", t(v.Name))
	p("%s on %s · %s · study %s · written %s by %s\n\n", t(v.Model), t(v.Engine), t(v.Counts), t(v.Status), t(v.Generated), t(v.Tool))
	mdRecommendation(p, v)
	if c := v.Conv; c != nil {
		mdConversation(p, c)
	}
	if len(v.Findings) > 0 {
		p("### Findings\n\n")
		for _, f := range v.Findings {
			p("- **%s** (trial %d %s): %s %s\n", t(f.Title), f.Trial, t(f.Level), t(f.Evidence), t(f.Advice))
		}
		p("\n")
	}
	mdFront(p, v)
	p("### Parameter effect\n\n| parameter | η² | groups | trials |\n|---|---:|---:|---:|\n")
	for _, e := range v.EffectRows {
		p("| %s | %s | %d | %d |\n", t(e.Param), t(e.Eta2), e.Groups, e.N)
	}
	p("\n%s\n\n", t(v.EffectMethod))
	var notes []string
	for _, c := range v.ParamCharts {
		notes = append(notes, c.Notes...)
	}
	if len(notes) > 0 {
		// The HTML marks them in each parameter's chart.
		p("Values no search trial measured with a value:\n\n")
		for _, n := range notes {
			p("- %s\n", t(n))
		}
		p("\n")
	}
	mdFailures(p, v)
	p("### What was run\n\n| | |\n|---|---|\n")
	for _, f := range v.Facts {
		p("| %s | %s |\n", t(f.Key), t(f.Value))
	}
	p("\n<details><summary>study spec</summary>\n\n%s\n</details>\n", mdFence("yaml", v.SpecText))
	return b.Flush()
}

// mdRecommendation writes the recommendation: its commands and figures, the
// runner-up, and the other shape's best beside a disaggregated one.
func mdRecommendation(p func(string, ...any), v *view) {
	t := mdText
	p("### Recommendation\n\n")
	if r := v.Rec; r != nil {
		p("Serve **trial %d** (%s), measured at **%s**. %s\n\n", r.Trial, mdCode(r.Settings), t(r.Level), t(r.Why))
		for _, c := range r.Commands {
			p("%s\n", mdFence("sh", c.Line))
		}
		ci := ""
		if r.Runs > 1 {
			ci = " 95% CI |"
		}
		p("SLO: %s. Mean over %d run(s):\n\n| metric | value |%s\n|---|---:|%s\n", mdCode(v.SLO), r.Runs, ci, map[bool]string{true: "---:|", false: ""}[r.Runs > 1])
		for _, f := range r.Figures {
			if r.Runs > 1 {
				p("| %s | %s | %s |\n", t(f.Name), t(f.Value), t(f.CI))
			} else {
				p("| %s | %s |\n", t(f.Name), t(f.Value))
			}
		}
		p("\n")
		if u := r.RunnerUp; u != nil {
			p("Runner-up: trial %d, %s %s; it %s. It differs in %s.\n\n", u.Trial, t(u.Figure), t(u.CI), t(u.Verdict), mdCode(u.Differs))
		}
		if a := r.Alternative; a != nil {
			p("Beside it, the best %s configuration: trial %d (%s) on %d GPU(s), measured at %s.\n\n", t(a.Shape), a.Trial, mdCode(a.Settings), a.GPUs, t(a.Level))
			p("| metric | %s | %s, measured |\n|---|---:|---:|\n", t(a.Shape), t(a.Of))
			for _, f := range a.Figures {
				p("| %s | %s | %s |\n", t(f.Name), t(f.Value), t(f.Diff))
			}
			p("\n")
			for _, c := range a.Commands {
				p("%s\n", mdFence("sh", c.Line))
			}
		}
	} else {
		p("%s\n\n", t(v.NoRec))
	}
}

// mdConversation writes a conversation study's prefix reuse and TTFT per
// turn.
func mdConversation(p func(string, ...any), c *convView) {
	t := mdText
	p("### Conversation: prefix reuse and TTFT per turn\n\n%s\n\n", t(c.Intro))
	p("| | trial | level | prefix-cache hit rate | session (ms) | settings |\n|---|---|---|---:|---:|---|\n")
	for _, r := range c.Rows {
		p("| %s | %d | %s | %s | %s | %s |\n", t(r.Role), r.Trial, t(r.Level), t(r.HitRate), t(r.Session), mdCode(r.Settings))
	}
	p("\nMedian TTFT per turn (ms):\n\n| turn | prompt tokens |")
	for _, r := range c.Rows {
		p(" %s (trial %d) |", t(r.Role), r.Trial)
	}
	p("\n|---|---:|%s\n", strings.Repeat("---:|", len(c.Rows)))
	for _, tr := range c.Turns {
		p("| %d | %s |", tr.Turn, t(tr.Tokens))
		for _, x := range tr.TTFT {
			p(" %s |", t(x))
		}
		p("\n")
	}
	p("\n%s\n\n", t(c.Note))
}

// mdFront writes the Pareto front among the points that meet the SLO.
func mdFront(p func(string, ...any), v *view) {
	t := mdText
	p("### Pareto front (points that meet the SLO)\n\n")
	if len(v.Front) == 0 {
		p("No measured point meets the SLO.\n\n")
	} else {
		head := make([]string, len(v.FrontHead))
		for i, h := range v.FrontHead {
			head[i] = t(h)
		}
		p("| trial | level | %s | settings |\n|---|---|%s---|\n", strings.Join(head, " | "), strings.Repeat("---:|", len(v.FrontHead)))
		for _, r := range v.Front {
			mark := ""
			if r.Chosen {
				mark = " ★"
			}
			same := ""
			if r.Same != "" {
				same = " (same figures: trials " + t(r.Same) + ")"
			}
			vals := make([]string, len(r.Values))
			for i, x := range r.Values {
				vals[i] = t(x)
			}
			p("| %d%s | %s | %s | %s%s |\n", r.Trial, mark, t(r.Level), strings.Join(vals, " | "), mdCode(r.Settings), same)
		}
		p("\n")
	}
}

// mdFailures writes the failed trials by class with their messages, request
// failures, and interrupted and re-run trials.
func mdFailures(p func(string, ...any), v *view) {
	t := mdText
	p("### Failures\n\n")
	if len(v.FailClasses) == 0 {
		p("No trial failed.\n\n")
	} else {
		for _, c := range v.FailClasses {
			p("- %s: %d (trials %s)\n", t(c.Class), c.Count, t(c.Trials))
		}
		p("\n")
		for _, f := range v.Failed {
			p("**trial %d: %s** %s\n\n%s\n", f.Trial, t(f.Class), mdCode(f.Settings), mdFence("", f.Message))
		}
	}
	for _, f := range v.ReqFailures {
		p("- trial %d at %s: %d request(s) %s: %s\n", f.Trial, t(f.Level), f.Count, t(f.Class), mdCode(f.Message))
	}
	if len(v.Interrupted) > 0 {
		p("Interrupted (not yet re-run): %s.\n\n", intList(v.Interrupted))
	}
	if len(v.Reruns) > 0 {
		var ns []int
		for _, r := range v.Reruns {
			ns = append(ns, r.Trial)
		}
		p("Re-run after an interruption: %s.\n\n", intList(ns))
	}
}

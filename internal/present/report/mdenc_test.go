package report

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/hostile"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/store"
)

// unescaped reports the first Markdown or HTML special character of s
// (text outside code) that no backslash escapes.
func unescaped(s string) (rune, bool) {
	esc := false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case r == '\\':
			esc = true
		case strings.ContainsRune(mdSpecial, r):
			return r, true
		}
	}
	return 0, false
}

// stripCode removes the code spans of one line of Markdown: a backtick
// run opens one that the next run of the same length closes.
func stripCode(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] == '\\' && i+1 < len(line) {
			b.WriteString(line[i : i+2])
			i += 2
			continue
		}
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		fence := strings.Repeat("`", n)
		j := i + n
		for {
			k := strings.Index(line[j:], fence)
			if k < 0 {
				return b.String() + line[i:] // unclosed: literal backticks
			}
			k += j
			if k+n < len(line) && line[k+n] == '`' || k > 0 && line[k-1] == '`' {
				for k < len(line) && line[k] == '`' {
					k++
				}
				j = k
				continue
			}
			i = k + n
			break
		}
	}
	return b.String()
}

// TestMarkdownEncoderHostile: each hostile string is text with every
// special character escaped, a code span its own delimiters cannot close,
// or a fenced block none of its lines can close; all on the lines they
// were given.
func TestMarkdownEncoderHostile(t *testing.T) {
	for _, h := range hostile.Strings {
		tx := mdText(h)
		if strings.ContainsAny(tx, "\n\r") {
			t.Errorf("mdText(%q) = %q spans lines", h, tx)
		}
		if r, ok := unescaped(tx); ok {
			t.Errorf("mdText(%q) = %q leaves %q unescaped", h, tx, r)
		}
		c := mdCode(h)
		if strings.ContainsAny(c, "\n\r") || stripCode(c) != "" {
			t.Errorf("mdCode(%q) = %q is not one code span", h, c)
		}
		if strings.Contains(strings.ReplaceAll(c, `\|`, ""), "|") {
			t.Errorf("mdCode(%q) = %q holds a bare pipe", h, c)
		}
		f := mdFence("yaml", h)
		lines := strings.Split(strings.TrimSuffix(f, "\n"), "\n")
		fence := strings.TrimSuffix(lines[0], "yaml")
		if len(fence) < 3 || strings.Trim(fence, "`") != "" || lines[len(lines)-1] != fence {
			t.Fatalf("mdFence(%q) = %q", h, f)
		}
		for _, l := range lines[1 : len(lines)-1] {
			if strings.HasPrefix(strings.TrimLeft(l, " "), fence) {
				t.Errorf("mdFence(%q): line %q closes the block", h, l)
			}
		}
	}
}

// hostileStudy is a study whose engine messages, request errors and
// findings are the hostile strings.
func hostileStudy(t *testing.T) *StudyReport {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.CreateStudy(ctx, store.Study{Name: "small", Spec: smallSpec, Seed: 3, Tool: "servetune test"})
	if err != nil {
		t.Fatal(err)
	}
	var findings []TrialFinding
	for i, h := range hostile.Strings {
		set := engine.Settings{"max_running_requests": 32 + i, "gpu_memory_fraction": 0.9}
		if err := db.StartTrial(ctx, st.ID, i, set, []int{0}); err != nil {
			t.Fatal(err)
		}
		r := store.TrialResult{StudyID: st.ID, Number: i, Status: measure.StatusFailed, Failure: engine.FailCrash, FailureMsg: h}
		if i%2 == 1 {
			l := level(3)
			l.Summary.ErrorMessages = map[string]string{"http_5xx": h}
			obj := 1.0
			r = store.TrialResult{StudyID: st.ID, Number: i, Status: measure.StatusOK, Objective: &obj, LoadPoints: []measure.Level{l}}
		}
		if err := db.FinishTrial(ctx, r); err != nil {
			t.Fatal(err)
		}
		findings = append(findings, TrialFinding{Trial: i, Finding: diagnose.Finding{Level: h, Severity: diagnose.Warning, Summary: h,
			Evidence: []diagnose.Evidence{{Name: h, Value: 1, Unit: h}}, Advice: h}})
	}
	s, err := Load(ctx, db, "small")
	if err != nil {
		t.Fatal(err)
	}
	s.Findings = findings
	return s
}

// TestHTMLReportHostile: in the HTML report the hostile strings are text:
// none adds an element or an attribute.
func TestHTMLReportHostile(t *testing.T) {
	var b bytes.Buffer
	if err := hostileStudy(t).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "</code></pre><b>"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("the HTML report holds %q raw", bad)
		}
	}
	if !strings.Contains(b.String(), "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile message is not in the report as text")
	}
}

// TestMarkdownReportHostile: the hostile study's Markdown report has, outside
// code, no character that starts HTML, a link, emphasis or a cell.
func TestMarkdownReportHostile(t *testing.T) {
	s := hostileStudy(t)
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	fence := ""
	for _, l := range strings.Split(md.String(), "\n") {
		if fence != "" {
			if l == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(l, "```") {
			fence = strings.TrimRight(l, "abcdefghijklmnopqrstuvwxyz")
			continue
		}
		text := stripCode(l)
		// The writer's own syntax: bold, table rows, list items, the
		// details element around the spec.
		text = strings.NewReplacer("**", "", "★", "").Replace(text)
		if strings.HasPrefix(text, "|") {
			text = strings.ReplaceAll(text, " | ", " ")
			text = strings.Trim(text, "|")
			if strings.Trim(text, "-:|") == "" {
				continue
			}
		}
		switch text {
		case "<details><summary>study spec</summary>", "</details>":
			continue
		}
		if r, ok := unescaped(text); ok {
			t.Errorf("%q unescaped in line %q", r, l)
		}
	}
	if fence != "" {
		t.Error("a fenced block is never closed")
	}
}

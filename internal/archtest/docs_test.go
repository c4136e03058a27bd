package archtest

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
)

// crossRef is a pointer at a document's section in a comment:
// `docs/NAME.md (Heading)`, `docs/NAME.md, "Heading"`, or inside
// parentheses `(docs/NAME.md, Heading)`.
var crossRef = regexp.MustCompile(`docs/([a-z-]+)\.md(?: \(([^()]+)\)|, "([^"]+)"|, ([A-Z][^()"]*)\))?`)

// headings returns the heading texts of a Markdown document, backticks
// removed.
func headings(doc []byte) map[string]bool {
	hs := map[string]bool{}
	fence := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(line, "#") {
			h := strings.TrimSpace(strings.TrimLeft(line, "#"))
			hs[strings.ReplaceAll(h, "`", "")] = true
		}
	}
	return hs
}

// crossReferences checks that every docs/ file a Go comment names (tests'
// comments included) exists, and every section it names is a heading of
// that file.
func crossReferences(tr *tree) []string {
	var out []string
	heads := map[string]map[string]bool{}
	for _, f := range tr.files {
		for _, cg := range f.ast.Comments {
			text := strings.Join(strings.Fields(cg.Text()), " ")
			for _, m := range crossRef.FindAllStringSubmatch(text, -1) {
				doc, ok := tr.docs["docs/"+m[1]+".md"]
				if !ok {
					out = append(out, fmt.Sprintf("%s: a comment names docs/%s.md, which does not exist", tr.at(cg.Pos()), m[1]))
					continue
				}
				hs, seen := heads[m[1]]
				if !seen {
					hs = headings(doc)
					heads[m[1]] = hs
				}
				sec := m[2] + m[3] + m[4]
				if sec != "" && !hs[sec] && !hs[strings.ReplaceAll(sec, "`", "")] {
					out = append(out, fmt.Sprintf("%s: a comment points at docs/%s.md section %q, which is not a heading there", tr.at(cg.Pos()), m[1], sec))
				}
			}
		}
	}
	return out
}

// failureClasses checks that the Metrics section lists measure's failure
// classes, all of them, in report order.
func failureClasses(tr *tree) []string {
	const doc = "docs/architecture.md"
	b := tr.docs[doc]
	line := 0
	if i := bytes.Index(b, []byte("counted by class")); i >= 0 {
		line = lineOf(b, i)
	}
	m := regexp.MustCompile("counted by class \\(`([^`]+)`\\)").FindSubmatch(bytes.Join(bytes.Fields(b), []byte(" ")))
	if m == nil {
		return []string{fmt.Sprintf("%s no longer says \"counted by class (`...`)\"", doc)}
	}
	var want []string
	for _, c := range measure.ErrorClasses {
		want = append(want, string(c))
	}
	if got := string(m[1]); got != strings.Join(want, " ") {
		return []string{fmt.Sprintf("%s:%d lists failure classes %q, measure.ErrorClasses is %q", doc, line, got, strings.Join(want, " "))}
	}
	return nil
}

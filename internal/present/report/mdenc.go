package report

import (
	"strings"

	"github.com/servetune/servetune/internal/term"
)

// The Markdown report's one encoder: every value the writer did not write
// itself (a model name, settings, a server's or engine's message, the
// spec) goes through mdText, mdCode or mdFence, so that none becomes
// HTML, a link, emphasis, a table cell or a line of its own.

// mdSpecial are the characters that start Markdown or HTML inline syntax:
// escaped with a backslash, CommonMark reads each as itself.
const mdSpecial = "\\`*_[]<>&|~"

// mdText is s as inline Markdown text on one line.
func mdText(s string) string {
	s = oneLine(s)
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(mdSpecial, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mdCode is s as an inline code span on one line: delimited by a backtick
// run longer than any inside it, a pipe escaped (GitHub's tables split
// cells at one even in code, and read \| as the pipe).
func mdCode(s string) string {
	s = strings.ReplaceAll(oneLine(s), "|", `\|`)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || s == "" {
		s = " " + s + " "
	}
	return fence + s + fence
}

// mdFence is s as a fenced code block with info string lang: the fence is
// a backtick run longer than any in s, so no line of s closes it.
func mdFence(lang, s string) string {
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return fence + lang + "\n" + strings.TrimRight(term.Clean(s), "\n") + "\n" + fence + "\n"
}

// oneLine is s with controls visible (internal/term) and line breaks as
// spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(term.Clean(s), "\t", " ")), " ")
}

func longestRun(s string, c byte) int {
	n, best := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

package term

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/servetune/servetune/internal/hostile"
)

// TestCleanHostile: no hostile string keeps a byte a terminal acts on; the
// printable text around the controls is kept.
func TestCleanHostile(t *testing.T) {
	for _, s := range hostile.Strings {
		for name, f := range map[string]func(string) string{"Clean": Clean, "Line": Line} {
			out := f(s)
			if !utf8.ValidString(out) {
				t.Errorf("%s(%q) = %q is not UTF-8", name, s, out)
			}
			for _, r := range out {
				if r < 0x20 && !(name == "Clean" && (r == '\n' || r == '\t')) || r == 0x7f || unsafeRune(r) {
					t.Errorf("%s(%q) = %q keeps %U", name, s, out, r)
				}
			}
			if f(out) != out {
				t.Errorf("%s is not idempotent on %q", name, s)
			}
		}
	}
	if got := Clean("\x1b]0;owned\x07\x1b[2Jok\n"); got != `\x1b]0;owned\x07\x1b[2Jok`+"\n" {
		t.Errorf("Clean = %q", got)
	}
	if got := Line("a\nb\tc\r\u009bd\u202ee\xff"); got != `a\nb\tc\r\u009bd\u202ee\xff` {
		t.Errorf("Line = %q", got)
	}
	for _, keep := range []string{"HTTP 500: upstream failed\n", "ünïcødé モデル", ""} {
		if Clean(keep) != keep {
			t.Errorf("Clean(%q) changed it", keep)
		}
	}
	if strings.Contains(Clean("x\x00y"), "\x00") {
		t.Error("NUL kept")
	}
}

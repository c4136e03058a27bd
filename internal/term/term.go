// Package term is the encoder of untrusted text for a terminal: what
// a server answered, an engine wrote to its log, or a spec holds. A
// terminal acts on control characters (ESC starts a sequence that can
// clear the screen, set the window title or answer back; a carriage return
// overwrites the line; C1 controls are 8-bit ESC sequences), so each is
// written as a visible escape (\x1b, \r, \u009b) and the text stays text.
package term

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Clean returns s for a terminal: every control character but newline and
// tab, every invalid UTF-8 byte, and the characters that reorder or break
// lines without a newline (bidirectional overrides, U+2028, U+2029)
// written as escapes.
func Clean(s string) string { return clean(s, false) }

// Line is Clean for text shown on one line: newline and tab are escaped
// too.
func Line(s string) string { return clean(s, true) }

func clean(s string, line bool) string {
	if safe(s, line) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && !line, r == '\t' && !line:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safe reports whether s needs no escape (the common case, without
// allocating).
func safe(s string, line bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return safeUTF8(s[i:])
		}
		if c < 0x20 && (line || c != '\n' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func safeUTF8(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || unsafeRune(r) {
			return false
		}
	}
	return true
}

// unsafeRune is a C1 control or a character that moves text about without
// being seen: the bidirectional embeddings, overrides and isolates, and
// the Unicode line and paragraph separators.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x2028 || r == 0x2029 || r == 0x200e || r == 0x200f || r == 0x061c
}

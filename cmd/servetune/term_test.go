package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBenchServerEscapes: a server whose error body holds terminal
// sequences (set the title, clear the screen, an 8-bit CSI) is quoted in
// the summary and the exit line with the sequences as visible escapes.
func TestBenchServerEscapes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "\x1b]0;owned\x07\x1b[2Jboom\u009b2J\rover")
	}))
	defer srv.Close()
	code, stdout, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--num-requests", "2", "--no-progress")
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	out := stdout + stderr
	for _, c := range []string{"\x1b", "\x07", "\u009b", "\r"} {
		if strings.Contains(out, c) {
			t.Errorf("output holds %q:\n%q", c, out)
		}
	}
	if !strings.Contains(stderr, `\x1b]0;owned\x07\x1b[2Jboom\u009b2J`) {
		t.Errorf("the server's words are not shown escaped:\n%s", stderr)
	}
}

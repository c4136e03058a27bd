package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressBar(t *testing.T) {
	tests := []struct {
		name     string
		total    int
		duration time.Duration
		done     int
		want     string
	}{
		{"count", 10, 0, 5, "5/10"},
		{"finished", 4, 0, 4, "100%"},
		{"duration-bound", 0, time.Hour, 3, "  0% 3 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := newProgress(&buf, "bench", tc.total, tc.duration)
			p.Update(tc.done, 0)
			p.Done()
			out := buf.String()
			if !strings.HasPrefix(out, "\rbench [") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, tc.want) {
				t.Errorf("drew %q, want %q in it", out, tc.want)
			}
		})
	}
	var nilBar *progressBar
	nilBar.Update(1, 2) // a nil bar draws nothing and does not panic
	nilBar.Done()
}

package selfstats

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestEvery: Every prints a sample at once, one each interval and one at
// stop, each with the time since it started. The intervals are counted
// on the synctest bubble's fake clock.
func TestEvery(t *testing.T) {
	s := Read()
	if s.Goroutines < 1 || s.HeapBytes == 0 {
		t.Errorf("sample %+v", s)
	}
	synctest.Test(t, func(t *testing.T) {
		var b bytes.Buffer
		stop := Every(context.Background(), &b, "test", time.Second)
		time.Sleep(3500 * time.Millisecond)
		stop()
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines, want 5 (start, 3 ticks, stop):\n%s", len(lines), b.String())
		}
		for i, l := range lines {
			if want := fmt.Sprintf("selfstats test t=%ds rss=", i); !strings.HasPrefix(l, want) || !strings.Contains(l, "goroutines=") {
				t.Errorf("line %d: %q, want %q... goroutines=", i, l, want)
			}
		}
	})
}

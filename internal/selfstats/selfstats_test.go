package selfstats

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	s := Read()
	if s.Goroutines < 1 || s.HeapBytes == 0 {
		t.Errorf("sample %+v", s)
	}
	var b bytes.Buffer
	stop := Every(context.Background(), &b, "test", 10*time.Millisecond)
	time.Sleep(35 * time.Millisecond)
	stop()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "selfstats test t=0s rss=") || !strings.Contains(lines[0], "goroutines=") {
		t.Errorf("output:\n%s", b.String())
	}
}

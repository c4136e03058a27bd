// Package selfstats prints a process's own resource use at intervals (RSS,
// heap, goroutines, open files): what `make soak` watches for leaks in
// `servetune bench` and `servetune sim serve` over long runs.
package selfstats

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/periodic"
)

// Sample is one reading of this process.
type Sample struct {
	RSSBytes   int64 // resident set size (0 where /proc is missing)
	HeapBytes  uint64
	Goroutines int
	OpenFiles  int // -1 where /proc is missing
}

// Read takes a sample.
func Read() Sample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := Sample{HeapBytes: ms.HeapInuse, Goroutines: runtime.NumGoroutine(), OpenFiles: -1}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			s.RSSBytes = pages * int64(os.Getpagesize())
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.OpenFiles = len(ents)
	}
	return s
}

// String is the line Every prints: "rss=41.2MB heap=12.0MB goroutines=9 open_files=12".
func (s Sample) String() string {
	return fmt.Sprintf("rss=%.1fMB heap=%.1fMB goroutines=%d open_files=%d",
		float64(s.RSSBytes)/(1<<20), float64(s.HeapBytes)/(1<<20), s.Goroutines, s.OpenFiles)
}

// Every prints "selfstats NAME t=ELAPSED SAMPLE" to w at each interval
// until ctx ends; the returned function stops it and prints a last line.
func Every(ctx context.Context, w io.Writer, name string, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	start := time.Now()
	print := func(context.Context) {
		fmt.Fprintf(w, "selfstats %s t=%s %s\n", name, time.Since(start).Round(time.Second), Read())
	}
	l := periodic.Start(ctx, interval, print)
	return func() { l.Stop(); print(ctx) }
}

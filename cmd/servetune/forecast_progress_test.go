package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/testspec"
)

// TestForecastProgressLines: off a terminal the forecast prints a line at
// every quarter of what it means to forecast, counting again when it
// refines (the total grows), each with the study's elapsed time; on a
// terminal one line is redrawn in place and ended when a batch is done.
func TestForecastProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := &tuneProgress{w: &buf, start: time.Now().Add(-191 * time.Second)}
	p.forecast(0, 8)
	for d := 1; d <= 8; d++ {
		p.forecast(d, 8)
	}
	p.forecast(8, 10) // refining around the best: two more
	p.forecast(9, 10)
	p.forecast(10, 10)
	want := []string{"2/8", "4/8", "6/8", "8/8", "10/10"}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("printed %q, want a line for each of %v", buf.String(), want)
	}
	line := regexp.MustCompile(`^forecasting: (\d+/\d+) configurations, 3m1[12]s elapsed$`)
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] != want[i] {
			t.Errorf("line %d %q, want forecasting: %s configurations, 3m11s elapsed", i, l, want[i])
		}
	}

	buf.Reset()
	p = &tuneProgress{w: &buf, term: true, start: time.Now()}
	for d := 0; d <= 40; d++ {
		p.forecast(d, 40)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "\rforecasting: 0/40 configurations, ") || !strings.HasSuffix(out, "\n") ||
		!strings.Contains(out, "\rforecasting: 40/40 configurations, ") || strings.Count(out, "\r") > 3 || strings.Count(out, "\n") != 1 {
		t.Errorf("on a terminal: %q, want the line redrawn in place (at most every 100 ms) and ended once", out)
	}
}

// TestTuneShowsForecastPhase: a guided study's tune shows the forecast
// as the forecast before the first trial starts, not as trials.
func TestTuneShowsForecastPhase(t *testing.T) {
	spec := writeSpec(t, testspec.EarlyStop)
	code, out, errs := runCLI(t, "tune", spec, "--db", filepath.Join(t.TempDir(), "f.db"))
	if code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	done := strings.Index(errs, "forecasting: 6/6 configurations, ")
	first := strings.Index(errs, "trial 0 start")
	if done < 0 || first < 0 || done > first {
		t.Errorf("stderr does not show the forecast's progress before the first trial:\n%s", errs)
	}
	if !regexp.MustCompile(`guided: forecast 6 configurations in \S+: \d+ simulated requests`).MatchString(errs) {
		t.Errorf("stderr does not say how long the forecast took:\n%s", errs)
	}
}

package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/testspec"
	"github.com/servetune/servetune/store"
)

// TestEarlyStopIsAnOutcome: a study the guided sampler stops before its
// trial count says so in tune's last lines, stores it, and the report
// and the dashboard say it too.
func TestEarlyStopIsAnOutcome(t *testing.T) {
	spec := writeSpec(t, testspec.EarlyStop)
	db := filepath.Join(t.TempDir(), "e.db")
	code, out, errs := runCLI(t, "tune", spec, "--db", db)
	if code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	re := regexp.MustCompile(`study early: stopped at (\d+) of 30 trials: \S`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tune's output does not say it stopped early:\n%s", out)
	}
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.GetStudy(context.Background(), "early")
	s.Close()
	if err != nil || !st.Stop.Stopped() || st.Stop.Of != 30 || st.Stop.At >= 30 {
		t.Fatalf("stored stop %+v, %v", st.Stop, err)
	}
	_, md, _ := runCLI(t, "report", "early", "--db", db, "--format", "md")
	if !strings.Contains(md, "stopped at "+m[1]+" of 30 trials") {
		t.Errorf("the report does not say the study stopped:\n%.600s", md)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
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

// TestStudyClock: the progress line counts trials, shows elapsed time,
// and an ETA from the finished trials' durations over what remains (the
// confirmation runs included).
func TestStudyClock(t *testing.T) {
	study := &spec.Spec{Tuner: spec.TunerSpec{Trials: 4, Confirm: spec.Confirm{Top: 1, Runs: 2}}}
	c := &studyClock{start: time.Now().Add(-90 * time.Second), spec: study, parallel: 1}
	t0 := time.Now()
	rep := func(done, total int, took time.Duration, confirms *int) tuner.TrialReport {
		return tuner.TrialReport{Done: done, Total: total, Confirms: confirms,
			Result: trial.Result{Started: t0, Finished: t0.Add(took)}}
	}
	// 1 of 4 done in 10 s: 3 search trials and 2 confirmation runs left.
	if got := c.finished(rep(1, 4, 10*time.Second, nil)); got != "[1/4, 1m30s elapsed, ETA 50s]" {
		t.Errorf("first line %q", got)
	}
	one := 0
	if got := c.finished(rep(1, 2, 30*time.Second, &one)); got != "[confirm 1/2, 1m30s elapsed, ETA 20s]" {
		t.Errorf("confirmation line %q", got)
	}
	if got := c.finished(rep(2, 2, 10*time.Second, &one)); !strings.HasSuffix(got, ", done]") {
		t.Errorf("last line %q", got)
	}
}

// TestStudyClockRejections: trials rejected before launch (infeasible, 0 s)
// say nothing about how long a trial takes. Before a launched trial has
// finished the ETA is unknown (it said 0 s with minutes to go), and after
// one it rests on the launched trials only.
func TestStudyClockRejections(t *testing.T) {
	study := &spec.Spec{Tuner: spec.TunerSpec{Trials: 10}}
	c := &studyClock{start: time.Now().Add(-time.Minute), spec: study, parallel: 1}
	t0 := time.Now()
	rejected := tuner.TrialReport{Total: 10, Result: trial.Result{Status: measure.StatusFailed, Failure: engine.FailInfeasible, Started: t0, Finished: t0}}
	ran := func(done int) tuner.TrialReport {
		return tuner.TrialReport{Done: done, Total: 10, Result: trial.Result{Status: measure.StatusOK, Started: t0, Finished: t0.Add(30 * time.Second)}}
	}
	for done := 1; done <= 2; done++ {
		rejected.Done = done
		if got := c.finished(rejected); !strings.HasSuffix(got, ", ETA unknown]") {
			t.Errorf("after %d rejections: %q", done, got)
		}
	}
	if got := c.finished(ran(3)); !strings.HasSuffix(got, ", ETA 3m30s]") {
		t.Errorf("after one 30 s trial, 7 left: %q", got)
	}
	rejected.Done = 4
	if got := c.finished(rejected); !strings.HasSuffix(got, ", ETA 3m00s]") {
		t.Errorf("after another rejection, 6 left: %q", got)
	}
}

package ui

import (
	"testing"
)

// TestLive: a trial's level progress is kept until it finishes, and the
// levels it finished are counted.
func TestLive(t *testing.T) {
	var l Live
	l.Progress(9, "concurrency=8", 1, 10) // not started: ignored
	l.Start(2, nil, []int{0})
	l.Start(1, nil, []int{1})
	l.Progress(2, "concurrency=8", 10, 10)
	l.Progress(2, "concurrency=64", 3, 10)
	got := l.Running()
	if len(got) != 2 || got[0].Number != 1 || got[1].Number != 2 {
		t.Fatalf("running %+v", got)
	}
	if r := got[1]; r.Level != "concurrency=64" || r.Done != 3 || r.Total != 10 || r.Levels != 1 {
		t.Errorf("trial 2 %+v", r)
	}
	l.Finish(2)
	if got := l.Running(); len(got) != 1 {
		t.Errorf("after finish %+v", got)
	}
	var none *Live
	if none.Running() != nil {
		t.Error("a nil Live runs something")
	}
}

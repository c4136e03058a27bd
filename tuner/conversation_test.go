package tuner

import (
	"context"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/testspec"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/memory"
)

// TestStudyVirtualConversation runs the virtual study with a conversation
// workload: the launcher's virtual clock runs each level's sessions closed
// loop, so every trial that fits measures every session's turns, the
// history served from the prefix cache, and the same seed stores the same
// figures.
func TestStudyVirtualConversation(t *testing.T) {
	src := strings.Replace(testspec.Virtual, "  dataset: {kind: random, input: 256, output: 32}\n",
		"  dataset: {kind: conversation, sessions: 6, turns: 3, think_time: 500ms, input: 256, output: 32}\n", 1)
	src = strings.Replace(src, "  requests_per_level: 24\n", "", 1)
	if src == testspec.Virtual || strings.Contains(src, "requests_per_level") {
		t.Fatal("the virtual spec no longer has the dataset or request count this test replaces")
	}
	run := func() []store.Trial {
		ctx := context.Background()
		study := mustSpec(t, src)
		db := openStore(t)
		out, err := (&Study{Spec: study, Store: db, Eval: &TrialRunner{Spec: study, Memory: memory.Model{}}}).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		trials, err := db.Trials(ctx, out.StudyID)
		if err != nil {
			t.Fatal(err)
		}
		return trials
	}
	trials := run()
	ok := 0
	for _, tr := range trials {
		if tr.Status != measure.StatusOK {
			continue
		}
		ok++
		for _, lp := range tr.LoadPoints {
			s := lp.Summary
			c := s.Conversation
			if c == nil || c.SessionsCompleted != 6 || len(c.Turns) != 3 || s.Completed != 18 {
				t.Fatalf("trial %d at %s: %d completed, conversation %+v", tr.Number, lp.Label, s.Completed, c)
			}
			if e := s.Engine; e == nil || e.PrefixCacheHitRate == nil || *e.PrefixCacheHitRate < 0.3 {
				t.Errorf("trial %d at %s: engine %+v, want the history's hits", tr.Number, lp.Label, e)
			}
		}
	}
	if ok == 0 {
		t.Fatal("no trial measured")
	}
	again := run()
	for i := range trials {
		if trials[i].Status != again[i].Status || len(trials[i].LoadPoints) != len(again[i].LoadPoints) {
			t.Fatalf("trial %d: %s then %s", i, trials[i].Status, again[i].Status)
		}
		for j := range trials[i].LoadPoints {
			if a, b := trials[i].LoadPoints[j].Summary.TTFT.P99, again[i].LoadPoints[j].Summary.TTFT.P99; a != b {
				t.Errorf("trial %d level %d: TTFT p99 %v then %v with the same seed", i, j, a, b)
			}
		}
	}
}

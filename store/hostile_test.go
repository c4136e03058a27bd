package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/internal/hostile"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// TestHostileText: every hostile string (quotes, SQL, NUL, invalid UTF-8)
// stored as a study's spec, a study name, a failure message and a log tail
// comes back as it went in (after redaction), in a database whose path
// holds the characters a SQLite URI gives a meaning to.
func TestHostileText(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a?mode=ro#x&y%20")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, h := range hostile.Strings {
		name := "s" + h
		spec := "name: x\nnote: " + h
		st, err := db.CreateStudy(ctx, Study{Name: name, Spec: spec, Seed: 1})
		if err != nil {
			t.Fatalf("%d %q: %v", i, h, err)
		}
		if err := db.StartTrial(ctx, st.ID, 0, engine.Settings{"max_running_requests": 8}, []int{0}); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishTrial(ctx, TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusFailed, Failure: engine.FailCrash,
			FailureMsg: h, LogTail: h}); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetStudy(ctx, name)
		if err != nil || got.Spec != RedactSpec(spec) {
			t.Errorf("%d %q: study %q spec %q, %v", i, h, got.Name, got.Spec, err)
		}
		trials, err := db.Trials(ctx, st.ID)
		if err != nil || len(trials) != 1 || trials[0].FailureMsg != Redact(h) || trials[0].LogTail != Redact(h) {
			t.Errorf("%d %q: trials %+v, %v", i, h, trials, err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not where it was asked for: %v", err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.GetStudy(ctx, "s"+hostile.Strings[3]); err != nil {
		t.Error(err)
	}
}

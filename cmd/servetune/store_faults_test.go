package main

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// TestReadCommandsMalformedRow: one malformed JSON value in one trial row
// (settings) and one in a load point of another trial cost those trials
// only: every read command works for every study of the database, and
// the trials table names the unreadable trial with its id and the parse
// error.
func TestReadCommandsMalformedRow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	if code, _, errs := runIn("tune", writeSpec(t, vspec(40, 3)), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	other := strings.Replace(vspec(40, 2), "name: vstudy", "name: other", 1)
	if code, _, errs := runIn("tune", writeSpec(t, other), "--db", db); code != exitOK {
		t.Fatalf("tune other: exit %d: %s", code, errs)
	}
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := raw.QueryRow(`SELECT t.id FROM trials t JOIN studies s ON s.id = t.study_id WHERE s.name = 'vstudy' AND t.number = 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE trials SET settings = '{"max_running_requests": 8,' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE load_points SET summary = 'not json' WHERE rowid = (SELECT lp.rowid FROM load_points lp
		JOIN trials t ON t.id = lp.trial_id JOIN studies s ON s.id = t.study_id WHERE s.name = 'vstudy' AND t.number = 2 LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	code, out, errs := runIn("trials", "vstudy", "--db", db)
	if code != exitOK || !strings.Contains(out, "ok (unreadable)") ||
		!strings.Contains(out, "trial 1 (id "+strconv.FormatInt(id, 10)+") is unreadable: settings: unexpected end of JSON input") ||
		!strings.Contains(out, "trial 2 (id") || !strings.Contains(out, "load point") {
		t.Errorf("trials: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{
		{"studies"}, {"trials", "other"}, {"trials", "vstudy", "--json"},
		{"recommend", "vstudy"}, {"recommend", "other"}, {"pareto", "vstudy"}, {"pareto", "other"},
		{"report", "vstudy", "-o", filepath.Join(t.TempDir(), "r.html")},
	} {
		if code, out, errs := runIn(append(args, "--db", db)...); code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	// The resume goes on past it, re-running nothing it cannot read.
	more := strings.Replace(vspec(40, 3), "trials: 3,", "trials: 4,", 1)
	code, _, errs = runIn("tune", writeSpec(t, more), "--db", db, "--resume")
	if code != exitOK || !strings.Contains(errs, "2 stored trial(s) could not be read back") {
		t.Errorf("resume: exit %d: %s", code, errs)
	}
}

package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
		{"studies"}, {"trials", "other"}, {"trials", "vstudy", "--json", "-"},
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

// TestTuneReadOnlyDatabase: tune on a database it may not write, or in a
// directory it may not write, says which in one line, exit 2 (SQLite's
// words were "attempt to write a readonly database" and, for a new file,
// "no such file or directory").
func TestTuneReadOnlyDatabase(t *testing.T) {
	bin := buildServetune(t)
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "study.yaml")
	if err := os.WriteFile(spec, []byte(vspec(20, 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")
	if code, _, errs := runIn("tune", spec, "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	// Root writes anywhere: tune then runs as nobody.
	cred := os.Getuid() == 0
	if cred {
		for _, d := range []string{filepath.Dir(dir), filepath.Dir(bin)} {
			_ = os.Chmod(d, 0o755)
			_ = os.Chmod(filepath.Dir(d), 0o755)
		}
		for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
				t.Skipf("%s is not readable by others: cannot test as nobody", d)
			}
		}
	} else if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	tune := func(db string, extra ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"tune", spec, "--db", db}, extra...)...)
		if cred {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), errb.String()
		}
		return 0, errb.String()
	}
	oneLine := func(s string) bool { return strings.Count(strings.TrimSpace(s), "\n") == 0 }
	if code, errs := tune(db, "--resume"); code != exitUsage || !oneLine(errs) || !strings.Contains(errs, "the database "+db+" is read-only for this user") {
		t.Errorf("read-only file: exit %d, %q", code, errs)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if code, errs := tune(filepath.Join(dir, "new.db")); code != exitUsage || !oneLine(errs) || !strings.Contains(errs, "cannot write in "+dir) {
		t.Errorf("read-only directory: exit %d, %q", code, errs)
	}
}

// TestBenchOutputLinks: --json through a symlink to the --csv file is the
// same file, refused before any load, and the file it names is left as it
// was; a real run writes through the link to its target, leaving no
// temporary file behind.
func TestBenchOutputLinks(t *testing.T) {
	srv := httptest.NewServer(&streamServer{})
	defer srv.Close()
	dir := t.TempDir()
	target := filepath.Join(dir, "target.csv")
	if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	base := []string{"bench", "--base-url", srv.URL, "--model", "m", "--no-progress", "--num-requests", "4"}
	code, _, errs := runIn(append(base, "--json", link, "--csv", target)...)
	if code != exitUsage || !strings.Contains(errs, "--json and --csv name the same file") {
		t.Errorf("--json LINK --csv TARGET: exit %d, %q", code, errs)
	}
	if b, _ := os.ReadFile(target); string(b) != "old\n" {
		t.Errorf("the refused run changed the target: %q", b)
	}
	csv := filepath.Join(dir, "r.csv")
	if code, _, errs := runIn(append(base, "--json", link, "--csv", csv)...); code != exitOK {
		t.Fatalf("bench: exit %d: %s", code, errs)
	}
	var doc struct {
		Completed int `json:"completed"`
	}
	if err := json.Unmarshal(mustRead(t, target), &doc); err != nil || doc.Completed != 4 {
		t.Errorf("the link's target: %v, %+v", err, doc)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

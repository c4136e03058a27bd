package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/tuner/spec"
)

// TestTuneAbsurdSpecs: specs a careless hand writes are refused in under
// a second with file:line: field: problem (exit 2), before any database is
// created, instead of crashing, sticking or silently rounding.
func TestTuneAbsurdSpecs(t *testing.T) {
	good, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, 20_000)
	for i := range many {
		many[i] = fmt.Sprint(i + 1)
	}
	distinct := make([]string, 9_000)
	for i := range distinct {
		distinct[i] = fmt.Sprint(i + 1)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"two billion requests", "requests_per_level: 400", "requests_per_level: 2000000000", ":24: workload.requests_per_level: 2000000000 is above the maximum 200000"},
		{"int64 range", "max_running_requests: {int: [16, 512], log: true}", "max_running_requests: {int: [1, 9223372036854775807]}", ":16: space.max_running_requests: bad value: max_running_requests 9223372036854775807 is above 2147483647"},
		{"20k choices", "max_running_requests: {int: [16, 512], log: true}", "max_running_requests: [" + strings.Join(many, ", ") + "]", ":16: space.max_running_requests: 20000 values listed, at most 10000"},
		{"fractional trials", "trials: 24,", "trials: 1.9,", ":28: tuner.trials: want an integer, got \"1.9\""},
		{"fractional concurrency", "concurrency: [8, 64]", "concurrency: [8.5]", ":23: workload.load.concurrency: want an integer, got \"8.5\""},
		{"second document", "tuner: {", "---\nname: other\n---\ntuner: {", ":27: a second YAML document"},
		{"not UTF-8", "name: quickstart", "name: quick\xff\xfestart", ":7: not UTF-8 text"},
		{"a 2 MB comment", "name: quickstart", "# " + strings.Repeat("x", 2<<20) + "\nname: quickstart", ":1: the spec is over 1024 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := string(good)
			if !strings.Contains(src, tc.old) {
				t.Fatalf("quickstart.yaml lacks %q", tc.old)
			}
			spec := writeSpec(t, strings.Replace(src, tc.old, tc.new, 1))
			db := filepath.Join(t.TempDir(), "t.db")
			start := time.Now()
			code, _, errs := runIn("tune", spec, "--db", db)
			if took := time.Since(start); took > time.Second {
				t.Errorf("refused after %v", took)
			}
			if code != exitUsage || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, spec+tc.want) {
				t.Errorf("exit %d, stderr %.300q; want exit 2 and one line with %q", code, errs, spec+tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("a database was created")
			}
		})
	}
	// 9,000 distinct values parse quickly (the duplicate check was
	// quadratic).
	spec := writeSpec(t, strings.Replace(string(good), "max_running_requests: {int: [16, 512], log: true}",
		"max_running_requests: ["+strings.Join(distinct, ", ")+"]", 1))
	start := time.Now()
	if _, err := parseSpecForTest(spec); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("9,000 choices parsed in %v", took)
	}
}

func parseSpecForTest(path string) (any, error) { return spec.ParseSpecFile(path) }

// TestTuneSecretsAtRest: a credential given as an engine flag's value
// (extra_args) reaches the engine but never the database, the output or
// the recommended command.
func TestTuneSecretsAtRest(t *testing.T) {
	const secret = "my-internal-token-2024"
	good, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(good), `extra_args: ["--no-enable-log-requests"]`, `extra_args: ["--no-enable-log-requests", "--api-key", "`+secret+`"]`, 1)
	src = strings.Replace(src, "trials: 24", "trials: 4", 1)
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	code, out, errs := runIn("tune", writeSpec(t, src), "--db", db)
	if code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	var all strings.Builder
	all.WriteString(out + errs)
	for _, args := range [][]string{{"trials", "quickstart", "--json", "-"}, {"recommend", "quickstart"}, {"recommend", "quickstart", "--format", "docker"},
		{"recommend", "quickstart", "--format", "json"}, {"pareto", "quickstart", "--json", "-"}} {
		_, o, e := runIn(append(args, "--db", db)...)
		all.WriteString(o + e)
	}
	if strings.Contains(all.String(), secret) {
		t.Errorf("the secret is in the output:\n%s", all.String())
	}
	if !strings.Contains(all.String(), "--api-key '[REDACTED]'") { // quoted: a bare [REDACTED] is a shell glob
		t.Errorf("the recommended command does not show the flag redacted:\n%s", out)
	}
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("the secret is stored in %s", f)
		}
	}
}

// TestReadCommandsReadOnly: the read commands work on a database they may
// not write, in a directory they may not write (a read-only mount).
func TestReadCommandsReadOnly(t *testing.T) {
	bin := buildServetune(t)
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")
	if code, _, errs := runIn("tune", writeSpec(t, vspec(40, 3)), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	// Root writes anywhere: the read commands then run as nobody, for whom
	// the directory and the file are read-only.
	cred := os.Getuid() == 0
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if cred {
		// nobody must reach the binary and the database through their
		// parent directories (a test's temporary directories are 0700).
		for _, d := range []string{filepath.Dir(dir), filepath.Dir(bin)} {
			_ = os.Chmod(d, 0o755)
			_ = os.Chmod(filepath.Dir(d), 0o755)
		}
		for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
				t.Skipf("%s is not readable by others: cannot test as nobody", d)
			}
		}
	}
	for _, args := range [][]string{{"studies"}, {"trials", "vstudy"}, {"pareto", "vstudy"}, {"recommend", "vstudy"}} {
		cmd := exec.Command(bin, append(args, "--db", db)...)
		if cred {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%v on a read-only database: %v\n%s", args, err, out)
		}
	}
	if left, _ := filepath.Glob(db + "-*"); len(left) > 0 {
		t.Logf("files beside the database: %v", left)
	}
}

// TestCorruptDatabase: a file that is not a database, or a truncated one,
// is one line naming it, for writers and readers alike.
func TestCorruptDatabase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	if code, _, errs := runIn("tune", writeSpec(t, vspec(20, 2)), "--db", db); code != exitOK {
		t.Fatalf("tune: %s", errs)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database\n", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.db")
	if err := os.WriteFile(truncated, b[:len(b)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{garbage, truncated} {
		for _, args := range [][]string{{"studies"}, {"trials", "vstudy"}, {"tune", writeSpec(t, vspec(20, 2))}} {
			code, _, errs := runIn(append(args, "--db", f)...)
			if code == exitOK || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, filepath.Base(f)) {
				t.Errorf("%v on %s: exit %d, %q; want a one-line error naming the file", args, filepath.Base(f), code, errs)
			}
		}
	}
}

// TestDiskFull: writes that fail for want of space (a file size limit
// here) stop tune with one line and exit 1; the database stays readable
// and bench says which output it could not write.
func TestDiskFull(t *testing.T) {
	bin := buildServetune(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	// 512 KiB: the study's first trials fit, its request rows do not.
	cmd := exec.Command("sh", "-c", `ulimit -f 512 && exec "$0" "$@"`, bin, "tune", writeSpec(t, vspec(2000, 6)), "--db", db)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "file too large") {
		t.Errorf("tune past the size limit: %v\n%s", err, out)
	}
	if code, o, errs := runIn("studies", "--db", db); code != exitOK || !strings.Contains(o, "vstudy") {
		t.Errorf("the database after a failed write: exit %d\n%s%s", code, o, errs)
	}
	srv := httptest.NewServer(&streamServer{})
	defer srv.Close()
	cmd = exec.Command("sh", "-c", `ulimit -f 64 && exec "$0" "$@"`, bin, "bench", "--base-url", srv.URL, "--model", "m",
		"--num-requests", "400", "--output-len", "64", "--no-progress", "--requests-out", filepath.Join(dir, "r.jsonl"))
	out, err = cmd.CombinedOutput()
	if !asExit(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(string(out), "--requests-out") || !strings.Contains(string(out), "file too large") {
		t.Errorf("bench past the size limit: %v\n%s", err, out)
	}
}

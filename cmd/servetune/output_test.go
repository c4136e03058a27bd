package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/store"
)

// ownFlagSets are the flags of the commands that parse their arguments
// themselves (cobra sees none of them), by command path.
var ownFlagSets = map[string]func() *pflag.FlagSet{
	"servetune sim estimate": func() *pflag.FlagSet { return simEstimateFlags(new(string)) },
	"servetune sim run": func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("sim run", pflag.ContinueOnError)
		simBenchFlags(fs, &benchFlags{})
		return fs
	},
	"servetune plan":       func() *pflag.FlagSet { return planFlagSet(&planFlags{}) },
	"servetune sim serve":  nil, // the engine's flags only
	"servetune sim router": nil, // vLLM's toy proxy's (routerFlags)
}

// commandFlags calls f with every command's path and flags.
func commandFlags(t *testing.T, f func(path string, fs *pflag.FlagSet)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.DisableFlagParsing {
			mk, ok := ownFlagSets[c.CommandPath()]
			if !ok {
				t.Errorf("%s parses its own flags: add them to ownFlagSets", c.CommandPath())
			} else if mk != nil {
				f(c.CommandPath(), mk())
			}
		} else {
			f(c.CommandPath(), c.Flags())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(os.Stdout, os.Stderr))
}

// TestJSONFlagOneMeaning: every command's --json is the one flag of
// addJSONFlag (a PATH, - for standard output, one help text), and every
// flag that names an output file is checked before the work.
func TestJSONFlagOneMeaning(t *testing.T) {
	var withJSON []string
	commandFlags(t, func(path string, fs *pflag.FlagSet) {
		fs.VisitAll(func(fl *pflag.Flag) {
			_, checked := fl.Annotations[outputAnnotation]
			switch fl.Name {
			case "json":
				withJSON = append(withJSON, path)
				if _, ok := fl.Value.(jsonPath); !ok || !checked {
					t.Errorf("%s: --json is a %s, not addJSONFlag's", path, fl.Value.Type())
				}
				if !strings.Contains(fl.Usage, "- writes it to standard output") {
					t.Errorf("%s: --json's help %q is not addJSONFlag's", path, fl.Usage)
				}
			case "csv", "html", "requests-out", "output":
				if !checked {
					t.Errorf("%s: --%s names an output file but is not addOutputFlag's", path, fl.Name)
				}
			}
		})
	})
	for _, want := range []string{"bench", "bench compare", "calibrate", "diagnose", "eval", "gpus", "pareto", "plan",
		"sim estimate", "sim run", "studies", "trials", "whatif"} {
		if !strings.Contains(strings.Join(withJSON, "\n")+"\n", "servetune "+want+"\n") {
			t.Errorf("servetune %s has no --json", want)
		}
	}
}

// TestBareJSONRefused: --json without its value (the switch it was on
// some commands), at the end or before another flag, is a one-line usage
// error saying what it wants, on every command, before any work.
func TestBareJSONRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	for _, args := range [][]string{
		{"studies", "--json"},
		{"studies", "--json", "--db", db},
		{"studies", "--json="},
		{"trials", "q", "--db", db, "--json"},
		{"pareto", "q", "--json", "--db", db},
		{"diagnose", "q", "--db", db, "--json"},
		{"gpus", "--json"},
		{"calibrate", "q", "--db", db, "-o", filepath.Join(dir, "p.json"), "--json"},
		{"bench", "compare", "a.json", "b.json", "--json"},
		{"bench", "--base-url", "http://127.0.0.1:1", "--model", "m", "--json"},
		{"eval", "--base-url", "http://127.0.0.1:1", "--model", "m", "--json"},
		{"whatif", "--model", "llama-3.1-8b", "--gpus", "L4", "--json"},
		{"plan", "--model", "llama-3.1-8b", "--synth", "day", "--json"},
		{"plan", "--model", "llama-3.1-8b", "--json", "--synth", "day"},
		{"sim", "estimate", "llama-3.1-8b", "--json"},
		{"sim", "estimate", "llama-3.1-8b", "--json", "--gpu", "L4"},
		{"sim", "run", "llama-3.1-8b", "--num-requests", "4", "--json"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitUsage || !strings.HasPrefix(stderr, "servetune: --json wants a file, or - for standard output") ||
			strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line saying what --json wants", args, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused command created %s", db)
	}
}

// TestJSONDashIsStdout: --json - writes to standard output what --json
// FILE writes to the file, and nothing else there; --json FILE leaves the
// table on standard output.
func TestJSONDashIsStdout(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	writeResult(t, a, measure.Load{MaxConcurrency: 4}, 0)
	writeResult(t, b, measure.Load{MaxConcurrency: 4}, 3)
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, tc := range []struct {
		name  string
		args  []string
		table string // on standard output without --json -
	}{
		{"studies", []string{"studies", "--db", db}, "NAME"},
		{"sim estimate", []string{"sim", "estimate", "llama-3.1-8b", "--max-model-len", "8192"}, "tokens that fit"},
		{"bench compare", []string{"bench", "compare", a, b}, "median ttft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, "--json", "-")...)
			if code != exitOK {
				t.Fatalf("--json -: exit %d: %s", code, stderr)
			}
			var v any
			if err := json.Unmarshal([]byte(stdout), &v); err != nil {
				t.Fatalf("--json -: standard output is not JSON alone (%v):\n%s", err, stdout)
			}
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			code, table, stderr := runCLI(t, append(tc.args, "--json", file)...)
			if code != exitOK {
				t.Fatalf("--json FILE: exit %d: %s", code, stderr)
			}
			got, err := os.ReadFile(file)
			if err != nil || string(got) != stdout {
				t.Errorf("--json FILE wrote %q (%v); --json - printed %q", got, err, stdout)
			}
			if !strings.Contains(table, tc.table) {
				t.Errorf("--json FILE: standard output lacks the table (%q):\n%s", tc.table, table)
			}
		})
	}
}

// TestOutputPathChecked: an output file in a directory that does not
// exist, or a directory, is refused before the command does any work:
// exit 2, one line naming the flag and the path (plan --html
// /nonexistent/x.html failed with exit 1 after the whole plan).
func TestOutputPathChecked(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "out")
	a := filepath.Join(dir, "a.json")
	writeResult(t, a, measure.Load{MaxConcurrency: 4}, 0)
	db := filepath.Join(dir, "s.db")
	plan := []string{"plan", "--model", "llama-3.1-8b", "--gpu", "L40S", "--synth", "day", "--hours", "1", "--slo", "ttft_p99_ms=2000"}
	simRun := []string{"sim", "run", "llama-3.1-8b", "--num-requests", "50"}
	bench := []string{"bench", "--base-url", "http://127.0.0.1:1", "--model", "m", "--num-requests", "4", "--no-progress"}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{append(plan, "--html", missing), "--html"},
		{append(plan, "--json", missing), "--json"},
		{append(plan, "--format", "k8s", "--output", missing), "--output"},
		{append(simRun, "--json", missing), "--json"},
		{append(simRun, "--csv", missing), "--csv"},
		{append(simRun, "--html", missing), "--html"},
		{append(simRun, "--requests-out", missing), "--requests-out"},
		{append(bench, "--json", missing), "--json"},
		{append(bench, "--html", missing), "--html"},
		{[]string{"bench", "compare", a, a, "--html", missing}, "--html"},
		{[]string{"bench", "compare", a, a, "--json", missing}, "--json"},
		{[]string{"whatif", "--model", "llama-3.1-8b", "--gpus", "L4", "--input-len", "512", "--output-len", "64",
			"--slo", "ttft_p99_ms=1000", "--target-rps", "5", "--json", missing}, "--json"},
		{[]string{"eval", "--base-url", "http://127.0.0.1:1", "--model", "m", "--json", missing}, "--json"},
		{[]string{"report", "q", "--db", db, "-o", missing}, "--output"},
		{[]string{"calibrate", "q", "--db", db, "-o", missing}, "--output"},
		{[]string{"studies", "--db", db, "--json", missing}, "--json"},
		{[]string{"sim", "estimate", "llama-3.1-8b", "--json", missing}, "--json"},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		want := "servetune: " + tc.flag + " " + missing + ": directory " + filepath.Dir(missing) + " does not exist\n"
		if code != exitUsage || stderr != want || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, want)
		}
	}
	code, _, stderr := runCLI(t, append(simRun, "--json", dir)...)
	if code != exitUsage || !strings.Contains(stderr, "--json "+dir+": is a directory") {
		t.Errorf("--json DIR: exit %d, %q", code, stderr)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, append(simRun, "--csv", filepath.Join(ro, "x.csv"))...)
		if code != exitUsage || !strings.Contains(stderr, "cannot write in directory "+ro) {
			t.Errorf("--csv in a read-only directory: exit %d, %q", code, stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused command created %s", db)
	}
}

// TestPlanJSONDashAlone: plan --json - refuses a second output on
// standard output (the manifests, the replay's measurements).
func TestPlanJSONDashAlone(t *testing.T) {
	for _, extra := range [][]string{{"--format", "k8s"}, {"--replay"}} {
		code, _, stderr := runCLI(t, planArgs(append([]string{"--json", "-"}, extra...)...)...)
		if code != exitUsage || !strings.Contains(stderr, "--json -") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q", extra, code, stderr)
		}
	}
}

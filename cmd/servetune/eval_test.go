package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/quality"
)

// knownServer answers the seeded task set over loopback HTTP, right except
// where wrong says; it is the reference a quality test knows the accuracy of.
func knownServer(t *testing.T, seed uint64, n int, wrong func(id int) bool) string {
	t.Helper()
	byPrompt := map[string]quality.Task{}
	for _, tk := range quality.Tasks(seed, n) {
		byPrompt[tk.Prompt] = tk
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt string `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		tk, ok := byPrompt[body.Prompt]
		if !ok {
			http.Error(w, "unknown prompt", 400)
			return
		}
		ans := tk.Answer
		if wrong(tk.ID) {
			ans = "I think " + ans
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":%q}]}`, " "+ans)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestEvalCLI(t *testing.T) {
	dir := t.TempDir()
	good := knownServer(t, 1, 80, func(int) bool { return false })
	worse := knownServer(t, 1, 80, func(id int) bool { return id%8 == 0 }) // 87.5%
	base := filepath.Join(dir, "base.json")

	code, stdout, stderr := runCLI(t, "eval", "--base-url", good, "--model", "m", "--items", "80", "--json", base)
	if code != exitOK || !strings.Contains(stdout, "all         100.0% (80 of 80)") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "eval", "--base-url", worse, "--model", "m", "--items", "80", "--baseline", base)
	if code != exitSLOMiss || !strings.Contains(stdout, "accuracy 87.5% vs baseline 100.0% (drop 12.5 points, at most 1.0 allowed), agreement with the baseline 87.5%") ||
		!strings.Contains(stderr, "quality gate: accuracy dropped 12.5 points") {
		t.Errorf("a worse server: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "eval", "--base-url", worse, "--model", "m", "--items", "80", "--baseline", base, "--max-drop-pct", "15")
	if code != exitOK || !strings.Contains(stdout, "quality passes") {
		t.Errorf("within a 15-point allowance: exit %d\n%s", code, stdout)
	}

	sim := startSimServe(t, "llama-3.1-8b", "--max-model-len", "4096", "--time-scale", "50")
	code, _, stderr = runCLI(t, "eval", "--base-url", sim, "--model", "llama-3.1-8b", "--items", "8")
	if code != exitFailed || !strings.Contains(stderr, "not scored") || !strings.Contains(stderr, "not a model's") {
		t.Errorf("the simulated engine: exit %d, %s", code, stderr)
	}

	for _, tc := range []struct{ args, want string }{
		{"--model m", "--base-url is required"},
		{"--base-url ftp://x --model m", "--base-url"},
		{"--base-url " + good + " --model m --items 2", "--items 2"},
		{"--base-url " + good + " --model m --baseline " + base + " --seed 2", "give the same --seed and --items"},
		{"--base-url " + good + " --model m --baseline /nonexistent.json", "--baseline"},
	} {
		code, _, stderr := runCLI(t, append([]string{"eval"}, strings.Fields(tc.args)...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("eval %s: exit %d, %q; want one line naming %s", tc.args, code, stderr, tc.want)
		}
	}
}

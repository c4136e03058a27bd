package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// writeResult writes a one-level result file measured at load l, with
// 40 requests whose TTFT grows with shift (ms).
func writeResult(t *testing.T, path string, l measure.Load, shift float64) {
	t.Helper()
	var recs []measure.Record
	for i := range 40 {
		at := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
		first := 20 + shift + float64(i%5)
		recs = append(recs, measure.Record{Index: i, Send: 0, First: at(first), Last: at(first + 30), End: at(first + 31),
			PromptTokens: 8, OutputTokens: 4, Chunks: []measure.Chunk{{At: at(first), Tokens: 1}, {At: at(first + 10), Tokens: 1},
				{At: at(first + 20), Tokens: 1}, {At: at(first + 30), Tokens: 1}}})
	}
	s := measure.Summarize(recs, measure.SummaryOptions{KeepSamples: true, Bootstrap: 50, Goodput: measure.SLO{TTFTms: 22}})
	s.RequestRate, s.MaxConcurrency, s.Burstiness = l.Rate, l.MaxConcurrency, 1
	s.Meta = map[string]any{"dataset": map[string]any{"kind": "random"}, "num_requests": 40}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchCompareRefusesDifferentWorkloads: runs at 8 and 14 req/s are
// not compared as if only the server changed (exit 2, naming the
// difference) unless asked, and then with a warning in the text and the
// HTML; levels are named by their load, rates with four digits at most.
func TestBenchCompareRefusesDifferentWorkloads(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	writeResult(t, a, measure.Load{Rate: 8}, 0)
	writeResult(t, b, measure.Load{Rate: 14}, 5)
	writeResult(t, c, measure.Load{Rate: 6.441961327797018}, 5)

	code, _, stderr := runCLI(t, "bench", "compare", a, b)
	if code != exitUsage || !strings.Contains(stderr, "request_rate 8 vs 14") || !strings.Contains(stderr, "(rate=8 vs rate=14)") || !strings.Contains(stderr, "--allow-different-workloads") {
		t.Fatalf("different rates: exit %d, %q; want %d naming request_rate 8 vs 14, the levels base first", code, stderr, exitUsage)
	}

	html := filepath.Join(dir, "cmp.html")
	code, stdout, stderr := runCLI(t, "bench", "compare", "--allow-different-workloads", "--html", html, a, c)
	if code != exitOK {
		t.Fatalf("allowed: exit %d: %s", code, stderr)
	}
	for _, out := range []string{stdout, stderr} {
		if !strings.Contains(strings.ToLower(out), "warning") || !strings.Contains(out, "request_rate 8 vs 6.442") {
			t.Errorf("no warning naming the difference:\n%s", out)
		}
	}
	if !strings.Contains(stdout, "level rate=6.442 against rate=8") {
		t.Errorf("levels not named by their load:\n%s", stdout)
	}
	page := string(mustRead(t, html))
	for _, want := range []string{"Warning:", "rate=6.442 against rate=8", "base, rate=8", "new, rate=6.442"} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(page, "level 0") || strings.Contains(page, "6.441961") {
		t.Error("HTML names a level by its index or with every digit of its rate")
	}

	code, stdout, stderr = runCLI(t, "bench", "compare", a, a)
	if code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("same workload: exit %d, %q", code, stderr)
	}
	if !strings.Contains(stdout, "goodput/s ") {
		t.Errorf("compare leaves goodput out:\n%s", stdout)
	}
}

// TestBenchCompareReadsAppendedResults: vLLM's --append-result writes one
// result per line; each line is a level.
func TestBenchCompareReadsAppendedResults(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	writeResult(t, a, measure.Load{MaxConcurrency: 4}, 0)
	one := mustRead(t, a)
	lines := filepath.Join(dir, "appended.json")
	if err := os.WriteFile(lines, append(append(append([]byte{}, one...), '\n'), one...), 0o644); err != nil {
		t.Fatal(err)
	}
	sums, err := readSummaries(lines)
	if err != nil || len(sums) != 2 {
		t.Fatalf("read %d levels, %v; want 2", len(sums), err)
	}
	if code, stdout, stderr := runCLI(t, "bench", "compare", lines, lines); code != exitOK || strings.Count(stdout, "level concurrency=4") != 2 {
		t.Errorf("exit %d, %s%s", code, stdout, stderr)
	}
}

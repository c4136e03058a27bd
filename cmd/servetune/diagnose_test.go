package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
)

// startSimServe runs `servetune sim serve` in this process until the test
// ends and returns its base URL.
func startSimServe(t *testing.T, args ...string) string {
	t.Helper()
	return startCLI(t, uvicornURL, append([]string{"sim", "serve", "--host", "127.0.0.1", "--port", "0", "--sim-load-time", "0"}, args...)...)
}

// TestBenchFindsMaxNumSeqs is the issue's case: `servetune bench
// --scrape-metrics` at concurrency 48 against a simulated vLLM that runs at
// most 8 requests at once prints a finding that names --max-num-seqs with
// the queueing evidence (waiting requests, KV usage); against one that
// runs 256 it does not.
func TestBenchFindsMaxNumSeqs(t *testing.T) {
	if testing.Short() {
		t.Skip("two short real-clock benchmarks")
	}
	for _, tc := range []struct {
		seqs string
		want bool
	}{{"8", true}, {"256", false}} {
		t.Run("max-num-seqs="+tc.seqs, func(t *testing.T) {
			// Time scale 2, not 10: at 10 a loaded machine's client could not
			// keep 48 requests outstanding (the queue peaked at 25, the rule
			// rightly stayed silent).
			base := startSimServe(t, "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", tc.seqs, "--time-scale", "2")
			out := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runCLI(t, "bench", "--base-url", base, "--model", "meta-llama/Llama-3.1-8B-Instruct",
				"--max-concurrency", "48", "--num-requests", "96", "--input-len", "1024", "--output-len", "128",
				"--scrape-metrics", "--scrape-interval", "25ms", "--gpus", "none", "--no-progress", "--json", out)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			t.Logf("%s", stdout[strings.Index(stdout, "---------- Engine"):])
			flat := strings.Join(strings.Fields(stdout), " ") // findings are wrapped
			finding := strings.Contains(flat, "[action]") && strings.Contains(flat, "Raise --max-num-seqs")
			if finding != tc.want {
				t.Fatalf("finding naming --max-num-seqs: %v, want %v", finding, tc.want)
			}
			if !tc.want && strings.Contains(flat, "--max-num-seqs") {
				t.Errorf("a finding names --max-num-seqs at 256")
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var s measure.Summary
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			e := s.Engine
			if e == nil || e.Source != "scrape" || e.Engine != "vllm" || e.Samples < 3 {
				t.Fatalf("engine_metrics %+v", e)
			}
			if tc.want {
				if e.NumRequestsRunningPeak != 8 || e.NumRequestsWaitingPeak < 30 || e.KVCacheUsagePeak > 0.1 {
					t.Errorf("cap 8: running peak %v, waiting peak %v, KV peak %v", e.NumRequestsRunningPeak, e.NumRequestsWaitingPeak, e.KVCacheUsagePeak)
				}
				for _, w := range []string{"held at 8 running requests", "waited on average", "KV cache peaked at"} {
					if !strings.Contains(flat, w) {
						t.Errorf("the finding lacks its evidence %q", w)
					}
				}
				if _, ok := s.Meta["findings"]; !ok {
					t.Errorf("--json lacks the findings")
				}
			} else if e.NumRequestsRunningPeak <= 8 {
				t.Errorf("cap 256: running peak %v", e.NumRequestsRunningPeak)
			}
			// `servetune diagnose RESULT.json` finds what bench found.
			code, dout, derr := runCLI(t, "diagnose", out)
			dflat := strings.Join(strings.Fields(dout), " ")
			if code != exitOK || strings.Contains(dflat, "Raise --max-num-seqs") != tc.want {
				t.Errorf("diagnose %s: exit %d, finding naming --max-num-seqs: %v, want %v\n%s%s", out, code, !tc.want, tc.want, dout, derr)
			}
		})
	}
}

// diagStudy is a virtual study whose engine runs at most 8 requests at once
// under a load of 32: the max-running-requests rule has its evidence.
const diagStudy = `name: diag
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space: {max_running_requests: [8], gpu_memory_fraction: [0.1, 0.9]}
workload:
  dataset: {kind: random, input: 512, output: 64}
  load: {concurrency: [2, 32]}
  requests_per_level: 96
  warmup: 0
slo: {ttft_p99_ms: 60000}
tuner: {sampler: grid, trials: 2, seed: 1, precheck: false, confirm: false}
`

// TestDiagnoseStudy: `servetune diagnose STUDY` prints the findings
// recommend gives for the recommended configuration (the same rules, the
// same level); --trial N diagnoses every level of trial N; bad input is one
// line and exit 2.
func TestDiagnoseStudy(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	spec := writeSpec(t, diagStudy)
	if code, _, errs := runCLI(t, "tune", spec, "--db", db); code != exitOK {
		t.Fatalf("tune: %d %s", code, errs)
	}
	code, rec, errs := runCLI(t, "recommend", "diag", "--db", db, "--format", "json")
	if code != exitOK {
		t.Fatalf("recommend: %d %s", code, errs)
	}
	var doc struct {
		Trial    int                `json:"trial"`
		Findings []diagnose.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(rec), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Findings) == 0 {
		t.Fatalf("recommend gave no findings to compare with:\n%s", rec)
	}
	code, out, errs := runCLI(t, "diagnose", "diag", "--db", db, "--json", "-")
	var got []diagnose.Finding
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("diagnose --json: %d %s%s", code, out, errs)
	}
	if !reflect.DeepEqual(got, doc.Findings) {
		t.Errorf("diagnose findings %+v\nrecommend findings %+v", got, doc.Findings)
	}
	code, out, errs = runCLI(t, "diagnose", "diag", "--db", db)
	flat := strings.Join(strings.Fields(out), " ")
	if code != exitOK || !strings.Contains(out, "Findings:") {
		t.Errorf("diagnose: %d\n%s%s", code, out, errs)
	}
	for _, f := range doc.Findings {
		if !strings.Contains(flat, strings.Join(strings.Fields(f.String()), " ")) {
			t.Errorf("diagnose lacks %q:\n%s", f.String(), out)
		}
	}
	code, out, errs = runCLI(t, "diagnose", "diag", "--db", db, "--trial", strconv.Itoa(doc.Trial))
	if code != exitOK || !strings.Contains(out, "concurrency=2") && !strings.Contains(out, "concurrency=32") {
		t.Errorf("diagnose --trial %d: %d\n%s%s", doc.Trial, code, out, errs)
	}
	notJSON := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	failed := strconv.Itoa(1 - doc.Trial) // the 0.1 fraction: out of memory
	for _, args := range [][]string{
		{"diagnose", "nope", "--db", db},
		{"diagnose", "diag", "--db", db, "--trial", "99"},
		{"diagnose", "diag", "--db", db, "--trial", failed},
		{"diagnose", notJSON},
		{"diagnose", filepath.Join(dir, "missing.json")},
		{"diagnose", notJSON, "--trial", "1"},
	} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q", args, code, errs)
		}
	}
}

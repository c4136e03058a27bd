package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/measure"
)

// startSimServe runs `servetune sim serve` in this process until the test
// ends and returns its base URL.
func startSimServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncBuffer
	var wg sync.WaitGroup
	code := -1
	wg.Go(func() {
		code = run(ctx, append([]string{"sim", "serve", "--host", "127.0.0.1", "--port", "0", "--sim-load-time", "0"}, args...), &syncBuffer{}, &errb)
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if code != exitOK {
			t.Errorf("sim serve exit %d: %s", code, errb.String())
		}
	})
	for range 1000 {
		if _, rest, ok := strings.Cut(errb.String(), "Uvicorn running on "); ok {
			base, _, _ := strings.Cut(rest, " ")
			return base
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sim serve did not start: %s", errb.String())
	return ""
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
			base := startSimServe(t, "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", tc.seqs, "--time-scale", "10")
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
		})
	}
}

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

// TestBenchFreshPromptsPerLevel is the case against `sim serve`
// over loopback: a sweep draws fresh prompts for each level and empties
// the server's prefix cache before each one, so no level hits prompts an
// earlier one sent; re-sending a seed's prompts to a server that kept its
// cache (--seed, --keep-prefix-cache) hits it, and the run says so.
func TestBenchFreshPromptsPerLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("short real-clock benchmarks")
	}
	model := "meta-llama/Llama-3.1-8B-Instruct"
	base := startSimServe(t, model, "--time-scale", "10")
	dir := t.TempDir()
	bench := func(out string, extra ...string) (string, []measure.Summary) {
		t.Helper()
		args := append([]string{"bench", "--base-url", base, "--model", model, "--num-requests", "12", "--input-len", "512",
			"--output-len", "4", "--scrape-metrics", "--scrape-interval", "25ms", "--gpus", "none", "--no-progress", "--json", out}, extra...)
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		sums, err := readSummaries(out)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(stdout), " "), sums
	}
	hit := func(s measure.Summary) float64 {
		if s.Engine == nil || s.Engine.PrefixCacheHitRate == nil {
			t.Fatalf("no prefix cache hit rate: %+v", s.Engine)
		}
		return *s.Engine.PrefixCacheHitRate
	}

	// Three levels: the simulator caches a prompt's blocks once a second
	// request shares them, so re-sent prompts hit from the third send on.
	stdout, sums := bench(filepath.Join(dir, "sweep.json"), "--sweep", "concurrency=4,4,4")
	if len(sums) != 3 {
		t.Fatalf("%d levels, want 3", len(sums))
	}
	seeds := map[float64]bool{}
	for i, s := range sums {
		if h := hit(s); h > 0.1 {
			t.Errorf("level %d hit the prefix cache at %.1f%%: it re-sent prompts", i, 100*h)
		}
		if got := s.Meta["prefix_cache_reset"]; got != "vllm: POST /reset_prefix_cache" {
			t.Errorf("level %d: prefix_cache_reset %v", i, got)
		}
		seeds[s.Meta["seed"].(float64)] = true
		if rs, ok := s.Meta["run_seed"].(float64); s.Meta["seed_given"] != false || !ok || rs >= 1<<53 {
			t.Errorf("level %d meta: seed_given %v, run_seed %v", i, s.Meta["seed_given"], s.Meta["run_seed"])
		}
	}
	if len(seeds) != 3 {
		t.Errorf("levels drew the same seed: %v", seeds)
	}
	if strings.Contains(stdout, "share no prefix") {
		t.Errorf("a fresh run was reported as cache-warm: %s", stdout)
	}

	// The old default: the same seed's prompts again, cache kept.
	bench(filepath.Join(dir, "a.json"), "--seed", "7", "--keep-prefix-cache")
	bench(filepath.Join(dir, "b.json"), "--seed", "7", "--keep-prefix-cache")
	stdout, sums = bench(filepath.Join(dir, "b.json"), "--seed", "7", "--keep-prefix-cache")
	if h := hit(sums[0]); h < 0.5 {
		t.Errorf("the same prompts again hit the kept cache at %.1f%%, want most", 100*h)
	}
	if !strings.Contains(stdout, "[warning]") || !strings.Contains(stdout, "share no prefix") {
		t.Errorf("a cache-warm run on a cache-cold workload is not reported: %s", stdout)
	}
	var f []map[string]any
	raw, _ := json.Marshal(sums[0].Meta["findings"])
	if json.Unmarshal(raw, &f) != nil || len(f) == 0 {
		t.Errorf("meta lacks the finding: %s", raw)
	}

	// The same seed with the reset: cold again.
	_, sums = bench(filepath.Join(dir, "c.json"), "--seed", "7")
	if h := hit(sums[0]); h > 0.1 {
		t.Errorf("after the reset the same prompts hit the cache at %.1f%%", 100*h)
	}
	if sums[0].Meta["seed"].(float64) != 7 || sums[0].Meta["seed_given"] != true {
		t.Errorf("meta seed %v, seed_given %v; want 7, true", sums[0].Meta["seed"], sums[0].Meta["seed_given"])
	}
}

package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBenchConversationPrefixCacheAcceptance is the "Done when" on
// the real `servetune bench` path: 8 sessions of 5 turns with 1,000-token
// answers against `sim serve` at the same concurrency, once with the
// engine's prefix cache and once with --no-enable-prefix-caching. With
// the cache the engine's hit rate (scraped from its /metrics) is over 50%
// and the median TTFT of turns 3+ is under turn 1's; without it the hit
// rate is 0 and turns 3+, which prefill their whole history, are slower
// than turn 1. The TTFTs compared are the engine's own (each chunk's
// servetune_engine_us in the --requests-out records), so a busy machine's
// scheduling delays, multiplied by the time scale on the client's clock,
// do not decide the comparison; the bench's per-turn table must agree on
// the cache-off ordering, where the gap is large.
func TestBenchConversationPrefixCacheAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("two short real-clock benchmarks")
	}
	const model, sessions, turns = "meta-llama/Llama-3.1-8B-Instruct", 8, 5
	type outcome struct {
		hitRate         float64
		first, later    float64 // engine-clock median TTFT, ms: turn 1, turns 3+
		benchFirst      float64 // the bench's per-turn table, client clock
		benchLater      []float64
		reused, newToks int
	}
	runOnce := func(t *testing.T, extra ...string) outcome {
		base := startSimServe(t, append([]string{model, "--time-scale", "10", "--max-model-len", "16384"}, extra...)...)
		dir := t.TempDir()
		out, reqs := filepath.Join(dir, "r.json"), filepath.Join(dir, "req.jsonl")
		code, _, stderr := runCLI(t, "bench", "--base-url", base, "--model", model,
			"--dataset", "conversation", "--sessions", fmt.Sprint(sessions), "--turns", fmt.Sprint(turns),
			"--input-len", "256", "--output-len", "1000", "--think-time", "uniform:20ms,60ms",
			"--max-concurrency", fmt.Sprint(sessions), "--scrape-metrics", "--scrape-interval", "50ms",
			"--gpus", "none", "--no-progress", "--seed", "5", "--json", out, "--requests-out", reqs)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		sums, err := readSummaries(out)
		if err != nil {
			t.Fatal(err)
		}
		c := sums[0].Conversation
		if c == nil || c.SessionsCompleted != sessions || len(c.Turns) != turns {
			t.Fatalf("conversation %+v", c)
		}
		if c.PrefixCacheHitRate == nil {
			t.Fatal("no prefix-cache hit rate with --scrape-metrics")
		}
		o := outcome{hitRate: *c.PrefixCacheHitRate, benchFirst: c.Turns[0].MedianTTFTMS,
			reused: c.ReusedInputTokens, newToks: c.NewInputTokens}
		for _, tr := range c.Turns[2:] {
			o.benchLater = append(o.benchLater, tr.MedianTTFTMS)
		}
		// Sessions' turns are numbered in order, turns a session.
		var first, later []float64
		for i, r := range readRecords(t, reqs) {
			if !r.EngineClock || len(r.Chunks) == 0 || r.OutputTokens != 1000 {
				t.Fatalf("record %d: engine clock %v, %d chunks, %d output tokens", i, r.EngineClock, len(r.Chunks), r.OutputTokens)
			}
			ms := float64(r.Chunks[0].Engine) / float64(time.Millisecond)
			switch i % turns {
			case 0:
				first = append(first, ms)
			case 1:
			default:
				later = append(later, ms)
			}
		}
		o.first, o.later = medianOf(first), medianOf(later)
		t.Logf("%v: hit rate %.3f; engine median TTFT turn 1 %.1f ms, turns 3+ %.1f ms; bench turn 1 %.1f ms, turns 3+ %v; new %d, reused %d tokens",
			extra, o.hitRate, o.first, o.later, o.benchFirst, o.benchLater, o.newToks, o.reused)
		return o
	}
	on := runOnce(t)
	off := runOnce(t, "--no-enable-prefix-caching")

	if on.hitRate <= 0.5 {
		t.Errorf("caching on: hit rate %.3f, want over 0.5", on.hitRate)
	}
	if on.later >= on.first {
		t.Errorf("caching on: median TTFT of turns 3+ %.1f ms, want under turn 1's %.1f ms", on.later, on.first)
	}
	if off.hitRate != 0 {
		t.Errorf("caching off: hit rate %.3f, want 0", off.hitRate)
	}
	if off.later <= off.first {
		t.Errorf("caching off: median TTFT of turns 3+ %.1f ms, want over turn 1's %.1f ms", off.later, off.first)
	}
	if off.later <= on.later {
		t.Errorf("turns 3+: median TTFT %.1f ms without the cache, %.1f ms with it; want higher without", off.later, on.later)
	}
	// The same conversations either way: the reuse is in the prompts.
	if on.reused != off.reused || on.newToks != off.newToks || on.reused < 4*on.newToks {
		t.Errorf("tokens: on new %d reused %d, off new %d reused %d", on.newToks, on.reused, off.newToks, off.reused)
	}
	// The bench's own table (client clock) shows the cache-off ordering too.
	for k, ms := range off.benchLater {
		if ms <= off.benchFirst {
			t.Errorf("caching off, bench table: turn %d median TTFT %.1f ms, not over turn 1's %.1f ms", k+3, ms, off.benchFirst)
		}
	}
}

// medianOf is the median of xs (0 for none).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

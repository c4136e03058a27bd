package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mooncakeSample is internal/load/trace's sample Mooncake trace: 36
// requests over 26.7 s, whose hash ids repeat (line 4 starts with line 1's
// six blocks).
const mooncakeSample = "../../internal/load/trace/testdata/mooncake.jsonl"

// Replaying the sample's window from 2 s for 20 s at speed 10 against the
// simulated engine (sim serve over loopback: startSimServe, in
// cmd/servetune/diagnose_test.go): every request of the window (lines 3 to 28: 26) is
// sent once, at its trace time from the window's start over 10, asks for
// the trace's lengths, and the repeated hash ids are prefix-cache hits.
func TestBenchTraceReplayAgainstSimServe(t *testing.T) {
	base := startSimServe(t, "llama-3.1-8b", "--max-model-len", "16384", "--enable-prefix-caching", "--time-scale", "10")
	dir := t.TempDir()
	jsonPath, reqPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "requests.jsonl")
	code, stdout, stderr := runCLI(t, "bench", "--base-url", base, "--model", "llama-3.1-8b", "--no-progress", "--gpus", "none",
		"--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake",
		"--trace-speed", "10", "--trace-start", "2s", "--trace-duration", "20s",
		"--scrape-metrics", "--scrape-interval", "100ms", "--seed", "7", "--json", jsonPath, "--requests-out", reqPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "Serving Benchmark Result (trace)") {
		t.Errorf("the level is not named trace:\n%s", stdout)
	}
	var res struct {
		Completed   int            `json:"completed"`
		Failed      int            `json:"failed"`
		TotalInput  int            `json:"total_input_tokens"`
		TotalOutput int            `json:"total_output_tokens"`
		Engine      map[string]any `json:"engine_metrics"`
		Client      map[string]any `json:"client"`
	}
	if err := json.Unmarshal(mustRead(t, jsonPath), &res); err != nil {
		t.Fatal(err)
	}
	// The window's lines by the sample: 26 requests, 69,887 prompt tokens
	// (exact: the prompts' words are one token each in the simulator).
	if res.Completed != 26 || res.Failed != 0 || res.TotalInput != 69887 {
		t.Errorf("completed %d, failed %d, %d prompt tokens; want 26, 0, 69887", res.Completed, res.Failed, res.TotalInput)
	}
	if hit, _ := res.Engine["prefix_cache_hit_rate"].(float64); hit <= 0 {
		t.Errorf("prefix cache hit rate %v: the repeated hash ids should hit", res.Engine["prefix_cache_hit_rate"])
	}
	if _, ok := res.Client["send_lateness_p50_ms"]; !ok {
		t.Errorf("no send lateness in the result: %v", res.Client)
	}

	// The schedule: the trace's timestamps (ms) less the window's start,
	// over the speed.
	var stamps []time.Duration
	f, err := os.Open(mooncakeSample)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Timestamp int64 `json:"timestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if at := time.Duration(l.Timestamp) * time.Millisecond; at >= 2*time.Second && at < 22*time.Second {
			stamps = append(stamps, (at-2*time.Second)/10)
		}
	}
	var recs []struct {
		Index int   `json:"index"`
		Sched int64 `json:"t_sched_ns"`
		Send  int64 `json:"t_send_ns"`
	}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, reqPath))), "\n") {
		var r struct {
			Index int   `json:"index"`
			Sched int64 `json:"t_sched_ns"`
			Send  int64 `json:"t_send_ns"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != len(stamps) {
		t.Fatalf("%d requests sent, the window holds %d", len(recs), len(stamps))
	}
	for i, r := range recs {
		if d := time.Duration(r.Sched) - stamps[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("request %d intended at %v, the trace says %v", i, time.Duration(r.Sched), stamps[i])
		}
		// Loose: this machine is shared; the benchmark measures the
		// lateness itself (make trace-bench).
		if late := time.Duration(r.Send - r.Sched); late < 0 || late > 100*time.Millisecond {
			t.Errorf("request %d sent %v after its time", i, late)
		}
	}
}

// Bad trace flags and bad trace files are one-line usage errors (exit 2)
// naming the flag, or the file and line.
func TestBenchTraceBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unsorted := write("unsorted.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}
{"timestamp": 500, "input_length": 10, "output_length": 5, "hash_ids": [1]}
{"timestamp": 400, "input_length": 10, "output_length": 5, "hash_ids": [2]}
`)
	negative := write("negative.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}
{"timestamp": 5, "input_length": -3, "output_length": 5, "hash_ids": [1]}
`)
	columns := write("columns.csv", "TIMESTAMP,ContextTokens,Tokens\n2023-11-16 18:15:47.6500836,4097,257\n")
	base := []string{"bench", "--base-url", "http://127.0.0.1:1", "--model", "m", "--no-progress", "--gpus", "none"}
	tr := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	for _, tc := range []struct {
		name string
		args []string
		want []string // what the one line must say
	}{
		{"format without trace", tr("--trace-format", "mooncake"), []string{"--trace-format needs --dataset trace"}},
		{"speed without trace", tr("--dataset", "random", "--trace-speed", "2"), []string{"--trace-speed needs --dataset trace"}},
		{"no path", tr("--dataset", "trace", "--trace-format", "mooncake"), []string{"--dataset-path"}},
		{"no format", tr("--dataset", "trace", "--dataset-path", mooncakeSample), []string{"--trace-format"}},
		{"unknown format", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "parquet"), []string{"--trace-format", `"parquet"`}},
		{"missing file", tr("--dataset", "trace", "--dataset-path", filepath.Join(dir, "none.jsonl"), "--trace-format", "mooncake"), []string{"--dataset-path", "none.jsonl"}},
		{"zero speed", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--trace-speed", "0"), []string{"--trace-speed 0"}},
		{"negative speed", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--trace-speed", "-2"), []string{"--trace-speed -2"}},
		{"negative start", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--trace-start", "-1s"), []string{"--trace-start"}},
		{"empty window", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--trace-start", "1h"), []string{"no request"}},
		{"rate with trace", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--request-rate", "5"), []string{"--request-rate"}},
		{"rate sweep with trace", tr("--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--sweep", "rate=1,2"), []string{"--sweep"}},
		{"unsorted times", tr("--dataset", "trace", "--dataset-path", unsorted, "--trace-format", "mooncake"), []string{"unsorted.jsonl:3:", "timestamp goes back"}},
		{"negative length", tr("--dataset", "trace", "--dataset-path", negative, "--trace-format", "mooncake"), []string{"negative.jsonl:2:", "input_length"}},
		{"unknown column", tr("--dataset", "trace", "--dataset-path", columns, "--trace-format", "azure"), []string{"columns.csv:1:", "Tokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr)
			}
			if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 {
				t.Errorf("stderr %q: want one line", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q: want %q", stderr, w)
				}
			}
		})
	}
}

// `sim run` replays the same trace in virtual time: every request, the
// trace's prompt tokens, the shared blocks as prefix-cache hits; whatif
// refuses a trace in one line.
func TestSimRunTrace(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, "sim", "run", "llama-3.1-8b", "--max-model-len", "16384", "--enable-prefix-caching",
		"--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake", "--seed", "1", "--json", jsonPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Completed  int            `json:"completed"`
		TotalInput int            `json:"total_input_tokens"`
		Engine     map[string]any `json:"engine_metrics"`
		Meta       struct {
			Bands []simBand `json:"error_bands"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(mustRead(t, jsonPath), &res); err != nil {
		t.Fatal(err)
	}
	if hit, _ := res.Engine["prefix_cache_hit_rate"].(float64); res.Completed != 36 || res.TotalInput != 92790 || hit <= 0 {
		t.Errorf("completed %d, %d prompt tokens, hit rate %v; want 36, 92790, > 0", res.Completed, res.TotalInput, res.Engine["prefix_cache_hit_rate"])
	}
	// A trace sends each request at its own time: its error band is an
	// open loop's, by the rate it ran at, never the bursts' (offline).
	if res.Meta.Bands[0].Basis == "" || strings.Contains(res.Meta.Bands[0].Basis, "offline") {
		t.Errorf("trace's TTFT band %+v: want an open loop's", res.Meta.Bands[0])
	}
	code, _, stderr = runCLI(t, "whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM", "--slo", "ttft_p99_ms=2000",
		"--dataset", "trace", "--dataset-path", mooncakeSample, "--trace-format", "mooncake")
	if code != exitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "trace is not supported by whatif") {
		t.Errorf("whatif on a trace: exit %d, %q", code, stderr)
	}
}

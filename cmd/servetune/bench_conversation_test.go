package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/store"
)

// TestBenchConversationAgainstSimServe runs 4 sessions of 4 turns with
// 200-token answers against `sim serve` over loopback, through a proxy
// that keeps the request bodies: every turn is answered, each turn's
// prompt is the previous one plus its answer plus the new 64-token
// message (the reused tokens are that history), the chat history carries
// the text the server streamed, and the output has its per-turn table and
// the conversation keys beside vLLM's.
func TestBenchConversationAgainstSimServe(t *testing.T) {
	if testing.Short() {
		t.Skip("a short real-clock benchmark")
	}
	model := "meta-llama/Llama-3.1-8B-Instruct"
	sim, err := url.Parse(startSimServe(t, model, "--time-scale", "10"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies [][]byte
	rp := httputil.NewSingleHostReverseProxy(sim)
	rp.FlushInterval = -1 // stream as the server writes
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "completions") {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	for _, endpoint := range []string{"completions", "chat"} {
		t.Run(endpoint, func(t *testing.T) {
			mu.Lock()
			bodies = nil
			mu.Unlock()
			dir := t.TempDir()
			out, reqs := filepath.Join(dir, "r.json"), filepath.Join(dir, "req.jsonl")
			code, stdout, stderr := runCLI(t, "bench", "--base-url", proxy.URL, "--model", model, "--endpoint-type", endpoint,
				"--dataset", "conversation", "--sessions", "4", "--turns", "4", "--input-len", "64", "--output-len", "200",
				"--think-time", "uniform:50ms,150ms", "--max-concurrency", "4", "--scrape-metrics", "--scrape-interval", "25ms",
				"--gpus", "none", "--no-progress", "--seed", "3", "--json", out, "--requests-out", reqs)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			sums, err := readSummaries(out)
			if err != nil {
				t.Fatal(err)
			}
			c := sums[0].Conversation
			if c == nil {
				t.Fatalf("no conversation in the summary")
			}
			if c.Sessions != 4 || c.SessionsCompleted != 4 || c.SessionsFailed != 0 || c.TurnsNotSent != 0 || len(c.Turns) != 4 {
				t.Fatalf("conversation %+v", c)
			}
			if sums[0].Completed != 16 || sums[0].Failed != 0 {
				t.Errorf("%d completed, %d failed: want 16 turns answered", sums[0].Completed, sums[0].Failed)
			}
			for k, tr := range c.Turns {
				if tr.Turn != k+1 || tr.Completed != 4 || tr.Failed != 0 || tr.MedianTTFTMS <= 0 || tr.P99E2ELMS < tr.MedianE2ELMS {
					t.Errorf("turn %d: %+v", k+1, tr)
				}
				if k > 0 && tr.MeanReusedTokens != c.Turns[k-1].MeanInputTokens+200 {
					t.Errorf("turn %d reuses %.0f tokens, want turn %d's prompt %.0f + its 200-token answer", k+1, tr.MeanReusedTokens, k, c.Turns[k-1].MeanInputTokens)
				}
			}
			if c.NewInputTokens != 16*64 {
				t.Errorf("new input tokens %d, want 16 messages of 64", c.NewInputTokens)
			}
			if c.PrefixCacheHitRate == nil {
				t.Errorf("no prefix-cache hit rate with --scrape-metrics")
			}

			// Turn k's prompt: turn k-1's, its answer and 64 new tokens
			// (sessions' turns are numbered in order, 4 a session).
			recs := readRecords(t, reqs)
			if len(recs) != 16 {
				t.Fatalf("%d records, want 16", len(recs))
			}
			for i, r := range recs {
				if r.Index != i || r.OutputTokens != 200 {
					t.Fatalf("record %d: index %d, %d output tokens", i, r.Index, r.OutputTokens)
				}
				if i%4 == 0 {
					if r.PromptTokens != 64 {
						t.Errorf("session %d turn 1: %d prompt tokens, want 64", i/4, r.PromptTokens)
					}
					continue
				}
				if want := recs[i-1].PromptTokens + 200 + 64; r.PromptTokens != want {
					t.Errorf("session %d turn %d: %d prompt tokens, want %d", i/4, i%4+1, r.PromptTokens, want)
				}
			}

			// The history holds the answer the server streamed: sim serve's
			// text for token j is one of its 16 output words in turn.
			answer := strings.Repeat(" the of and to in is it that for on as with was at by an", 13)
			answer = strings.Join(strings.Fields(answer)[:200], " ")
			mu.Lock()
			sent := bodies
			mu.Unlock()
			found := 0
			for _, b := range sent {
				var body struct {
					Prompt   string `json:"prompt"`
					Messages []struct{ Role, Content string }
				}
				if err := json.Unmarshal(b, &body); err != nil {
					t.Fatal(err)
				}
				if endpoint == "chat" {
					for i, m := range body.Messages {
						if i%2 == 1 && m.Role == "assistant" && strings.TrimSpace(m.Content) == answer {
							found++
						}
					}
				} else if strings.Contains(body.Prompt, answer) {
					found++
				}
			}
			if found < 12 {
				t.Errorf("%d of the 12 later turns carry the streamed answer", found)
			}

			// The text summary's table has a row per turn.
			table := stdout[strings.Index(stdout, "---------- Conversation"):]
			rows := 0
			for _, line := range strings.Split(table, "\n") {
				if f := strings.Fields(line); len(f) == 9 && f[1] == "4" && f[2] == "0" {
					rows++
				}
			}
			if rows != 4 {
				t.Errorf("%d turn rows, want 4:\n%s", rows, table)
			}

			// The result file: the conversation object, vLLM's keys kept.
			raw, _ := os.ReadFile(out)
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(raw, &keys); err != nil {
				t.Fatal(err)
			}
			var conv map[string]json.RawMessage
			if err := json.Unmarshal(keys["conversation"], &conv); err != nil {
				t.Fatalf("conversation: %v", err)
			}
			for _, k := range []string{"sessions_completed", "turns_not_sent", "new_input_tokens", "reused_input_tokens",
				"median_session_latency_ms", "p99_session_latency_ms", "prefix_cache_hit_rate", "turns"} {
				if _, ok := conv[k]; !ok {
					t.Errorf("conversation has no %q", k)
				}
			}
			for _, k := range []string{"median_ttft_ms", "p99_e2el_ms", "completed", "total_input_tokens"} {
				if _, ok := keys[k]; !ok {
					t.Errorf("vLLM key %q missing", k)
				}
			}
		})
	}
}

// readRecords reads a --requests-out file.
func readRecords(t *testing.T, path string) []measure.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []measure.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r measure.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// sharegptConversations is a ShareGPT file of three usable multi-turn
// conversations, written from the published schema.
const sharegptConversations = "../../internal/load/bench/testdata/sharegpt_multiturn.json"

// TestBenchConversationBadInput: conversation flags are one-line usage
// errors (exit 2) naming the flag.
func TestBenchConversationBadInput(t *testing.T) {
	base := []string{"bench", "--base-url", "http://127.0.0.1:1", "--model", "m", "--no-progress", "--gpus", "none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sessions", "4"}, "need --dataset conversation"},
		{[]string{"--think-time", "2s"}, "need --dataset conversation"},
		{[]string{"--dataset", "conversation", "--sessions", "4", "--turns", "0"}, "--turns"},
		{[]string{"--dataset", "conversation", "--sessions", "4"}, "--turns"},
		{[]string{"--dataset", "conversation", "--turns", "3"}, "--sessions 0"},
		{[]string{"--dataset", "conversation", "--sessions", "4", "--turns", "3", "--think-time", "gamma:k=2"}, "--think-time"},
		{[]string{"--dataset", "conversation", "--sessions", "4", "--turns", "3", "--think-time", "-1s"}, "--think-time"},
		{[]string{"--dataset", "conversation", "--sessions", "4", "--turns", "3", "--duration", "10s"}, "--duration"},
		{[]string{"--dataset", "conversation", "--sessions", "2", "--turns", "3", "--dataset-path", sharegptConversations}, "--turns"},
		{[]string{"--dataset", "conversation", "--sessions", "2", "--dataset-path", "no-such.json"}, "--dataset-path"},
		{[]string{"--dataset", "conversation", "--sessions", "9", "--dataset-path", sharegptConversations}, "fewer than the 9 sessions"},
		// 100,000 sessions at once took 1.7 GB before the descriptors ran out.
		{[]string{"--dataset", "conversation", "--sessions", "100000", "--turns", "2"}, "100000 sessions all at once is over 1024: give --max-concurrency or --request-rate"},
		// 1,024 sessions in flight hold about 125 MB of live heap.
		{[]string{"--dataset", "conversation", "--sessions", "4", "--turns", "2", "--max-concurrency", "2000"}, "--max-concurrency 2000 is over 1024 sessions in flight"},
	} {
		code, _, stderr := runCLI(t, append(slices.Clone(base), tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestBenchConversationFailedTurnEndsSession: a proxy in front of `sim
// serve` answers 503 to every third turn (a chat history of five
// messages); each session ends there, its fourth turn is not sent, and
// the summary says so. No session completed, so the run exits 1 naming
// that, and prints no session latency or turn figures of zeros (it
// printed "mean 0.0, median 0.0, p99 0.0" and exited 0).
func TestBenchConversationFailedTurnEndsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("a short real-clock benchmark")
	}
	model := "meta-llama/Llama-3.1-8B-Instruct"
	sim, err := url.Parse(startSimServe(t, model, "--time-scale", "10"))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(sim)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "completions") {
			b, _ := io.ReadAll(r.Body)
			var body struct{ Messages []json.RawMessage }
			if json.Unmarshal(b, &body) == nil && len(body.Messages) == 5 {
				http.Error(w, `{"error": {"message": "overloaded"}}`, http.StatusServiceUnavailable)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "bench", "--base-url", proxy.URL, "--model", model, "--endpoint-type", "chat",
		"--dataset", "conversation", "--sessions", "4", "--turns", "4", "--input-len", "32", "--output-len", "16",
		"--request-rate", "20", "--gpus", "none", "--no-progress", "--json", out)
	if code != exitFailed || !strings.Contains(stderr, "no session completed: 4 of 4 failed at a turn (http_5xx 4") {
		t.Fatalf("exit %d: %s; want 1 naming that no session completed", code, stderr)
	}
	if strings.Contains(stdout, "mean 0.0") || !strings.Contains(stdout, "Session latency: none (no session completed)") {
		t.Errorf("session latency of zeros:\n%s", stdout)
	}
	if !regexp.MustCompile(`(?m)^\s+4\s+0\s+0\s+-\s+-`).MatchString(stdout) {
		t.Errorf("turn 4, never sent, has figures:\n%s", stdout)
	}
	sums, err := readSummaries(out)
	if err != nil {
		t.Fatal(err)
	}
	c := sums[0].Conversation
	if c == nil || c.SessionsFailed != 4 || c.SessionsCompleted != 0 || c.TurnsNotSent != 4 || len(c.Turns) != 4 {
		t.Fatalf("conversation %+v", c)
	}
	if sums[0].Completed != 8 || sums[0].Failed != 4 || sums[0].Errors["http_5xx"] != 4 {
		t.Errorf("%d completed, %d failed (%v): want 8 and 4 http_5xx", sums[0].Completed, sums[0].Failed, sums[0].Errors)
	}
	if tr := c.Turns[2]; tr.Sent != 4 || tr.Failed != 4 || c.Turns[3].Sent != 0 {
		t.Errorf("turns %+v", c.Turns)
	}
	if !strings.Contains(stdout, "4 turns not sent") {
		t.Errorf("the summary does not say which turns were not sent:\n%s", stdout)
	}
}

// TestTuneConversationStoresTurns: a study whose workload is a
// conversation runs it through the trial's bench path on `sim serve`, and
// each load point's stored summary keeps the conversation's figures.
func TestTuneConversationStoresTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("a short study on the simulated engine")
	}
	src := strings.NewReplacer("REQS", "8", "TRIALS", "1",
		"  dataset: {kind: random, input: 128, output: 24}\n",
		"  dataset: {kind: conversation, sessions: 4, turns: 3, think_time: 200ms, input: 64, output: 24}\n",
		"load: {concurrency: [2, 8]}", "load: {concurrency: [2]}",
		"gpu_memory_fraction: [0.1, 0.9]", "gpu_memory_fraction: [0.9]").Replace(tuneSpec)
	bin := buildServetune(t) // the sim launcher starts this binary's sim serve
	db := filepath.Join(t.TempDir(), "s.db")
	out, err := exec.Command(bin, "tune", writeSpec(t, src), "--db", db, "--fresh").CombinedOutput()
	if err != nil {
		t.Fatalf("tune: %v\n%s", err, out)
	}
	ctx := context.Background()
	s, err := store.OpenReadOnly(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.GetStudy(ctx, "clitest")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := s.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, tr := range trials {
		if tr.Status != measure.StatusOK {
			t.Errorf("trial %d: %s %s", tr.Number, tr.Status, tr.FailureMsg)
			continue
		}
		ok++
		c := tr.LoadPoints[0].Summary.Conversation
		if c == nil || c.SessionsCompleted != 4 || len(c.Turns) != 3 || c.Turns[2].MeanReusedTokens != c.Turns[1].MeanInputTokens+24 {
			t.Errorf("trial %d: stored conversation %+v", tr.Number, c)
		}
		if got := tr.LoadPoints[0].Summary.Completed; got != 12 {
			t.Errorf("trial %d: %d turns completed, want 12", tr.Number, got)
		}
	}
	if ok == 0 {
		t.Fatalf("no trial ran: %s", out)
	}
}

// TestBoundHeap: a run that folds its requests runs under the soft memory
// limit and restores the one before it; a run that keeps its samples or
// chunks, or a GOMEMLIMIT of the user's, leaves the limit alone.
func TestBoundHeap(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	restore := boundHeap(bench.Config{})
	if got := debug.SetMemoryLimit(-1); got != foldedHeapLimit {
		t.Errorf("folding run: limit %d, want %d", got, foldedHeapLimit)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after the run: limit %d, want %d restored", got, before)
	}
	for name, cfg := range map[string]bench.Config{
		"--requests-out": {KeepChunks: true},
		"--json":         {Summary: measure.SummaryOptions{KeepSamples: true}},
	} {
		restore := boundHeap(cfg)
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("%s: limit %d, want %d untouched", name, got, before)
		}
		restore()
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	restore = boundHeap(bench.Config{})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("GOMEMLIMIT set: limit %d, want %d untouched", got, before)
	}
	restore()
}

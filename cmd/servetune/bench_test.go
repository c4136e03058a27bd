package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// streamServer streams n tokens per request, one per chunk, every gap, with
// usage; status != 200 makes it fail instead. It records Authorization.
type streamServer struct {
	gap    time.Duration
	status int
	hang   bool // accept the request, then never answer
	mu     sync.Mutex
	auth   []string
	// sampling is each request's temperature, top_p and top_k as sent
	// (absent: "-").
	sampling []string
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if r.URL.Path == "/tokenize" {
		http.NotFound(w, r)
		return
	}
	var q struct {
		MaxTokens   int             `json:"max_tokens"`
		Temperature json.RawMessage `json:"temperature"`
		TopP        json.RawMessage `json:"top_p"`
		TopK        json.RawMessage `json:"top_k"`
	}
	_ = json.NewDecoder(r.Body).Decode(&q)
	raw := func(m json.RawMessage) string {
		if m == nil {
			return "-"
		}
		return string(m)
	}
	if q.MaxTokens > 0 { // a completion, not a cache reset
		s.mu.Lock()
		s.sampling = append(s.sampling, raw(q.Temperature)+" "+raw(q.TopP)+" "+raw(q.TopK))
		s.mu.Unlock()
	}
	if s.status != 0 {
		http.Error(w, "nope", s.status)
		return
	}
	if s.hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := 1; i <= q.MaxTokens && r.Context().Err() == nil; i++ {
		time.Sleep(s.gap) // the token gap is what the server serves: timing, not synchronisation
		fin := "null"
		if i == q.MaxTokens {
			fin = `"length"`
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\" w\",\"finish_reason\":%s}]}\n\n", fin)
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", q.MaxTokens)
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBenchBadFlags(t *testing.T) {
	srv := httptest.NewServer(&streamServer{})
	defer srv.Close()
	base := []string{"bench", "--base-url", srv.URL, "--model", "m", "--no-progress"}
	tests := []struct {
		name string
		args []string
		want string // the flag the message must name
	}{
		{"no base url", []string{"bench", "--model", "m"}, "--base-url"},
		{"no model", []string{"bench", "--base-url", srv.URL}, "--model"},
		{"bad url", []string{"bench", "--base-url", "localhost:1", "--model", "m"}, "--base-url"},
		{"bad endpoint", append(base, "--endpoint-type", "embed"), "--endpoint-type"},
		{"bad rate", append(base, "--request-rate", "fast"), "--request-rate"},
		{"negative rate", append(base, "--request-rate", "-2"), "--request-rate"},
		{"bad burstiness", append(base, "--burstiness", "0"), "--burstiness"},
		{"bad concurrency", append(base, "--max-concurrency", "-1"), "--max-concurrency"},
		{"zero requests", append(base, "--num-requests", "0"), "--num-requests"},
		{"bad dataset", append(base, "--dataset", "imagenet"), "--dataset"},
		{"sharegpt without path", append(base, "--dataset", "sharegpt"), "--dataset-path"},
		{"missing file", append(base, "--dataset", "jsonl", "--dataset-path", "/nonexistent.jsonl"), "--dataset-path"},
		{"bad input dist", append(base, "--input-dist", "lognormal:median=x"), "--input-dist"},
		{"bad output dist", append(base, "--output-dist", "zipf:1"), "--output-dist"},
		{"bad range ratio", append(base, "--range-ratio", "1.5"), "--range-ratio"},
		{"bad goodput", append(base, "--goodput", "ttft=abc"), "--goodput"},
		{"unknown goodput metric", append(base, "--goodput", "itl:5"), "--goodput"},
		{"bad sweep", append(base, "--sweep", "batch=1,2"), "--sweep"},
		{"bad sweep value", append(base, "--sweep", "concurrency=1,x"), "--sweep"},
		{"bad header", append(base, "--header", "NoColon"), "--header"},
		{"bad temperature", append(base, "--temperature", "3"), "--temperature"},
		{"bad top-p", append(base, "--top-p", "0"), "--top-p"},
		{"bad top-k", append(base, "--top-k", "0"), "--top-k"},
		{"empty api key env", append(base, "--api-key-env", "SERVETUNE_TEST_UNSET_KEY"), "--api-key-env"},
		{"bad timeout", append(base, "--timeout", "0s"), "--timeout"},
		{"unknown flag", append(base, "--frobnicate"), "frobnicate"},
		{"not a number", append(base, "--num-requests", "many"), "num-requests"},
		{"duration without rate or cap", append(base, "--duration", "1s"), "duration"},
		{"compare one arg", []string{"bench", "compare", "a.json"}, "compare"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr)
			}
			if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q: want one line naming %s", stderr, tc.want)
			}
		})
	}
}

func TestBenchRunAndCompare(t *testing.T) {
	ss := &streamServer{gap: time.Millisecond}
	srv := httptest.NewServer(ss)
	defer srv.Close()
	dir := t.TempDir()
	const key = "sk-test-SECRET-123"
	t.Setenv("SERVETUNE_TEST_KEY", key)
	files := func(name string) (string, string, string) {
		return filepath.Join(dir, name+".json"), filepath.Join(dir, name+".csv"), filepath.Join(dir, name+".jsonl")
	}
	for _, name := range []string{"base", "new"} {
		j, c, r := files(name)
		code, stdout, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--input-len", "16", "--output-len", "8",
			"--num-requests", "20", "--max-concurrency", "4", "--warmup", "4", "--seed", "7", "--api-key-env", "SERVETUNE_TEST_KEY",
			"--header", "X-Team: bench", "--goodput", "ttft:1000,tpot:100", "--json", j, "--csv", c, "--requests-out", r)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "Successful requests:") || !strings.Contains(stdout, "TTFT") {
			t.Errorf("stdout lacks the summary table:\n%s", stdout)
		}
		if !strings.Contains(stderr, "bench 1/1 [") {
			t.Errorf("stderr lacks the progress bar: %q", stderr)
		}
		for _, p := range []string{j, c, r} {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte(key)) || strings.Contains(stdout+stderr, key) {
				t.Fatalf("%s leaks the API key", p)
			}
		}
		raw, _ := os.ReadFile(j)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"duration", "completed", "failed", "errors", "total_input_tokens", "total_output_tokens",
			"request_throughput", "output_throughput", "total_token_throughput", "request_goodput", "median_ttft_ms",
			"p99_tpot_ms", "mean_itl_ms", "p99.9_e2el_ms", "std_ttft_ms", "median_ttft_ms_ci", "meta", "samples",
			"date", "backend", "model_id", "tokenizer_id", "num_prompts", "burstiness", "max_concurrent_requests", "input_lens", "output_lens", "ttfts", "itls", "generated_texts", "error_counts"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no key %q", j, k)
			}
		}
		if m["completed"].(float64) != 20 || m["total_output_tokens"].(float64) != 160 {
			t.Errorf("completed %v, output tokens %v; want 20, 160", m["completed"], m["total_output_tokens"])
		}
		lines := strings.Count(string(mustRead(t, r)), "\n")
		if lines != 24 {
			t.Errorf("--requests-out has %d lines, want 24 (20 + 4 warm-up)", lines)
		}
	}
	for _, a := range ss.auth {
		if a != "Bearer "+key {
			t.Fatalf("Authorization %q, want the Bearer key", a)
		}
	}
	bj, _, _ := files("base")
	nj, _, _ := files("new")
	code, stdout, stderr := runCLI(t, "bench", "compare", bj, nj)
	if code != exitOK {
		t.Fatalf("compare exit %d: %s", code, stderr)
	}
	for _, want := range []string{"median ttft", "p99 e2el", "95% CI", "significant"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBenchFailedRunWritesResult: a failing or hung server ends the run in
// bounded time with exit 1 and a result file counting the failures.
func TestBenchFailedRunWritesResult(t *testing.T) {
	tests := []struct {
		name  string
		srv   *streamServer
		class string
	}{
		{"5xx", &streamServer{status: http.StatusServiceUnavailable}, "http_5xx"},
		{"hung", &streamServer{hang: true}, "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.srv)
			defer srv.Close()
			j := filepath.Join(t.TempDir(), "r.json")
			begin := time.Now()
			code, _, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--num-requests", "3",
				"--timeout", "200ms", "--no-progress", "--json", j)
			if code != exitFailed {
				t.Fatalf("exit %d, want %d (%s)", code, exitFailed, stderr)
			}
			if el := time.Since(begin); el > 5*time.Second {
				t.Errorf("run took %v", el)
			}
			var m struct {
				Errors map[string]int `json:"error_counts"`
			}
			if err := json.Unmarshal(mustRead(t, j), &m); err != nil {
				t.Fatal(err)
			}
			if m.Errors[tc.class] != 3 || len(m.Errors) != len(measure.ErrorClasses) {
				t.Errorf("errors %v, want %s 3 and every class present", m.Errors, tc.class)
			}
		})
	}
}

func TestBenchSweep(t *testing.T) {
	srv := httptest.NewServer(&streamServer{})
	defer srv.Close()
	dir := t.TempDir()
	j, c := filepath.Join(dir, "s.json"), filepath.Join(dir, "s.csv")
	code, stdout, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--input-len", "8", "--output-len", "4",
		"--num-requests", "6", "--sweep", "concurrency=1,3", "--no-progress", "--json", j, "--csv", c)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(stdout, "Serving Benchmark Result") != 2 {
		t.Errorf("want two summaries:\n%s", stdout)
	}
	var sums []map[string]any
	if err := json.Unmarshal(mustRead(t, j), &sums); err != nil || len(sums) != 2 {
		t.Fatalf("sweep JSON: %d summaries, %v", len(sums), err)
	}
	if sums[1]["max_concurrency"].(float64) != 3 {
		t.Errorf("level 2 max_concurrency %v", sums[1]["max_concurrency"])
	}
	if n := strings.Count(string(mustRead(t, c)), "\n"); n != 3 {
		t.Errorf("CSV has %d lines, want header + 2", n)
	}
	code, _, stderr = runCLI(t, "bench", "compare", j, j)
	if code != exitOK {
		t.Errorf("compare of a sweep with itself: exit %d %s", code, stderr)
	}
}

// Each request asks for the sampling --temperature, --top-p and --top-k
// give (vLLM's benchmark flags); without them, greedy and no top_p or
// top_k, so the engine's (or the model's generation config's) apply.
func TestBenchSampling(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "0 - -"},
		{[]string{"--temperature", "0.7", "--top-p", "0.9", "--top-k", "50"}, "0.7 0.9 50"},
	} {
		ss := &streamServer{}
		srv := httptest.NewServer(ss)
		args := append([]string{"bench", "--base-url", srv.URL, "--model", "m", "--input-len", "16", "--output-len", "4",
			"--num-requests", "6", "--warmup", "0", "--no-progress"}, tc.args...)
		code, _, stderr := runCLI(t, args...)
		srv.Close()
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		ss.mu.Lock()
		got := ss.sampling
		ss.mu.Unlock()
		if len(got) < 6 {
			t.Fatalf("%v: %d requests seen", tc.args, len(got))
		}
		for _, g := range got {
			if g != tc.want {
				t.Errorf("%v: a request sent temperature, top_p, top_k %q, want %q", tc.args, g, tc.want)
				break
			}
		}
	}
}

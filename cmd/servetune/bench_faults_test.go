package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deadPort returns a loopback address nobody listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestBenchDeadServer: a duration-bound run against a port that refuses
// every connection stops after a short streak instead of spinning for the
// whole duration, says why, exits 1, and stays small in memory and on disk.
func TestBenchDeadServer(t *testing.T) {
	bin := buildServetune(t)
	out := filepath.Join(t.TempDir(), "reqs.jsonl")
	start := time.Now()
	cmd := exec.Command(bin, "bench", "--base-url", deadPort(t), "--model", "m", "--duration", "10s",
		"--max-concurrency", "4", "--no-progress", "--requests-out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(stderr.String(), "stopped early: the server refused 32 connections in a row") {
		t.Fatalf("exit %v, stderr %q", err, stderr.String())
	}
	if took > 5*time.Second {
		t.Errorf("took %v against a dead server (duration 10s)", took)
	}
	st, err := os.Stat(out)
	if err != nil || st.Size() > 5<<20 {
		t.Errorf("--requests-out: %v, %d bytes; want under 5 MB", err, st.Size())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss*1024 > 150<<20 {
		t.Errorf("peak RSS %d MB, want under 150 MB", ru.Maxrss/1024)
	}
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// TestBenchOutOfFiles: more requests in flight than this process may open
// sockets stops the run with a line saying so (exit 1), not a run of
// "too many open files" failures reported as a success.
func TestBenchOutOfFiles(t *testing.T) {
	bin := buildServetune(t)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	for _, workload := range [][]string{{"--num-requests", "400"},
		// A conversation's sessions stop there too (they went on failing,
		// each starting its own).
		{"--dataset", "conversation", "--sessions", "400", "--turns", "2"}} {
		args := append([]string{"bench", "--base-url", srv.URL, "--model", "m", "--no-progress", "--no-tokenize", "--timeout", "20s"}, workload...)
		cmd := exec.Command("sh", append([]string{"-c", `ulimit -n 128 && exec "$0" "$@"`, bin}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		var ee *exec.ExitError
		if !asExit(err, &ee) || ee.ExitCode() != exitFailed || !strings.Contains(stderr.String(), "ran out of file descriptors") {
			t.Fatalf("%v: exit %v after %v, stderr %q", workload, err, time.Since(start), stderr.String())
		}
		// Stopped at once: the requests in flight are cancelled, not
		// waited for until their 20 s timeout.
		if took := time.Since(start); took > 15*time.Second {
			t.Errorf("%v: stopped after %v", workload, took)
		}
	}
}

// TestBenchServerWords: what the server said is in the summary, the
// result file and the exit line, not only in --requests-out; answers that
// are no event stream say what they are.
func TestBenchServerWords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"404", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"object":"error","message":"The model `+"`m`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
		}, "http_4xx 3 (HTTP 404: The model `m` does not exist.)"},
		{"html", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<!DOCTYPE html><html><body>Sign in</body></html>")
		}, "stream_error 3 (HTTP 200 with an HTML page, not an event stream"},
		{"json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"text_completion","choices":[{"text":"hi"}]}`)
		}, "stream_error 3 (HTTP 200 with one JSON document, not an event stream"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://example.invalid/v1/completions", http.StatusMovedPermanently)
		}, "redirect 3 (HTTP 301: redirected to https://example.invalid/v1/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/completions" {
					http.NotFound(w, r)
					return
				}
				tc.handler(w, r)
			}))
			defer srv.Close()
			j := filepath.Join(t.TempDir(), "r.json")
			code, stdout, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--num-requests", "3", "--no-progress", "--json", j)
			if code != exitFailed || !strings.Contains(stderr, "no request completed: "+tc.want) {
				t.Errorf("exit %d, stderr %q; want %q", code, stderr, tc.want)
			}
			if strings.Contains(stdout, "TTFT") {
				t.Errorf("latency tables printed for a run with no success:\n%s", stdout)
			}
			var m struct {
				Messages map[string]string `json:"error_messages"`
			}
			if err := json.Unmarshal(mustRead(t, j), &m); err != nil || len(m.Messages) != 1 {
				t.Errorf("error_messages in the result file: %v %v", m.Messages, err)
			}
		})
	}
}

// TestBenchRefusesWhatCannotFit: lengths past any model's context, or past
// the server's max_model_len, are refused before a prompt is built.
func TestBenchRefusesWhatCannotFit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":32768}]}`)
			return
		}
		t.Errorf("request to %s", r.URL.Path)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-len", "100000000"}, "over 10000000 tokens"},
		{[]string{"--input-len", "40000"}, "1000 of 1000 requests do not fit the server's max_model_len 32768 (the longest: 40000 prompt + 128 output tokens)"},
		{[]string{"--json", "same.out", "--csv", "same.out"}, "--json and --csv name the same file"},
		{[]string{"--num-requests", "2000000000"}, "at most 200000 requests"},
		{[]string{"--warmup", "2000000000"}, "at most 200000 requests"},
		{[]string{"--sweep", "concurrency=" + strings.Repeat("1,", 600) + "1"}, "601 levels: at most 600"},
		{[]string{"--base-url", "http://127.0.0.1:99999"}, "port 99999 is not in 1-65535"},
	} {
		start := time.Now()
		code, _, stderr := runCLI(t, append([]string{"bench", "--base-url", srv.URL, "--model", "m", "--no-progress"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", tc.args, code, stderr, tc.want)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%v: refused after %v", tc.args, took)
		}
	}
	if _, err := os.Stat("same.out"); err == nil {
		os.Remove("same.out")
		t.Error("same.out was created")
	}
}

// TestBenchInterrupted: requests stopped by Ctrl-C are cancelled, not
// timeouts, and the exit line says what happened.
func TestBenchInterrupted(t *testing.T) {
	srv := httptest.NewServer(&streamServer{gap: 50 * time.Millisecond})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(800*time.Millisecond, cancel)
	j := filepath.Join(t.TempDir(), "r.json")
	var out, errb bytes.Buffer
	code := run(ctx, []string{"bench", "--base-url", srv.URL, "--model", "m", "--num-requests", "40", "--max-concurrency", "4",
		"--no-progress", "--json", j}, &out, &errb)
	if code != exitFailed || !strings.Contains(errb.String(), "interrupted:") || !strings.Contains(errb.String(), "cancelled in flight") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	var m struct {
		Errors map[string]int `json:"error_counts"`
	}
	if err := json.Unmarshal(mustRead(t, j), &m); err != nil {
		t.Fatal(err)
	}
	if m.Errors["timeout"] != 0 || m.Errors["cancelled"] == 0 {
		t.Errorf("errors %v: want cancelled requests, no timeouts", m.Errors)
	}
}

// TestBenchShowsWaiting: against a server that accepts and never answers,
// the progress line shows the requests in flight and their age.
func TestBenchShowsWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 6 s")
	}
	srv := httptest.NewServer(&streamServer{hang: true})
	defer srv.Close()
	code, _, stderr := runCLI(t, "bench", "--base-url", srv.URL, "--model", "m", "--num-requests", "2", "--timeout", "6500ms", "--no-tokenize")
	// The line names the waiting requests once the oldest has waited 5 s;
	// on a loaded machine the once-a-second tick that shows it may come
	// at 6 s, so the age is not pinned.
	if code != exitFailed || !strings.Contains(stderr, "2 in flight, oldest ") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// FuzzParseGoodput: the --goodput flag parses into positive finite limits
// or fails with an error.
func FuzzParseGoodput(f *testing.F) {
	for _, s := range []string{"ttft:500,tpot:50", "e2el=1000", "ttft:", "TTFT : 1e3 , tpot:NaN", "ttft:-1", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := parseGoodput(s)
		if err != nil {
			return
		}
		for _, v := range []float64{slo.TTFTms, slo.TPOTms, slo.E2ELms} {
			if v < 0 || v != v || v > 1e308 {
				t.Fatalf("parseGoodput(%q) = %+v", s, slo)
			}
		}
	})
}

// TestSimRunLongDuration: a duration-bound level stops at the request cap
// instead of filling memory (100,000 hours at 1 req/s took 9 GB and was
// still going).
func TestSimRunLongDuration(t *testing.T) {
	j := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, "sim", "run", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--duration", "100000h",
		"--request-rate", "1", "--input-len", "64", "--output-len", "8", "--json", j, "--bootstrap", "10")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var m struct {
		Completed int `json:"completed"`
	}
	if err := json.Unmarshal(mustRead(t, j), &m); err != nil || m.Completed != 200_000 {
		t.Errorf("completed %d (%v), want the cap 200000", m.Completed, err)
	}
}

package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWhatifConversation asks whatif about a conversation: the search
// raises the sessions' arrival rate on the virtual clock, each session
// sending its turns closed loop, and the ranked rows give the capacity in
// sessions/s beside the requests/s the turns make.
func TestWhatifConversation(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "L40S", "--max-gpus", "1",
		"--dataset", "conversation", "--sessions", "8", "--turns", "3", "--think-time", "1s", "--input-len", "256", "--output-len", "64",
		"--slo", "ttft_p99_ms=1000,tpot_p99_ms=60", "--target-rps", "5", "--trials", "2", "--no-progress"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	text := stdout.String()
	for _, want := range []string{"conversation: 8 sessions of 3 turns", "think 1s", "session arrival rate (sess/s)", "sess/s", "req/s", "serve commands"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// The ranked row: its sessions/s and requests/s, three turns a
	// session.
	row := regexp.MustCompile(`(?m)^\s*1\s+L40S\s+1\s+vllm\s+(\S+)\s+(\S+)\s`).FindStringSubmatch(text)
	if row == nil {
		t.Fatalf("no ranked row:\n%s", text)
	}
	sess, err1 := strconv.ParseFloat(row[1], 64)
	rps, err2 := strconv.ParseFloat(row[2], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("row %q: %v %v", row[0], err1, err2)
	}
	if !(sess > 0) || rps < 2.9*sess || rps > 3.1*sess {
		t.Errorf("row %q: %g sessions/s, %g req/s; want three requests a session", row[0], sess, rps)
	}
}

// TestWhatifConversationBadInput: a conversation's bad or unbounded
// flags are one line on stderr, exit 2, naming the flag or the limit.
func TestWhatifConversationBadInput(t *testing.T) {
	base := []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM", "--slo", "ttft_p99_ms=1000", "--trials", "1", "--dataset", "conversation"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero turns", []string{"--sessions", "4", "--turns", "0"}, "--turns"},
		{"no sessions", []string{"--turns", "3"}, "--sessions 0"},
		{"bad think time", []string{"--sessions", "4", "--turns", "3", "--think-time", "gamma:k=2"}, "--think-time"},
		{"too many turns", []string{"--sessions", "2000", "--turns", "8"}, "over 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(slices.Clone(base), tc.args...), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("code %d, stderr %q (want exit 2, one line with %q)", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestSimRunConversation: sim run runs a conversation on the virtual
// clock and prints its per-turn table.
func TestSimRunConversation(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sim", "run", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM",
		"--dataset", "conversation", "--sessions", "4", "--turns", "3", "--think-time", "1s", "--input-len", "128", "--output-len", "32",
		"--max-concurrency", "4"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if text := stdout.String(); !strings.Contains(text, "Sessions: 4 completed, 0 failed of 4") || !strings.Contains(text, "Engine prefix-cache hit rate") {
		t.Errorf("no conversation figures:\n%s", text)
	}
}

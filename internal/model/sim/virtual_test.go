package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

func fixedReqs(n, in, out int) []measure.Request {
	reqs := make([]measure.Request, n)
	for i := range reqs {
		reqs[i] = measure.Request{Index: i, PromptTokens: in, MaxTokens: out, PrefixID: -1}
	}
	return reqs
}

func TestRunVirtualBasics(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	reqs := fixedReqs(50, 512, 64)
	sched := make([]time.Duration, len(reqs))
	recs, err := RunVirtualSchedule(cfg, reqs, sched, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Error != "" || r.OutputTokens != 64 || len(r.Chunks) != 64 || r.PromptTokens != 512 {
			t.Fatalf("record %d: %+v", i, r)
		}
		if !(r.Send <= r.First && r.First <= r.Last && r.Last <= r.End) {
			t.Fatalf("record %d: times out of order: %+v", i, r)
		}
		if i >= 8 && r.Send == 0 {
			t.Fatalf("record %d sent at 0 despite the concurrency cap", i)
		}
	}
	// TTFT of the first request: one prefill step of 512 tokens.
	ttft := recs[0].First - recs[0].Send
	if ttft < 5*time.Millisecond || ttft > 50*time.Millisecond {
		t.Errorf("TTFT %v for 512 tokens on H100", ttft)
	}
	tpot := (recs[0].Last - recs[0].First) / 63
	if tpot < 4*time.Millisecond || tpot > 15*time.Millisecond {
		t.Errorf("TPOT %v for 8B at batch 8", tpot)
	}
	t.Logf("TTFT %v TPOT %v", ttft, tpot)

	// Too long for max_model_len: 400.
	recs, err = RunVirtualSchedule(cfg, fixedReqs(1, 4000, 200), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Error != measure.ErrHTTP4xx || recs[0].Status != 400 {
		t.Errorf("over-long request: %+v", recs[0])
	}
}

func TestRunVirtualDeterministic(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	reqs := fixedReqs(200, 300, 50)
	sched := make([]time.Duration, len(reqs))
	for i := range sched {
		sched[i] = time.Duration(i) * 7 * time.Millisecond
	}
	a, _ := RunVirtualSchedule(cfg, reqs, sched, 0)
	b, _ := RunVirtualSchedule(cfg, reqs, sched, 0)
	for i := range a {
		if a[i].First != b[i].First || a[i].Last != b[i].Last {
			t.Fatalf("record %d differs between identical runs", i)
		}
	}
}

// TestRunVirtualNoMaxTokensTooLong: without max_tokens the output may use
// what the context leaves; a prompt that leaves nothing is the engine's 400,
// as sim serve answers it, never a request run past max_model_len.
func TestRunVirtualNoMaxTokensTooLong(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	for _, prompt := range []int{4096, 5000} {
		recs, err := RunVirtualSchedule(cfg, fixedReqs(1, prompt, 0), []time.Duration{0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if recs[0].Error != measure.ErrHTTP4xx || recs[0].Status != 400 || recs[0].OutputTokens != 0 {
			t.Errorf("prompt %d without max_tokens: %+v", prompt, recs[0])
		}
	}
	// Room left: the output fills the context.
	recs, err := RunVirtualSchedule(cfg, fixedReqs(1, 4000, 0), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Error != "" || recs[0].OutputTokens != 96 {
		t.Errorf("prompt 4000 without max_tokens: %d tokens, error %q", recs[0].OutputTokens, recs[0].Error)
	}
}

// TestRunVirtualNegativeMaxTokens: only 0 leaves max_tokens unset (the
// HTTP client omits it); a negative one is the 400 sim serve answers
// max_tokens -1 with, on the virtual clock as over HTTP, not a request
// filled to the context's end.
func TestRunVirtualNegativeMaxTokens(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	recs, err := RunVirtualSchedule(cfg, fixedReqs(1, 100, -1), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.Error != measure.ErrHTTP4xx || r.Status != 400 || r.OutputTokens != 0 || r.ErrorMsg != "max_tokens must be at least 1, got -1." {
		t.Errorf("max_tokens -1: %d tokens, status %d, error %q: %q", r.OutputTokens, r.Status, r.Error, r.ErrorMsg)
	}
	d := Deployment{PrefillReplicas: 1, DecodeReplicas: 1, Link: "roce", Prefill: cfg, Decode: cfg}
	recs, err = RunDeploymentSchedule(d, fixedReqs(1, 100, -1), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.Status != 400 || r.OutputTokens != 0 {
		t.Errorf("disaggregated, max_tokens -1: %d tokens, status %d: %q", r.OutputTokens, r.Status, r.ErrorMsg)
	}
}

// TestVirtualCancelStopsAtOnce: a phase whose context ends fails its
// unfinished requests as cancelled instead of running them to their end in
// virtual time (a deep queue took seconds to drain after a signal).
func TestVirtualCancelStopsAtOnce(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	v, err := NewVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reqs := fixedReqs(2000, 512, 256)
	recs, _ := v.Send(ctx, measure.Phase{Count: len(reqs),
		Next: func() time.Duration { return 0 },
		Request: func(i int) measure.Request {
			if i == 1000 {
				cancel() // a signal with 1,000 requests queued
			}
			return reqs[i]
		}})
	done, cancelled := 0, 0
	for _, r := range recs {
		switch r.Error {
		case measure.ErrNone:
			done++
		case measure.ErrCancelled:
			cancelled++
		default:
			t.Fatalf("record %d: %s %s", r.Index, r.Error, r.ErrorMsg)
		}
	}
	if len(recs) > 1001 || cancelled < 900 {
		t.Errorf("%d requests sent, %d finished, %d cancelled: want the queue failed as cancelled", len(recs), done, cancelled)
	}
}

// TestRunVirtualStreamInterval: with stream_interval k the first token
// goes out at once and the rest k at a time, the last message with what
// is left; the tokens' times are the engine's, so TTFT and the end do not
// move.
func TestRunVirtualStreamInterval(t *testing.T) {
	each := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	grouped := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096", "--stream-interval", "10")
	if grouped.StreamInterval != 10 {
		t.Fatalf("stream_interval %d, want 10", grouped.StreamInterval)
	}
	a, err := RunVirtualSchedule(each, fixedReqs(1, 512, 25), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunVirtualSchedule(grouped, fixedReqs(1, 512, 25), []time.Duration{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var tokens []int
	for _, c := range b[0].Chunks {
		tokens = append(tokens, c.Tokens)
	}
	if len(tokens) != 4 || tokens[0] != 1 || tokens[1] != 10 || tokens[2] != 10 || tokens[3] != 4 {
		t.Errorf("chunk tokens %v, want [1 10 10 4]", tokens)
	}
	if b[0].OutputTokens != 25 || b[0].First != a[0].First || b[0].End != a[0].End {
		t.Errorf("grouped %+v against every step's %+v", b[0], a[0])
	}
}

// TestRunVirtualSGLangLengthChecks: SGLang's request-length rules
// (admitLength; TokenizerManager._validate_one_request and the
// scheduler's max_new_tokens cap, sources there): a prompt of the whole
// context and a prompt + max_tokens over it are 400s with SGLang's
// wording; what passes is clipped to context_length - 2 - prompt tokens.
func TestRunVirtualSGLangLengthChecks(t *testing.T) {
	cfg := mustParse(t, "--model-path", "llama-3.1-8b", "--context-length", "4096")
	tests := []struct {
		prompt, maxTokens int
		status, out       int
		msg               string
	}{
		{4096, 0, 400, 0, "The input (4096 tokens) is longer than the model's context length (4096 tokens)."},
		{4000, 97, 400, 0, "Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a total of 4097 tokens"},
		{4000, 96, 200, 94, ""}, // the sum fits (> rejects, not >=) and is capped
		{4000, 0, 200, 94, ""},  // unset: context_length - 2 - prompt
		{4000, 50, 200, 50, ""},
	}
	for _, tt := range tests {
		recs, err := RunVirtualSchedule(cfg, fixedReqs(1, tt.prompt, tt.maxTokens), []time.Duration{0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		if r.Status != tt.status || r.OutputTokens != tt.out || !strings.HasPrefix(r.ErrorMsg, tt.msg) {
			t.Errorf("prompt %d max_tokens %d: status %d, %d tokens, %q; want %d, %d, %q",
				tt.prompt, tt.maxTokens, r.Status, r.OutputTokens, r.ErrorMsg, tt.status, tt.out, tt.msg)
		}
	}
}

// boundedPhase is a phase of n requests of in and out tokens, one every
// gap, under bounds.
func boundedPhase(n, in, out int, gap time.Duration, bounds []measure.Bound) measure.Phase {
	k := 0
	return measure.Phase{Count: n, Bounds: bounds,
		Next: func() time.Duration { k++; return time.Duration(k-1) * gap },
		Request: func(i int) measure.Request {
			return measure.Request{Index: i, PromptTokens: in, MaxTokens: out, PrefixID: -1}
		}}
}

// TestVirtualGivesUp: a phase past its bounds ends once they are missed,
// its unanswered requests cancelled, and the phase after it runs as it
// would after the whole phase (to the nanosecond: its clock starts
// elsewhere), its preemptions and evictions included; a phase with
// shared prefixes goes to its end.
func TestVirtualGivesUp(t *testing.T) {
	// A KV cache of about 50,000 tokens: both phases preempt, and the
	// second evicts the pages the first left cached.
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096", "--max-num-seqs", "64", "--gpu-memory-utilization", "0.28")
	ttft := []measure.Bound{{Series: "ttft", P: 99, Max: 500}}
	run := func(bounds []measure.Bound, prefix bool) (a, b []measure.Record, preempted int64) {
		v, err := NewVirtual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		over := boundedPhase(600, 2000, 200, 2*time.Millisecond, bounds)
		if prefix {
			req := over.Request
			over.Request = func(i int) measure.Request {
				q := req(i)
				q.PrefixID, q.PrefixTokens = i%4, 512
				return q
			}
		}
		a, _ = v.Send(context.Background(), over)
		before := v.cores[0].preemptions
		b, _ = v.Send(context.Background(), boundedPhase(300, 2000, 200, 30*time.Millisecond, nil))
		return a, b, v.cores[0].preemptions - before
	}
	fullA, fullB, preempted := run(nil, false)
	cutA, cutB, _ := run(ttft, false)
	if s := measure.Summarize(fullA, measure.SummaryOptions{}); s.Failed > 0 || !(s.TTFT.P99 > 500) {
		t.Fatalf("the overloaded phase: %d failed, TTFT p99 %.0f ms, want none and past 500", s.Failed, s.TTFT.P99)
	}
	cancelled := 0
	for _, r := range cutA {
		if r.Error == measure.ErrCancelled {
			cancelled++
		}
	}
	if s := measure.Summarize(cutA, measure.SummaryOptions{}); cancelled == 0 || s.Failed != cancelled || s.Completed == 0 {
		t.Fatalf("given up: %d records, %d cancelled, %d failed, %d answered", len(cutA), cancelled, s.Failed, s.Completed)
	}
	if preempted == 0 {
		t.Fatal("the phase after preempts nothing: the test misses what it is for")
	}
	near := func(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }
	if len(cutB) != len(fullB) {
		t.Fatalf("the phase after: %d records, want %d", len(cutB), len(fullB))
	}
	for i := range fullB {
		f, c := fullB[i], cutB[i]
		if c.Error != f.Error || c.OutputTokens != f.OutputTokens || len(c.Chunks) != len(f.Chunks) ||
			!near(c.Send, f.Send) || !near(c.First, f.First) || !near(c.Last, f.Last) || !near(c.End, f.End) {
			t.Fatalf("record %d of the phase after differs: %+v, after the whole phase %+v", i, c, f)
		}
	}
	prefA, _, _ := run(ttft, true)
	for _, r := range prefA {
		if r.Error != measure.ErrNone {
			t.Fatalf("a phase with shared prefixes gave up: %+v", r)
		}
	}
}

// TestVirtualLatenciesOnly: a phase read for its latencies alone times
// every request as a whole one does, and keeps no chunk and no engine
// metrics.
func TestVirtualLatenciesOnly(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	run := func(only bool) ([]measure.Record, *measure.EngineMetrics) {
		v, err := NewVirtual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := boundedPhase(200, 1000, 100, 20*time.Millisecond, nil)
		p.LatenciesOnly = only
		recs, _ := v.Send(context.Background(), p)
		return recs, v.EngineMetrics()
	}
	whole, eng := run(false)
	lean, none := run(true)
	if eng == nil || none != nil {
		t.Fatalf("engine metrics %v whole, %v lean", eng != nil, none != nil)
	}
	for i, w := range whole {
		l := lean[i]
		if len(l.Chunks) != 0 || l.First != w.First || l.Last != w.Last || l.End != w.End || l.OutputTokens != w.OutputTokens || l.Error != w.Error {
			t.Fatalf("record %d: %+v, whole %+v", i, l, w)
		}
	}
}

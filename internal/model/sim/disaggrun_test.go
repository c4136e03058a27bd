package sim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// sendAll runs n requests of prompt and out tokens, one every gap, on t.
func sendAll(t *testing.T, tr measure.Transport, n, prompt, out int, gap time.Duration) []measure.Record {
	t.Helper()
	k := 0
	recs, _ := tr.Send(context.Background(), measure.Phase{Count: n,
		Next:    func() time.Duration { k++; return time.Duration(k-1) * gap },
		Request: func(i int) measure.Request { return measure.Request{Index: i, PromptTokens: prompt, MaxTokens: out} }})
	for _, r := range recs {
		if r.Error != "" || r.OutputTokens != out {
			t.Fatalf("request %d: %s %s, %d tokens", r.Index, r.Error, r.ErrorMsg, r.OutputTokens)
		}
	}
	return recs
}

func deployment(t *testing.T, link string, p, d int, args ...string) *DisaggVirtual {
	t.Helper()
	cfg := mustParse(t, args...)
	v, err := NewDisaggVirtual(Deployment{Prefill: cfg, Decode: cfg, PrefillReplicas: p, DecodeReplicas: d, Link: link})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// disaggPrompt is the prompt of the disaggregated first-token tests.
const disaggPrompt = 8000

// prefillAlone is the first-token tests' engine (Llama-3.1-8B on H100, 16K
// context): its arguments, its configuration and the first token of one
// disaggPrompt-token prompt alone on an aggregated engine.
func prefillAlone(t *testing.T) ([]string, Config, time.Duration) {
	t.Helper()
	args := []string{"llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "16384"}
	agg, err := NewVirtual(mustParse(t, args...))
	if err != nil {
		t.Fatal(err)
	}
	return args, mustParse(t, args...), sendAll(t, agg, 1, disaggPrompt, 1, 0)[0].First
}

// TestDisaggFirstToken: on idle engines a request's first token comes
// after the prefill, the decode server's front end, the KV's transfer and
// one decode step; the link's share is the transfer time the model gives.
func TestDisaggFirstToken(t *testing.T) {
	args, cfg, alone := prefillAlone(t)
	const prompt = disaggPrompt
	fe := time.Duration(cfg.Constants.FrontendOverheadMs * float64(time.Millisecond))
	for _, link := range []string{"nvlink", "ethernet"} {
		l, _ := LookupLink(link)
		xfer := time.Duration(cfg.KVTransferSeconds(l, prompt-1, 1) * 1e9)
		first := sendAll(t, deployment(t, link, 1, 1, args...), 1, prompt, 1, 0)[0].First
		step := first - alone - fe - xfer
		if step <= 0 || step > 30*time.Millisecond {
			t.Errorf("%s: first token at %v; the prefill alone %v, front end %v, transfer %v leave %v for one decode step",
				link, first, alone, fe, xfer, step)
		}
	}
}

// TestDisaggDecodeUndisturbed: long prompts arriving while others decode
// stretch an aggregated engine's token gaps (each step carries a prefill
// chunk); on a decode engine that never prefills they stay those of
// decoding alone. The same two GPUs: two data-parallel ranks against one
// prefill and one decode engine.
func TestDisaggDecodeUndisturbed(t *testing.T) {
	args := []string{"llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "16384"}
	const n, prompt, out = 120, 6000, 300
	gap := 250 * time.Millisecond
	agg, err := NewVirtual(mustParse(t, append(args, "--data-parallel-size", "2")...))
	if err != nil {
		t.Fatal(err)
	}
	// The longest gap between two tokens of a request, p99 over requests.
	gaps := func(recs []measure.Record) time.Duration {
		var v []time.Duration
		for _, r := range recs[n/4:] {
			most := time.Duration(0)
			for i := 1; i < len(r.Chunks); i++ {
				most = max(most, r.Chunks[i].At-r.Chunks[i-1].At)
			}
			v = append(v, most)
		}
		slices.Sort(v)
		return v[len(v)*99/100]
	}
	a := gaps(sendAll(t, agg, n, prompt, out, gap))
	d := gaps(sendAll(t, deployment(t, "nvlink", 1, 1, args...), n, prompt, out, gap))
	// A 6,000-token prefill is tens of milliseconds of compute on an H100
	// whichever engine runs it; a decode step of this batch, about ten.
	if !(a > 50*time.Millisecond && d < 25*time.Millisecond) {
		t.Errorf("longest token gap p99: aggregated %v, disaggregated %v; want a prefill's stall only in the aggregated engine", a, d)
	}
	t.Logf("longest token gap p99: aggregated DP2 %v, 1P1D %v", a, d)
}

// TestDisaggRoundRobin: the router alternates each side's engines, and
// the run is the same run to run.
func TestDisaggRoundRobin(t *testing.T) {
	args := []string{"llama-3.1-8b", "--gpu", "H100-SXM", "--max-model-len", "8192"}
	run := func() []measure.Record {
		return sendAll(t, deployment(t, "infiniband", 2, 3, args...), 60, 2000, 50, 50*time.Millisecond)
	}
	a, b := run(), run()
	for i := range a {
		if a[i].First != b[i].First || a[i].End != b[i].End {
			t.Fatalf("request %d differs run to run: %v/%v against %v/%v", i, a[i].First, a[i].End, b[i].First, b[i].End)
		}
	}
	v := deployment(t, "infiniband", 2, 3, args...)
	sendAll(t, v, 6, 2000, 50, time.Second)
	for i, rep := range v.pre {
		if got := rep.cores[0].promptTokens; got != 3*2000 {
			t.Errorf("prefill engine %d computed %d prompt tokens, want 3 prompts' %d", i, got, 3*2000)
		}
	}
	for i, rep := range v.dec {
		if got, hits := rep.cores[0].promptTokens, rep.cores[0].prefixHits; got != 2 || hits != 2*1999 {
			t.Errorf("decode engine %d computed %d prompt tokens with %d pulled, want 2 and %d", i, got, hits, 2*1999)
		}
	}
	if g := (Deployment{Prefill: v.d.Prefill, Decode: v.d.Decode, PrefillReplicas: 2, DecodeReplicas: 3}).GPUs(); g != 5 {
		t.Errorf("GPUs %d, want 5", g)
	}
	if _, err := NewDisaggVirtual(Deployment{Prefill: v.d.Prefill, Decode: v.d.Decode, PrefillReplicas: 0, DecodeReplicas: 1}); err == nil {
		t.Error("no prefill engine: no error")
	}
}

// TestDisaggDecodeWithoutConnector: a decode engine started without a KV
// connector ignores the request's kv_transfer_params and computes the
// whole prompt itself after the prefill engine has: each engine computes
// every prompt token, no KV crosses, and on idle engines the first token
// comes about two prefills after the request. Under load the decode
// engine's prefills sit between its decode steps, so a request's second
// token waits on the next prompt's prefill (the Dynamo 1.x B200 runs of
// the fidelity suite: their second token 0.76 s after the first).
func TestDisaggDecodeWithoutConnector(t *testing.T) {
	_, cfg, alone := prefillAlone(t)
	const prompt = disaggPrompt
	v, err := NewDisaggVirtual(Deployment{Prefill: cfg, Decode: cfg, PrefillReplicas: 1, DecodeReplicas: 1, Link: "ethernet", DecodeNoConnector: true})
	if err != nil {
		t.Fatal(err)
	}
	first := sendAll(t, v, 1, prompt, 1, 0)[0].First
	if first < 2*alone-alone/10 || first > 2*alone+alone/2 {
		t.Errorf("first token at %v; one prefill alone takes %v: want about two", first, alone)
	}
	if p, d := v.pre[0].cores[0].promptTokens, v.dec[0].cores[0].promptTokens; p != prompt || d != prompt || v.dec[0].cores[0].prefixHits != 0 {
		t.Errorf("prefill engine computed %d prompt tokens, decode engine %d with %d pulled; want %d each, none pulled", p, d, v.dec[0].cores[0].prefixHits, prompt)
	}
	// Under load: a request every 100 ms, each decoding 200 tokens, faster
	// than the decode engine prefills them, so a prompt is always waiting
	// there (as in those runs, whose first tokens waited seconds).
	second := func(noConn bool) time.Duration {
		v, err := NewDisaggVirtual(Deployment{Prefill: cfg, Decode: cfg, PrefillReplicas: 2, DecodeReplicas: 1, Link: "nvlink", DecodeNoConnector: noConn})
		if err != nil {
			t.Fatal(err)
		}
		recs := sendAll(t, v, 40, prompt, 200, 100*time.Millisecond)
		var sum time.Duration
		for _, r := range recs[10:] {
			sum += r.Chunks[1].At - r.Chunks[0].At
		}
		return sum / time.Duration(len(recs)-10)
	}
	with, without := second(false), second(true)
	if without < 3*with || without < alone/4 {
		t.Errorf("mean gap to the second token: %v with the connector, %v without; a prefill takes %v", with, without, alone)
	}
	t.Logf("one prefill %v; second-token gap %v with a connector, %v without", alone, with, without)
}

package sim

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// mixedReqs are n requests of prompts from 100 to 3,099 tokens, all sent
// at once.
func mixedReqs(n int) ([]measure.Request, []time.Duration) {
	reqs := make([]measure.Request, n)
	for i := range reqs {
		reqs[i] = measure.Request{Index: i, PromptTokens: 100 + (i*733)%3000, MaxTokens: 64 + (i*97)%400, PrefixID: -1}
	}
	return reqs, make([]time.Duration, n)
}

func runDeviated(t *testing.T, d Deviation, args ...string) []measure.Record {
	t.Helper()
	cfg := mustParse(t, append([]string{"llama-3.1-70b", "--tensor-parallel-size", "4", "--max-model-len", "8192"}, args...)...)
	cfg.Deviation = d
	reqs, sched := mixedReqs(300)
	recs, err := RunVirtualSchedule(cfg, reqs, sched, 96)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Deviations that cannot act on this workload leave every record as the
// zero deviation does, to the bit: each hook is inert unless it applies.
func TestZeroDeviationUnchanged(t *testing.T) {
	base := runDeviated(t, Deviation{})
	inert := Deviation{LongAttention: 1.25, LongContext: 1 << 20, AdmitEvery: 1, SharedPrefix: 1 << 20}
	if got := runDeviated(t, inert); !reflect.DeepEqual(got, base) {
		t.Error("an inert deviation changed the records")
	}
	for name, d := range map[string]Deviation{
		"long attention": {LongAttention: 1.25, LongContext: 512},
		"admit every 4":  {AdmitEvery: 4},
		"shared prefix":  {SharedPrefix: 64},
		"sync host":      {SyncHost: true},
	} {
		if got := runDeviated(t, d); reflect.DeepEqual(got, base) {
			t.Errorf("%s: no effect on the records", name)
		}
	}
}

// Attention of a sequence past the threshold costs 25% more; below it,
// and every other term of the step, is unchanged.
func TestLongAttentionStepTime(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-70b", "--tensor-parallel-size", "4", "--max-model-len", "8192")
	dev := cfg
	dev.Deviation = Deviation{LongAttention: 1.25, LongContext: 1024}
	step := func(cfg Config, ctx int, attend bool) float64 {
		c := newCore(cfg, MemoryEstimate{MaxRunningRequests: 64, KVBlocks: 1 << 20})
		var b batchShape
		for i := range 32 {
			s := &seq{id: i, prompt: ctx, maxOut: 100, computed: ctx, prefixID: -1}
			c.addToShape(&b, s, 1)
		}
		if !attend {
			b.decodeCtx = 0
		}
		return c.sm.stepSeconds(b)
	}
	for _, ctx := range []int{512, 1023} { // the context attended is ctx+1
		if a, b := step(cfg, ctx, true), step(dev, ctx, true); a != b {
			t.Errorf("context %d, below the threshold: step %g s, deviated %g s", ctx+1, a, b)
		}
	}
	for _, ctx := range []int{1024, 4000} {
		att := step(cfg, ctx, true) - step(cfg, ctx, false)
		datt := step(dev, ctx, true) - step(dev, ctx, false)
		if att <= 0 || math.Abs(datt/att-1.25) > 1e-9 {
			t.Errorf("context %d: attention %g s, deviated %g s: want x1.25", ctx+1, att, datt)
		}
		if a, b := step(cfg, ctx, false), step(dev, ctx, false); a != b {
			t.Errorf("context %d: the step without attention moved: %g vs %g s", ctx+1, a, b)
		}
	}
}

// Waiting requests join only on every 4th step while others run.
func TestAdmitEvery(t *testing.T) {
	cfg, est := smallKV(t)
	cfg.Deviation = Deviation{AdmitEvery: 4}
	c := newCore(cfg, est)
	for i := range 40 {
		c.add(&seq{id: i, prompt: 64, maxOut: 50, prefixID: -1})
		b, _ := c.schedule(c.endsAt)
		step := c.steps - 1
		joined := 0
		for _, s := range c.scheduled {
			if s.computed == 0 {
				joined++
			}
		}
		c.commit(float64(i), func(*seq, bool) {})
		if joined > 0 && step%4 != 0 && step > 0 {
			t.Fatalf("step %d (%d tokens): %d requests joined off the cadence", step, b.tokens, joined)
		}
		if step%4 == 0 && joined == 0 {
			t.Fatalf("step %d: the waiting requests did not join", step)
		}
	}
}

// The shared prefix is served by the prefix cache, and only with prefix
// caching on.
func TestSharedPrefixHits(t *testing.T) {
	hits := func(d Deviation, extra ...string) int64 {
		cfg, est := smallKV(t, extra...)
		cfg.Deviation = d
		c := newCore(cfg, est)
		for i := range 8 {
			c.add(&seq{id: i, prompt: 600, maxOut: 4, prefixID: -1})
			for !c.idle() {
				c.schedule(c.endsAt)
				c.commit(0, func(*seq, bool) {})
			}
		}
		return c.prefixHits
	}
	d := Deviation{SharedPrefix: 256}
	if h := hits(Deviation{}); h != 0 {
		t.Errorf("no deviation: %d prefix hits", h)
	}
	if h := hits(d); h != 7*256 {
		t.Errorf("shared prefix of 256: %d prefix hits, want %d", h, 7*256)
	}
	if h := hits(d, "--no-enable-prefix-caching"); h != 0 {
		t.Errorf("prefix caching off: %d prefix hits", h)
	}
}

// The per-slot reservation comes out of the KV cache, max_num_seqs times.
func TestSeqReserve(t *testing.T) {
	for _, seqs := range []string{"64", "256"} {
		cfg := mustParse(t, "llama-3.1-8b", "--max-num-seqs", seqs)
		base, err := Estimate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Deviation = Deviation{SeqReserveMiB: 16}
		est, err := Estimate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := 16.0 / 1024 * float64(cfg.MaxRunningRequests)
		if got := est.NonTorchGiB - base.NonTorchGiB; math.Abs(got-want) > 1e-9 {
			t.Errorf("max_num_seqs %s: reservation %g GiB, want %g", seqs, got, want)
		}
		if lost := base.KVCacheGiB - est.KVCacheGiB; lost < want-0.01 || lost > want+0.01 {
			t.Errorf("max_num_seqs %s: KV cache %g GiB smaller, want %g", seqs, lost, want)
		}
	}
}

// A synchronous host adds its work to the GPU's instead of hiding it.
func TestSyncHost(t *testing.T) {
	cfg := mustParse(t, "llama-3.1-8b")
	b := batchShape{tokens: 8, seqs: 8, sampled: 8, decodeCtx: 8 * 1000}
	a := newStepModel(cfg)
	cfg.Deviation = Deviation{SyncHost: true}
	s := newStepModel(cfg)
	host := s.cpuBase + 8*s.perSeq // below the GPU's time, which async hides it behind
	if got, want := s.stepSeconds(b), a.stepSeconds(b)+host; math.Abs(got-want) > 1e-12 {
		t.Errorf("sync host: step %g s, want %g s (host %g s)", got, want, host)
	}
}

// TestAsyncOutputProcOff: a vLLM V0 engine with its output processing
// between the steps (async_output_proc off) pays outputProcPerSeq for
// every sequence of a step on top of the step it had: 0.1 ms each, 3.2 ms
// at a batch of 32 (vLLM RFC #6913's 3.4 ms at batch 32, less its batch-1
// figure), whatever the rest of the step costs.
func TestAsyncOutputProcOff(t *testing.T) {
	args := []string{"llama-3.1-8b", "--gpu", "H100-SXM", "--v0-scheduler", "--no-async-scheduling"}
	b := batchShape{tokens: 32, seqs: 32, sampled: 32, decodeCtx: 32 * 1000}
	on := newStepModel(mustParse(t, args...))
	cfg := mustParse(t, append(args, "--disable-async-output-proc")...)
	if cfg.AsyncOutputProc {
		t.Fatal("the switch did not reach the configuration")
	}
	off := newStepModel(cfg)
	if d := off.stepSeconds(b) - on.stepSeconds(b); math.Abs(d-32*outputProcPerSeq.Seconds()) > 1e-9 || d < 3e-3 {
		t.Errorf("output processing between the steps adds %.3f ms to a step of 32, want %.3f", d*1e3, 32*outputProcPerSeq.Seconds()*1e3)
	}
}

package sim

import (
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// smallKV returns a config whose KV cache holds few tokens, so that the
// scheduler's limits bind in small tests.
func smallKV(t *testing.T, extra ...string) (Config, MemoryEstimate) {
	t.Helper()
	// 8B on an L4 (22.49 GiB) at 0.95: ~4 GiB of KV, ~33k tokens.
	cfg := mustParse(t, append([]string{"llama-3.1-8b", "--gpu", "L4", "--gpu-memory-utilization", "0.95", "--max-model-len", "4096", "--max-num-seqs", "256"}, extra...)...)
	est, err := Estimate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, est
}

func TestPreemptionWhenKVRunsOut(t *testing.T) {
	cfg, est := smallKV(t)
	// 64 requests of 1000 + 1000 tokens need ~128k tokens of KV: far more
	// than the cache, so running requests must be preempted and recomputed.
	recs, err := RunVirtualSchedule(cfg, fixedReqs(64, 1000, 1000), make([]time.Duration, 64), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := newCore(cfg, est)
	var done int
	for i := range 64 {
		c.add(&seq{id: i, prompt: 1000, maxOut: 1000, prefixID: -1})
	}
	for steps := 0; done < 64 && steps < 1e6; steps++ {
		if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
			t.Fatal("stalled")
		}
		c.commit(0, func(_ *seq, last bool) {
			if last {
				done++
			}
		})
		if c.usedBlocks > c.totalBlocks {
			t.Fatalf("used %d blocks of %d", c.usedBlocks, c.totalBlocks)
		}
	}
	c.schedule(c.endsAt) // the last step's result frees its requests (holdsFinished)
	if c.preemptions == 0 {
		t.Errorf("no preemption with %d KV tokens for 128k tokens of demand", est.KVCacheTokens)
	}
	if held := c.usedBlocks - c.evictable; held != 0 {
		t.Errorf("%d blocks leaked (%d left cached and free)", held, c.evictable)
	}
	for i, r := range recs {
		if r.OutputTokens != 1000 {
			t.Fatalf("record %d: %d tokens", i, r.OutputTokens)
		}
	}
	t.Logf("%d preemptions", c.preemptions)
}

func TestPrefixCachingHits(t *testing.T) {
	reqs := make([]measure.Request, 200)
	for i := range reqs {
		reqs[i] = measure.Request{Index: i, PromptTokens: 2048 + 64, MaxTokens: 16, PrefixID: i % 4, PrefixTokens: 2048}
	}
	sched := make([]time.Duration, len(reqs))
	for i := range sched {
		sched[i] = time.Duration(i) * 20 * time.Millisecond
	}
	ttft := func(args ...string) float64 {
		cfg := mustParse(t, append([]string{"llama-3.1-8b", "--max-model-len", "4096"}, args...)...)
		recs, err := RunVirtualSchedule(cfg, reqs, sched, 0)
		if err != nil {
			t.Fatal(err)
		}
		return measure.Summarize(recs, measure.SummaryOptions{Bootstrap: 1}).TTFT.Median
	}
	on, off := ttft(), ttft("--no-enable-prefix-caching")
	t.Logf("median TTFT: prefix caching %.1f ms, off %.1f ms", on, off)
	if on > 0.5*off {
		t.Errorf("prefix caching should cut TTFT of 2048-token shared prefixes: %.1f vs %.1f ms", on, off)
	}
}

func TestSGLangPrefillFirst(t *testing.T) {
	// engine.SGLang (no mixed chunk) pauses decoding while it prefills new
	// requests; vLLM mixes them. With a stream of long prompts arriving,
	// SGLang's decode gaps (p99 ITL) are the larger.
	reqs := fixedReqs(60, 3000, 200)
	sched := make([]time.Duration, len(reqs))
	for i := range sched {
		sched[i] = time.Duration(i) * 150 * time.Millisecond
	}
	itl := func(args ...string) measure.Summary {
		recs, err := RunVirtualSchedule(mustParse(t, args...), reqs, sched, 0)
		if err != nil {
			t.Fatal(err)
		}
		return measure.Summarize(recs, measure.SummaryOptions{Bootstrap: 1})
	}
	v := itl("llama-3.1-8b", "--max-model-len", "4096", "--max-num-batched-tokens", "2048")
	s := itl("--model-path", "llama-3.1-8b", "--context-length", "4096", "--chunked-prefill-size", "2048")
	t.Logf("p99 ITL: vLLM %.1f ms, engine.SGLang %.1f ms; median TTFT vLLM %.1f, engine.SGLang %.1f", v.ITL.P99, s.ITL.P99, v.TTFT.Median, s.TTFT.Median)
	if s.Completed != 60 || v.Completed != 60 {
		t.Fatalf("completed %d / %d", s.Completed, v.Completed)
	}
	if s.ITL.P99 <= v.ITL.P99 {
		t.Errorf("SGLang's prefill batches should stall decodes longer than vLLM's mixed batches")
	}
	if s.TTFT.Median >= v.TTFT.Median {
		t.Errorf("engine.SGLang prefill-first should not have the larger TTFT")
	}
}

func TestDataParallelSplitsLoad(t *testing.T) {
	one := run(t, []string{"llama-3.1-8b", "--max-model-len", "4096"}, 400, 512, 128, 0)
	two := run(t, []string{"llama-3.1-8b", "--max-model-len", "4096", "-dp", "2"}, 400, 512, 128, 0)
	t.Logf("DP1 %.0f tok/s, DP2 %.0f tok/s", one.OutputThroughput, two.OutputThroughput)
	if two.OutputThroughput < 1.5*one.OutputThroughput {
		t.Errorf("two replicas should nearly double throughput: %.0f vs %.0f", two.OutputThroughput, one.OutputThroughput)
	}
}

// TestPrefixQueriesCountedOnce: a request that waits at the head of the
// queue for KV blocks is looked up in the prefix cache on every step, but
// its tokens count once among the queries (as its hits do), so the
// /metrics hit rate is not diluted by waiting.
func TestPrefixQueriesCountedOnce(t *testing.T) {
	cfg, est := smallKV(t)
	c := newCore(cfg, est)
	// The first request takes most of the cache; the second cannot be
	// admitted until it finishes.
	bigPrompt := (est.KVBlocks - 4) * cfg.BlockSize
	c.add(&seq{id: 0, prompt: bigPrompt - 64, maxOut: 64, prefixID: -1})
	c.add(&seq{id: 1, prompt: 1000, maxOut: 4, prefixID: -1})
	done, steps := 0, 0
	for ; done < 2 && steps < 1e5; steps++ {
		if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
			t.Fatal("stalled")
		}
		c.commit(0, func(_ *seq, last bool) {
			if last {
				done++
			}
		})
	}
	if want := int64(bigPrompt - 64 + 1000); c.prefixQueries != want {
		t.Errorf("prefix cache queries %d tokens, want %d (each prompt once) after %d steps", c.prefixQueries, want, steps)
	}
}

// TestQueueTimeEndsWhenScheduled: a request's queue time runs from its
// arrival to the start of the step that first schedules it (vLLM's
// request_queue_time), not to that step's end; the step itself is prefill.
func TestQueueTimeEndsWhenScheduled(t *testing.T) {
	cfg, est := smallKV(t)
	c := newCore(cfg, est)
	s := &seq{id: 0, prompt: 1000, maxOut: 4, prefixID: -1, arrival: 0.5}
	c.add(s)
	now := 1.0 // the engine was busy until 1.0
	b, secs := c.schedule(c.endsAt)
	if b.tokens == 0 || secs <= 0 {
		t.Fatalf("nothing scheduled: %+v %v", b, secs)
	}
	now += secs
	c.commit(now, func(*seq, bool) {})
	if d := s.queuedFor - 0.5; d > 1e-9 || d < -1e-9 {
		t.Errorf("queued for %.4f s, want 0.5 (arrival 0.5 to step start 1.0; the step took %.4f s)", s.queuedFor, secs)
	}
}

// TestKVUsageExcludesCachedFreePrefixes: once every request has finished,
// the prefix blocks left in the cache are reusable, not in use: the KV usage
// the engine reports drops to zero (vLLM counts them in its free queue),
// while the blocks themselves stay cached for the next request.
func TestKVUsageExcludesCachedFreePrefixes(t *testing.T) {
	cfg, est := smallKV(t)
	c := newCore(cfg, est)
	for i := range 4 {
		c.add(&seq{id: i, prompt: 2048 + 64, maxOut: 8, prefixID: i, prefixTokens: 2048})
	}
	peak := 0.0
	for done, steps := 0, 0; done < 4; steps++ {
		if steps > 1e5 {
			t.Fatal("stalled")
		}
		if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
			t.Fatal("stalled")
		}
		c.commit(0, func(_ *seq, last bool) {
			if last {
				done++
			}
		})
		peak = max(peak, c.kvUsage())
	}
	c.schedule(c.endsAt) // the last step's result frees its requests (holdsFinished)
	if c.usedBlocks == 0 || c.evictable != c.usedBlocks {
		t.Fatalf("want only cached, unreferenced prefix blocks left: used %d, evictable %d", c.usedBlocks, c.evictable)
	}
	if u := c.kvUsage(); u != 0 {
		t.Errorf("KV usage %.4f with no request running (%d cached-but-free prefix blocks counted as used)", u, c.evictable)
	}
	if peak <= 0 {
		t.Errorf("KV usage never rose while 4 requests of 2112 tokens ran")
	}
}

// checkBlocks verifies the core's block accounting: every used block is
// a running sequence's own or in a page that running sequences reference
// or the free queue holds, counted once; a page's references are the
// sequences that hold it; the free queue holds exactly the cached pages no
// one references, and a lookup finds exactly the cached pages.
func checkBlocks(t *testing.T, c *core, step int) {
	t.Helper()
	used, evictable := 0, 0
	refs := map[*page]int{}
	for _, s := range c.running {
		used += s.blocks
		if !s.pinned && len(s.pages) > 0 {
			t.Fatalf("step %d: a running sequence's pages are not referenced", step)
		}
		for _, p := range s.pages {
			refs[p]++
		}
	}
	for i := c.head; i < len(c.waiting); i++ {
		if s := c.waiting[i]; s.blocks != 0 || len(s.pages) != 0 {
			t.Fatalf("step %d: a waiting sequence holds %d blocks and %d pages", step, s.blocks, len(s.pages))
		}
	}
	for p, n := range refs {
		used += c.pageBlocks
		if p.refs != n {
			t.Fatalf("step %d: page has %d refs, %d sequences hold it", step, p.refs, n)
		}
		if p.cached != c.findable(p) {
			t.Fatalf("step %d: page cached %v, found by its hash %v", step, p.cached, c.findable(p))
		}
	}
	queued := 0
	for p := range c.queued() {
		queued++
		used += c.pageBlocks
		evictable += c.pageBlocks
		if p.refs != 0 || refs[p] != 0 || !p.cached || !c.findable(p) {
			t.Fatalf("step %d: a page in the free queue has %d refs (cached %v)", step, p.refs, p.cached)
		}
	}
	cachedHeld := 0
	for p := range refs {
		if p.cached {
			cachedHeld++
		}
	}
	if c.cachedCount() != queued+cachedHeld {
		t.Fatalf("step %d: %d pages cached, %d queued and %d held", step, c.cachedCount(), queued, cachedHeld)
	}
	if used != c.usedBlocks || evictable != c.evictable || c.usedBlocks > c.totalBlocks {
		t.Fatalf("step %d: used %d (counted %d), evictable %d (counted %d), total %d", step, c.usedBlocks, used, c.evictable, evictable, c.totalBlocks)
	}
}

// TestBlockAccounting drives the scheduler through prefix sharing, partial
// hits, preemption with cached pages and eviction under pressure, and
// checks the block accounting after every step, for both engines.
func TestBlockAccounting(t *testing.T) {
	for _, eng := range []string{"vllm", "sglang"} {
		cfg, est := smallKV(t)
		if eng == "sglang" {
			cfg = mustParse(t, "--model-path", "llama-3.1-8b", "--gpu", "L4", "--mem-fraction-static", "0.85",
				"--context-length", "4096", "--max-running-requests", "256")
			var err error
			if est, err = Estimate(cfg); err != nil {
				t.Fatal(err)
			}
		}
		c := newCore(cfg, est)
		n := 0
		add := func(k int) {
			for range k {
				prompt := 300 + (n*37)%900
				c.add(&seq{id: n, prompt: prompt, maxOut: 200 + (n*53)%600, prefixID: n % 3, prefixTokens: []int{256, 512, 100}[n%3]})
				n++
			}
		}
		add(40)
		done := 0
		for step := 0; done < n && step < 1e6; step++ {
			if step%50 == 0 && n < 200 {
				add(20)
			}
			if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
				t.Fatalf("%s: stalled at step %d", eng, step)
			}
			c.commit(float64(step), func(_ *seq, last bool) {
				if last {
					done++
				}
			})
			checkBlocks(t, c, step)
		}
		if done != n {
			t.Fatalf("%s: %d of %d finished", eng, done, n)
		}
		if eng == "vllm" && c.preemptions == 0 {
			t.Errorf("%s: no preemption: the test does not exercise re-admission over cached pages", eng)
		}
		t.Logf("%s: %d requests, %d preemptions, prefix hits %d of %d prompt tokens", eng, n, c.preemptions, c.prefixHits, c.prefixQueries)
	}
}

// Under vLLM's async scheduling a step is planned when the one before it
// starts: a request that arrives while step N runs joins step N+2, not
// N+1 (core.schedule); with --no-async-scheduling it joins N+1, and an
// idle engine takes it at once either way. SGLang's overlap scheduler
// plans a batch ahead in the same way (core.schedule); with
// --disable-overlap-schedule it does not.
func TestAsyncSchedulingAdmitsAStepLater(t *testing.T) {
	sglang := []string{"llama-3.1-8b", "--engine", "sglang", "--gpu", "H100", "--context-length", "4096", "--max-running-requests", "256"}
	joins := func(extra ...string) uint64 {
		var cfg Config
		var est MemoryEstimate
		if len(extra) > 0 && extra[0] == "sglang" {
			cfg = mustParse(t, append(sglang, extra[1:]...)...)
			var err error
			if est, err = Estimate(cfg); err != nil {
				t.Fatal(err)
			}
		} else {
			cfg, est = smallKV(t, extra...)
		}
		c := newCore(cfg, est)
		c.add(&seq{id: 0, prompt: 100, maxOut: 1000, prefixID: -1})
		at := map[int]uint64{}
		step := func() {
			now := c.endsAt
			b, _ := c.schedule(now)
			if b.tokens == 0 {
				t.Fatal("nothing scheduled")
			}
			for _, s := range c.scheduled {
				if _, ok := at[s.id]; !ok {
					at[s.id] = c.steps
				}
			}
			c.commit(c.endsAt, func(*seq, bool) {})
		}
		step() // step 1 runs request 0's prompt
		// Request 1 arrives while step 1 runs.
		c.add(&seq{id: 1, prompt: 100, maxOut: 10, prefixID: -1, arrival: c.endsAt - c.stepSecs/2})
		step()
		step()
		// An idle engine: a fresh core, the request arriving after
		// everything finished.
		c2 := newCore(cfg, est)
		c2.add(&seq{id: 2, prompt: 100, maxOut: 2, prefixID: -1})
		c2.schedule(0)
		c2.commit(c2.endsAt, func(*seq, bool) {})
		c2.schedule(c2.endsAt)
		c2.commit(c2.endsAt, func(*seq, bool) {})
		late := c2.endsAt + 1
		c2.add(&seq{id: 3, prompt: 100, maxOut: 2, prefixID: -1, arrival: late})
		b, _ := c2.schedule(late)
		if b.tokens == 0 || c2.scheduled[0].id != 3 {
			t.Fatalf("idle engine did not take the new request at once (%d tokens)", b.tokens)
		}
		return at[1]
	}
	if got := joins(); got != 3 {
		t.Errorf("async scheduling: the request that came during step 1 joined step %d, want 3", got)
	}
	if got := joins("--no-async-scheduling"); got != 2 {
		t.Errorf("--no-async-scheduling: the request that came during step 1 joined step %d, want 2", got)
	}
	if got := joins("sglang"); got != 3 {
		t.Errorf("SGLang's overlap scheduler: the request that came during step 1 joined step %d, want 3", got)
	}
	if got := joins("sglang", "--disable-overlap-schedule"); got != 2 {
		t.Errorf("SGLang --disable-overlap-schedule: the request that came during step 1 joined step %d, want 2", got)
	}
}

// TestV0SchedulerRunsPromptsAlone: under vLLM V0's scheduler without
// chunked prefill (--v0-scheduler) a step that takes new prompts runs no
// decodes, and the running requests decode in the next step with no
// prompt waiting; V1's scheduler (the default) runs them together.
func TestV0SchedulerRunsPromptsAlone(t *testing.T) {
	for _, v0 := range []bool{false, true} {
		args := []string{"--no-enable-chunked-prefill", "--no-async-scheduling"}
		if v0 {
			args = append(args, "--v0-scheduler")
		}
		cfg, est := smallKV(t, args...)
		c := newCore(cfg, est)
		c.add(&seq{id: 0, prompt: 100, maxOut: 8, prefixID: -1})
		c.schedule(0)
		c.commit(0, func(*seq, bool) {})
		c.add(&seq{id: 1, prompt: 100, maxOut: 8, prefixID: -1})
		b, _ := c.schedule(c.endsAt)
		c.commit(0, func(*seq, bool) {})
		wantSeqs := 2 // the decode rides along
		if v0 {
			wantSeqs = 1
		}
		if b.seqs != wantSeqs || b.prefillTokens != 100 {
			t.Errorf("v0 %v: the step with the second prompt ran %d sequences, %d prompt tokens; want %d, 100", v0, b.seqs, b.prefillTokens, wantSeqs)
		}
		if b, _ = c.schedule(c.endsAt); b.seqs != 2 || b.prefillTokens != 0 {
			t.Errorf("v0 %v: the next step ran %d sequences, %d prompt tokens; want 2 decodes", v0, b.seqs, b.prefillTokens)
		}
	}
}

// TestVLLMAdmitsOnTheFirstChunk pins vLLM 0.15's admission of a waiting
// request under KV pressure (vllm/v1/core/sched/scheduler.py, schedule;
// vllm/v1/core/kv_cache_manager.py, allocate_slots): the scheduler asks
// for the blocks of the chunk it schedules, not of the whole prompt,
// holds no watermark back (the V1 KV cache manager's only test is the
// blocks asked for against the free ones, cached free pages included),
// and admits no waiting request in a step that preempted. Admission on
// the whole prompt (scheduler_reserve_full_isl, vllm-project/vllm PR
// #37307) and a V1 watermark (PR #44594) came after 0.15.
func TestVLLMAdmitsOnTheFirstChunk(t *testing.T) {
	cfg, est := smallKV(t, "--max-num-batched-tokens", "512")
	est.KVBlocks = 53 // 848 tokens
	c := newCore(cfg, est)
	step := func() batchShape {
		b, _ := c.schedule(c.endsAt)
		c.commit(c.endsAt, func(*seq, bool) {})
		return b
	}
	c.add(&seq{id: 0, prompt: 320, maxOut: 1000, prefixID: -1})
	step() // request 0's prompt: 20 blocks, 33 free
	// Request 1's prompt needs 63 blocks, more than are free; its first
	// chunk (the budget less request 0's decode, 511 tokens) needs 32,
	// which with the block request 0's decode takes are all the free
	// ones: no headroom is kept.
	c.add(&seq{id: 1, prompt: 1000, maxOut: 10, prefixID: -1})
	if b := step(); len(c.running) != 2 || b.prefillTokens != 511 {
		t.Fatalf("waiting request not admitted on its first chunk: %d running, %d prefill tokens", len(c.running), b.prefillTokens)
	}
	// Its second chunk does not fit beside request 0: the latest running
	// request (request 1 itself) is preempted, and nothing is admitted
	// in that step even though request 2's prompt would fit.
	c.add(&seq{id: 2, prompt: 16, maxOut: 10, prefixID: -1})
	b := step()
	if c.preemptions != 1 {
		t.Fatalf("%d preemptions, want 1", c.preemptions)
	}
	if b.prefillTokens != 0 || len(c.running) != 1 {
		t.Errorf("a step that preempted admitted a waiting request: %d prefill tokens, %d running", b.prefillTokens, len(c.running))
	}
}

// TestAsyncSchedulingFreesASeatAStepLater: under vLLM's async scheduling
// the step after the one a request finishes in was planned before that
// step's result was in, so the finished request still held its seat
// (and its blocks) then, and a request waiting for a seat joins the step
// after; without async scheduling it joins the next one. When the step
// would be empty without the seat, the engine takes the result first.
func TestAsyncSchedulingFreesASeatAStepLater(t *testing.T) {
	joins := func(extra ...string) uint64 {
		cfg, est := smallKV(t, append([]string{"--max-num-seqs", "2"}, extra...)...)
		c := newCore(cfg, est)
		c.add(&seq{id: 0, prompt: 16, maxOut: 2, prefixID: -1})   // finishes in step 2
		c.add(&seq{id: 1, prompt: 16, maxOut: 100, prefixID: -1}) // keeps its seat
		c.add(&seq{id: 2, prompt: 16, maxOut: 2, prefixID: -1})   // waits for a seat
		for step := uint64(1); step <= 5; step++ {
			if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
				t.Fatal("nothing scheduled")
			}
			for _, s := range c.scheduled {
				if s.id == 2 {
					return c.steps
				}
			}
			c.commit(c.endsAt, func(*seq, bool) {})
		}
		return 0
	}
	if got := joins(); got != 4 {
		t.Errorf("async scheduling: the waiting request joined step %d, want 4", got)
	}
	if got := joins("--no-async-scheduling"); got != 3 {
		t.Errorf("--no-async-scheduling: the waiting request joined step %d, want 3", got)
	}
	// A request held for the next step's planning has finished as far as
	// the running gauge and the router see: vLLM reports them after the
	// step's result frees it.
	// afterFirstStep is a core of seats running two 16-token prompts, the
	// first to finish after one token, once the first step has run.
	afterFirstStep := func(seats string, secondOut int) *core {
		cfg, est := smallKV(t, "--max-num-seqs", seats)
		c := newCore(cfg, est)
		c.add(&seq{id: 0, prompt: 16, maxOut: 1, prefixID: -1})
		c.add(&seq{id: 1, prompt: 16, maxOut: secondOut, prefixID: -1})
		c.schedule(0)
		c.commit(c.endsAt, func(*seq, bool) {})
		return c
	}
	{
		c := afterFirstStep("2", 100)
		if len(c.running) != 2 || c.active() != 1 || c.load() != 1 || c.idle() {
			t.Errorf("after a request finished: %d held, %d active, load %d, idle %v; want 2, 1, 1, false",
				len(c.running), c.active(), c.load(), c.idle())
		}
	}
	// The seat is the only thing left to run: the engine waits for the
	// result and plans the step with it.
	c := afterFirstStep("1", 1)
	if b, _ := c.schedule(c.endsAt); b.tokens == 0 || c.scheduled[0].id != 1 {
		t.Errorf("the waiting request did not take the freed seat when nothing else could run (%d tokens)", b.tokens)
	}
}

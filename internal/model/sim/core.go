package sim

import (
	"math"

	"github.com/servetune/servetune/internal/serving/engine"
)

// seq is one request inside the engine.
type seq struct {
	id           int // caller's handle (record index or stream slot)
	prompt       int
	maxOut       int
	prefixID     int // -1 when none
	prefixTokens int
	generated    int
	computed     int // tokens whose KV is in the cache
	blocks       int // KV blocks this sequence owns
	shared       int // KV blocks borrowed from a cached prefix (the first shared blocks of prefix)
	prefix       *prefixEntry
	// own holds this sequence's computed blocks while it waits after a
	// preemption (vLLM keeps them in its prefix cache until evicted);
	// ownBase is how many prefix blocks it had borrowed then, which its
	// own blocks follow.
	own          *prefixEntry
	ownBase      int
	ownTaken     int  // blocks taken back from own by the admission in progress (undone on failure)
	looked       bool // prefix cache consulted since (re)admission
	sched        int  // tokens scheduled in the current step
	done         bool
	arrival      float64 // engine clock, seconds
	firstAt      float64
	queuedFor    float64 // seconds spent waiting before first scheduled
	scheduledYet bool
}

// target is how many tokens must be in the cache before the next token is
// sampled: the prompt and every token generated so far (the last one is
// processed by the decode step that samples the next).
func (s *seq) target() int { return s.prompt + s.generated }

// prefixEntry is KV blocks held by the prefix cache: a shared prefix
// (vLLM's hashed blocks, SGLang's radix tree) keyed by the workload's
// prefix group, or a preempted sequence's own computed blocks (owner set).
// An entry grows block by block as its prefix is computed, is borrowed in
// part by a prompt that covers only part of it, and is evicted from its
// tail, least recently used first, once nothing references it.
type prefixEntry struct {
	group  int // prefix group; -1 for an own entry
	owner  *seq
	blocks int
	refs   int
	stamp  uint64 // last use, for LRU eviction
}

// emitFunc receives each sampled token: s produced a token at the end of the
// step; finished says it was the last.
type emitFunc func(s *seq, finished bool)

// core is one engine replica (one data-parallel rank): the scheduler and the
// paged KV cache. It is a pure state machine: schedule plans a step and
// returns its duration, commit applies it. Not safe for concurrent use.
type core struct {
	cfg         Config
	sm          stepModel
	bs          int
	maxSeqs     int
	totalBlocks int
	usedBlocks  int // includes blocks held by cached prefixes
	evictable   int // cached-prefix blocks no running sequence uses
	running     []*seq
	waiting     []*seq
	head        int                       // waiting[head:] is the queue
	prefixes    map[int]*prefixEntry      // shared prefixes by group
	entries     map[*prefixEntry]struct{} // every entry, for eviction
	clock       uint64
	steps       uint64 // steps planned (Deviation.AdmitEvery)
	scheduled   []*seq
	stepSecs    float64 // duration of the step planned by schedule
	remainOut   int     // sum over running of output tokens still to generate (SGLang admission)

	// Counters for /metrics.
	preemptions   int64
	prefixQueries int64
	prefixHits    int64
	promptTokens  int64
	genTokens     int64
}

func newCore(cfg Config, est MemoryEstimate) *core {
	return &core{
		cfg:         cfg,
		sm:          newStepModel(cfg),
		bs:          cfg.BlockSize,
		maxSeqs:     est.MaxNumSeqs,
		totalBlocks: est.KVBlocks,
		prefixes:    map[int]*prefixEntry{},
		entries:     map[*prefixEntry]struct{}{},
	}
}

// load is the number of requests the core holds, for routing.
func (c *core) load() int { return len(c.running) + len(c.waiting) - c.head }

// idle reports whether the core has nothing to do.
func (c *core) idle() bool { return c.load() == 0 }

// add queues a new request.
func (c *core) add(s *seq) {
	c.cfg.Deviation.sharePrefix(s)
	c.waiting = append(c.waiting, s)
}

// blocksFor is the number of blocks holding n tokens.
func (c *core) blocksFor(n int) int { return (n + c.bs - 1) / c.bs }

// allocate grows s's blocks to hold n tokens, evicting cached blocks no
// running sequence uses (least recently used first) when the free pool is
// short. reserve blocks must stay free afterwards.
func (c *core) allocate(s *seq, n, reserve int) bool {
	need := c.blocksFor(n) - s.shared - s.blocks
	if need <= 0 {
		return true
	}
	if short := need + reserve - (c.totalBlocks - c.usedBlocks); short > 0 {
		c.evict(short)
	}
	if c.totalBlocks-c.usedBlocks < need+reserve {
		return false
	}
	c.usedBlocks += need
	s.blocks += need
	return true
}

// evict frees up to n cached blocks that nothing references: from the
// tail of the least recently used entry first, as vLLM's free-block queue
// hands out a freed sequence's blocks last block first.
func (c *core) evict(n int) {
	for n > 0 && c.evictable > 0 {
		var victim *prefixEntry
		for e := range c.entries {
			if e.refs == 0 && (victim == nil || e.stamp < victim.stamp) {
				victim = e
			}
		}
		if victim == nil {
			c.evictable = 0
			return
		}
		k := min(n, victim.blocks)
		victim.blocks -= k
		c.usedBlocks -= k
		c.evictable -= k
		n -= k
		if victim.blocks == 0 {
			c.dropEntry(victim)
		}
	}
}

// dropEntry forgets an empty or unusable entry, freeing what it holds.
func (c *core) dropEntry(e *prefixEntry) {
	if e.refs == 0 {
		c.evictable -= e.blocks
	}
	c.usedBlocks -= e.blocks
	e.blocks = 0
	delete(c.entries, e)
	if e.owner != nil {
		if e.owner.own == e {
			e.owner.own = nil
		}
	} else if c.prefixes[e.group] == e {
		delete(c.prefixes, e.group)
	}
}

// release frees s's own blocks and drops its reference to a cached prefix
// and its own cached blocks, if any.
func (c *core) release(s *seq) {
	c.usedBlocks -= s.blocks
	s.blocks = 0
	c.unborrow(s)
	if s.own != nil {
		c.dropEntry(s.own)
	}
}

// unborrow drops s's reference to the prefix it borrowed.
func (c *core) unborrow(s *seq) {
	if e := s.prefix; e != nil {
		e.refs--
		c.clock++
		e.stamp = c.clock
		if e.refs == 0 {
			c.evictable += e.blocks
		}
		s.prefix, s.shared = nil, 0
	}
}

// lookupPrefix applies prefix cache hits to a sequence about to be
// admitted: the longest run of cached blocks its prompt starts with (its
// prefix group's blocks, then, after a preemption, its own blocks that
// were not evicted) counts as computed. At least one token is always
// computed, as in the engines.
func (c *core) lookupPrefix(s *seq) {
	if s.looked || !c.cfg.PrefixCaching || s.computed > 0 {
		return
	}
	s.looked = true
	c.prefixQueries += int64(s.prompt)
	limit := (s.target() - 1) / c.bs // blocks a hit may cover
	if e := c.prefixes[s.prefixID]; s.prefixID >= 0 && e != nil && e.blocks > 0 && limit > 0 {
		hit := min(e.blocks, limit, s.prefixTokens/c.bs)
		if hit > 0 {
			if e.refs == 0 {
				c.evictable -= e.blocks
			}
			e.refs++
			s.prefix, s.shared = e, hit
		}
	}
	if o := s.own; o != nil {
		// Its own blocks follow the prefix blocks it had borrowed; those a
		// longer hit now covers are duplicates, and a shorter hit breaks
		// the chain of block hashes.
		skip := s.shared - s.ownBase
		if skip < 0 || skip >= o.blocks {
			c.dropEntry(o)
		} else {
			c.evictable -= o.blocks
			delete(c.entries, o)
			o.owner, s.own = nil, nil
			c.usedBlocks -= skip
			s.ownTaken = o.blocks - skip
			s.blocks += s.ownTaken
		}
	}
	hitBlocks := s.shared + min(s.ownTaken, max(0, limit-s.shared))
	s.computed = hitBlocks * c.bs
	c.prefixHits += int64(s.computed)
}

// undoPrefix returns what lookupPrefix took when admission fails.
func (c *core) undoPrefix(s *seq) {
	if !s.looked {
		return
	}
	c.prefixHits -= int64(s.computed)
	c.prefixQueries -= int64(s.prompt)
	if s.ownTaken > 0 {
		s.blocks -= s.ownTaken
		c.cacheOwn(s, s.ownTaken)
		s.ownBase, s.ownTaken = s.shared, 0
	}
	c.unborrow(s)
	s.computed, s.looked = 0, false
}

// cacheOwn turns n of s's blocks (already counted used) into its own
// evictable cache entry.
func (c *core) cacheOwn(s *seq, n int) {
	c.clock++
	e := &prefixEntry{group: -1, owner: s, blocks: n, stamp: c.clock}
	c.entries[e] = struct{}{}
	c.evictable += n
	s.own = e
}

// cachePrefix caches the prefix blocks s has computed so far: it starts
// its group's entry, or, when s holds the entry up to its end, extends it
// block by block, so sequences admitted while the prefix is still being
// computed share what is done (vLLM caches each block once it is full).
// A sequence that computed its own copy keeps it, as vLLM does.
func (c *core) cachePrefix(s *seq) {
	if !c.cfg.PrefixCaching || s.prefixID < 0 {
		return
	}
	full := min(s.computed, s.prefixTokens) / c.bs
	e := c.prefixes[s.prefixID]
	switch {
	case e == nil && s.prefix == nil && full > 0:
		c.clock++
		e = &prefixEntry{group: s.prefixID, blocks: full, refs: 1, stamp: c.clock}
		c.prefixes[s.prefixID] = e
		c.entries[e] = struct{}{}
		s.blocks -= full
		s.shared, s.prefix = full, e
	case e != nil && s.prefix == e && s.shared == e.blocks && full > e.blocks:
		d := full - e.blocks
		e.blocks += d
		s.blocks -= d
		s.shared += d
	}
}

// preempt evicts a running sequence back to the front of the queue; it will
// recompute its prompt and the tokens generated so far (vLLM V1 and SGLang
// both recompute rather than swap). vLLM keeps the sequence's computed
// blocks in its prefix cache until they are needed, so what was not
// evicted by re-admission is not computed again; SGLang frees them.
func (c *core) preempt(s *seq) {
	own := s.computed/c.bs - s.shared
	if c.cfg.PrefixCaching && c.cfg.Engine == engine.VLLM && own > 0 && own <= s.blocks {
		c.usedBlocks -= s.blocks - own
		s.blocks = 0
		s.ownBase = s.shared
		c.unborrow(s)
		c.cacheOwn(s, own)
	} else {
		c.release(s)
	}
	s.computed, s.looked, s.ownTaken = 0, false, 0
	c.remainOut -= s.maxOut - s.generated
	c.preemptions++
	if c.head > 0 {
		c.head--
		c.waiting[c.head] = s
		return
	}
	c.waiting = append([]*seq{s}, c.waiting...)
}

// popWaiting removes the head of the queue.
func (c *core) popWaiting() {
	c.waiting[c.head] = nil
	c.head++
	if c.head == len(c.waiting) {
		c.waiting, c.head = c.waiting[:0], 0
	} else if c.head > 1024 && c.head*2 > len(c.waiting) {
		n := copy(c.waiting, c.waiting[c.head:])
		clear(c.waiting[n:])
		c.waiting, c.head = c.waiting[:n], 0
	}
}

// admit moves the head of the queue, whose blocks are allocated, to the
// running requests.
func (c *core) admit(s *seq) {
	c.popWaiting()
	c.running = append(c.running, s)
	c.remainOut += s.maxOut - s.generated
	s.ownTaken = 0
}

// addToShape accounts n tokens of s in the step being planned.
func (c *core) addToShape(b *batchShape, s *seq, n int) {
	s.sched = n
	c.scheduled = append(c.scheduled, s)
	b.tokens += n
	b.seqs++
	if s.computed+n == s.target() {
		b.sampled++
	}
	w := c.cfg.Deviation.attentionWeight(s.computed + n) // 1 unless the engine deviates
	if n == 1 && s.computed >= s.prompt {
		b.decodeCtx += w * float64(s.computed+1)
		return
	}
	b.prefillTokens += n
	b.prefillPairs += w * float64(n) * (float64(s.computed) + float64(n+1)/2)
	b.prefillKV += w * float64(s.computed+n)
}

// schedule plans the next step and returns its shape and duration in
// seconds. A zero shape means nothing can run.
func (c *core) schedule() (batchShape, float64) {
	c.scheduled = c.scheduled[:0]
	var b batchShape
	if c.cfg.Engine == engine.SGLang && !c.cfg.MixedChunk {
		c.scheduleSGLang(&b)
	} else {
		c.scheduleVLLM(&b)
	}
	c.stepSecs = c.sm.stepSeconds(b)
	c.steps++
	return b, c.stepSecs
}

// scheduleVLLM is vLLM V1's scheduler: running requests first (decodes and
// unfinished chunked prefills) under the token budget, preempting the
// lowest-priority (latest) running request when KV blocks run out; then, if
// nothing was preempted, waiting requests in FCFS order while seats, budget
// and blocks last.
func (c *core) scheduleVLLM(b *batchShape) {
	budget := c.cfg.MaxBatchedTokens
	preempted := false
	for i := 0; i < len(c.running) && budget > 0; i++ {
		s := c.running[i]
		rem := s.target() - s.computed
		n := min(rem, budget)
		ok := true
		for !c.allocate(s, s.computed+n, 0) {
			victim := c.running[len(c.running)-1]
			c.running = c.running[:len(c.running)-1]
			c.preempt(victim)
			preempted = true
			if victim == s {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		c.addToShape(b, s, n)
		budget -= n
	}
	if preempted {
		return
	}
	for c.head < len(c.waiting) && len(c.running) < c.maxSeqs && budget > 0 && c.cfg.Deviation.admits(c.steps, len(c.running)) {
		s := c.waiting[c.head]
		c.lookupPrefix(s)
		rem := s.target() - s.computed
		n := min(rem, budget)
		if !c.cfg.ChunkedPrefill && n < rem {
			c.undoPrefix(s)
			break
		}
		if !c.allocate(s, s.computed+n, 0) {
			c.undoPrefix(s)
			break
		}
		c.admit(s)
		c.addToShape(b, s, n)
		budget -= n
	}
}

// scheduleSGLang is SGLang's default scheduler: a prefill batch whenever new
// requests can be admitted (the unfinished chunked request first, then the
// queue, up to the chunk size and max_prefill_tokens, keeping blocks for
// the running requests' future output), otherwise one decode step of every
// running request, retracting the latest requests when the pool runs out.
func (c *core) scheduleSGLang(b *batchShape) {
	budget := c.cfg.MaxBatchedTokens
	if !c.cfg.ChunkedPrefill {
		budget = c.cfg.MaxPrefillTokens
	}
	reserve := int(math.Ceil(float64(c.remainOut) * sglangNewTokenRatio / float64(c.bs)))
	// Unfinished chunked prefills continue first.
	for _, s := range c.running {
		if rem := s.target() - s.computed; rem > 1 && budget > 0 {
			n := min(rem, budget)
			if !c.allocate(s, s.computed+n, 0) {
				break
			}
			c.addToShape(b, s, n)
			budget -= n
		}
	}
	for c.head < len(c.waiting) && len(c.running) < c.maxSeqs && budget > 0 && c.cfg.Deviation.admits(c.steps, len(c.running)) {
		s := c.waiting[c.head]
		c.lookupPrefix(s)
		rem := s.target() - s.computed
		n := min(rem, budget)
		if !c.cfg.ChunkedPrefill {
			// Without chunking a prompt runs whole; a long one runs alone.
			if n < rem && b.tokens > 0 {
				c.undoPrefix(s)
				break
			}
			n = rem
		}
		if !c.allocate(s, s.computed+n, reserve) {
			c.undoPrefix(s)
			break
		}
		c.admit(s)
		c.addToShape(b, s, n)
		budget -= n
		reserve += int(float64(s.maxOut-s.generated) * sglangNewTokenRatio / float64(c.bs))
	}
	if b.tokens > 0 {
		return
	}
	for i := 0; i < len(c.running); i++ {
		s := c.running[i]
		ok := true
		for !c.allocate(s, s.target(), 0) {
			victim := c.running[len(c.running)-1]
			c.running = c.running[:len(c.running)-1]
			c.preempt(victim)
			if victim == s {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		c.addToShape(b, s, s.target()-s.computed)
	}
}

// commit applies the planned step: scheduled tokens enter the cache, each
// sequence that reached its target samples a token (emit), and finished
// sequences leave, freeing their blocks.
func (c *core) commit(now float64, emit emitFunc) {
	finished := 0
	for _, s := range c.scheduled {
		if !s.scheduledYet {
			// Queued until the step started (now is its end).
			s.scheduledYet = true
			s.queuedFor = max(0, now-c.stepSecs-s.arrival)
		}
		s.computed += s.sched
		c.promptTokens += int64(min(s.sched, max(0, s.prompt-(s.computed-s.sched))))
		s.sched = 0
		c.cachePrefix(s)
		if s.computed < s.target() {
			continue
		}
		s.generated++
		c.genTokens++
		c.remainOut--
		if s.generated == 1 {
			s.firstAt = now
		}
		last := s.generated >= s.maxOut
		if last {
			s.done = true
			c.release(s)
			finished++
		}
		emit(s, last)
	}
	c.scheduled = c.scheduled[:0]
	if finished > 0 {
		kept := c.running[:0]
		for _, s := range c.running {
			if !s.done {
				kept = append(kept, s)
			}
		}
		clear(c.running[len(kept):])
		c.running = kept
	}
}

// abort removes a sequence (client went away) wherever it is.
func (c *core) abort(s *seq) {
	if s.done {
		return
	}
	s.done = true
	for i, r := range c.running {
		if r == s {
			c.release(s)
			c.remainOut -= s.maxOut - s.generated
			c.running = append(c.running[:i], c.running[i+1:]...)
			return
		}
	}
	for i := c.head; i < len(c.waiting); i++ {
		if c.waiting[i] == s {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			if s.own != nil {
				c.dropEntry(s.own)
			}
			return
		}
	}
}

// kvUsage is the share of KV blocks held by requests, as the engines report
// it (vllm:kv_cache_usage_perc, sglang:token_usage): a cached prefix that no
// running request uses is free to them, since it is evicted as soon as its
// blocks are needed (vLLM's block pool counts such blocks in its free queue;
// SGLang's radix cache counts them evictable). Counting them as used would
// show a cache "full" of nothing but reusable prefixes.
func (c *core) kvUsage() float64 {
	if c.totalBlocks == 0 {
		return 0
	}
	return float64(c.usedBlocks-c.evictable) / float64(c.totalBlocks)
}

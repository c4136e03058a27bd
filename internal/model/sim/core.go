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
	// groupTokens > 0: the prefix's first groupTokens tokens are prefix
	// group groupID's, shared with the other prefixes of the group (a
	// system prompt; measure.Request.GroupTokens).
	groupID     int
	groupTokens int
	// ids are the prompt's token ids (the server's tokenizer); nil when
	// only lengths are known, and the content is then the prefix group's
	// for its first prefixTokens tokens and the sequence's own (uid)
	// after (tokenAt).
	ids    []int
	uid    uint64
	hashes []uint64 // hashes[k] identifies the content up to the end of page k (pageHash)
	// own[k] is the cached page of the sequence's own page k (ownPage),
	// which no other sequence's content hashes to: the cache keeps such
	// pages here rather than in the core's table, where only this
	// sequence, preempted and re-admitted, would look them up.
	own       []*page
	generated int
	computed  int     // tokens whose KV is in the cache
	blocks    int     // KV blocks this sequence holds beyond its pages
	pages     []*page // its full pages, in order: shared hits, then those it computed
	pinned    bool    // pages are referenced (false while a lookup's hits are only found)
	looked    bool    // prefix cache consulted since (re)admission
	sched     int     // tokens scheduled in the current step
	done      bool
	arrival   float64 // engine clock, seconds
	firstAt   float64
	queuedFor float64 // seconds spent waiting before first scheduled
	// scheduledYet: the sequence has been in a step.
	scheduledYet bool
	// remote is the tokens whose KV a prefill engine computed and this
	// (decode) engine received (disagg.go): they count as computed when
	// the sequence is admitted, as prefix hits do. The engines leave the
	// prompt's last token to compute, for its logits (vLLM's KV cache
	// manager caps a hit at the prompt less one token).
	remote int
	// filters: the request samples with a top-p or top-k (its own, or
	// the server's defaults), which vLLM's native sampler sorts the
	// vocabulary for (Config.SamplerSort).
	filters bool
	// private: nothing of the content is shared with another sequence
	// (Replica.Add), so its pages are not cached: only this sequence,
	// preempted and re-admitted, could hit them.
	private bool
	// watch is the measured phase that saw the sequence's last token, at
	// watchPrev (engineWatch.token); nil before its first or after its
	// last.
	watch     *engineWatch
	watchPrev float64
}

// target is how many tokens must be in the cache before the next token is
// sampled: the prompt and every token generated so far (the last one is
// processed by the decode step that samples the next).
func (s *seq) target() int { return s.prompt + s.generated }

// page is one full page of cached KV: pageTokens tokens of a sequence's
// content (pageBlocks KV blocks), identified by a hash chained on the
// previous page's (vLLM's block hash: hash(parent, tokens)), so two
// sequences share a page only when everything up to its end is equal.
// A page referenced by no sequence stays cached in the free queue until
// evicted, least recently freed first.
type page struct {
	hash       uint64
	refs       int
	cached     bool  // in the hash table; a copy computed beside a cached one is not
	prev, next *page // the free queue, while refs == 0 and cached
	// own: a page of owner's own content (core.ownPage), cached in
	// owner.own[idx] rather than in the table, and hashed by nothing
	// (hash is 0): only owner looks it up, by its index.
	own   bool
	owner *seq
	idx   int
}

// emitFunc receives each step's sampled tokens of a sequence: s produced
// one token at the end of the step (several under speculative decoding:
// s.generated counts them all); finished says the last was its last.
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
	usedBlocks  int // includes cached pages no sequence references
	evictable   int // blocks of the pages in the free queue
	running     []*seq
	waiting     []*seq
	head        int // waiting[head:] is the queue
	// The prefix cache: full pages by content hash, and the free queue of
	// those no sequence references, least recently freed at its head.
	pageTokens, pageBlocks int
	table                  map[uint64]*page
	ownCached              int // own pages cached (seq.own), beside the table's
	freeHead, freeTail     *page
	spare                  []*page // pages no longer in use, for reuse
	slab                   []page  // pages never used yet, allocated together
	outIDs                 []int   // the token ids of outputWords
	uids                   uint64  // sequences added, for their own content
	steps                  uint64  // steps planned (Deviation.AdmitEvery)
	scheduled              []*seq
	stepSecs               float64 // duration of the step planned by schedule
	// endsAt is when the step planned last ends (engine clock): under
	// async scheduling a step that starts then was planned when that one
	// started (schedule).
	endsAt    float64
	remainOut int // sum over running of output tokens still to generate (SGLang admission)
	// Speculative decoding (speculative.go): drafts per step (0: off), tokens
	// verified per sequence, the drafts' acceptance rate.
	specK, specVerify int
	specAccept        float64

	// Counters for /metrics.
	preemptions   int64
	prefixQueries int64
	prefixHits    int64
	promptTokens  int64
	genTokens     int64
	// Speculative decoding's, as vLLM counts them: drafts verified (one
	// per sequence and step), draft tokens in them, those accepted, and
	// those accepted at each position.
	specDrafts, specDraftTokens, specAccepted int64
	specAcceptedAt                            []int64

	// spans is the windowed layers' share of a request's blocks
	// (hybrid.go); nil when every layer's cache grows.
	spans *spanBlocks
	// stateBlocks is the blocks a request's linear-attention states
	// take under vLLM (linear.go, linearGroups).
	stateBlocks int
	// prefixCache: a request's cached prefix is found and reused
	// (prefix caching on, and no linear-attention layer whose state at
	// the prefix's end is lost; linear.go).
	prefixCache bool
}

// pageTokensMin is the fewest tokens a cache page holds: the engine's
// block size (vLLM: 16) when it is at least this, else the multiple of it
// that reaches it. SGLang's radix tree matches single tokens (page size
// 1); matching whole pages of 16 keeps the model's table small and moves
// a hit by at most 15 tokens.
const pageTokensMin = 16

func newCore(cfg Config, est MemoryEstimate) *core {
	bs := max(1, cfg.BlockSize)
	pb := (pageTokensMin + bs - 1) / bs
	c := &core{
		cfg:         cfg,
		sm:          newStepModel(cfg),
		bs:          bs,
		maxSeqs:     est.MaxRunningRequests,
		totalBlocks: est.KVBlocks,
		pageBlocks:  pb,
		pageTokens:  pb * bs,
		table:       map[uint64]*page{},
		spans:       newSpanBlocks(cfg, bs),
		stateBlocks: cfg.linearGroups(),
		prefixCache: cfg.PrefixCaching && cfg.Model.Linear == nil,
	}
	c.sm.tw = new(twMemo)
	if cfg.specOn() {
		c.specK, c.specVerify, c.specAccept = cfg.SpecTokens, cfg.SpecVerify, cfg.SpecAcceptance
		c.specAcceptedAt = make([]int64, cfg.SpecTokens)
	}
	for _, w := range outputWords {
		c.outIDs = append(c.outIDs, TokenIDs(w, cfg.Model.Vocab)[0])
	}
	return c
}

// waitingCount is the number of requests waiting for a seat.
func (c *core) waitingCount() int { return len(c.waiting) - c.head }

// active is the number of running requests that have not finished. A
// request finished in the step now running keeps its seat until the next
// step is planned (holdsFinished), but vLLM's running gauge and its
// load counts come after the step's result frees it, so it is not
// counted here.
func (c *core) active() int {
	n := 0
	for _, s := range c.running {
		if !s.done {
			n++
		}
	}
	return n
}

// load is the number of requests the core holds, for routing.
func (c *core) load() int { return c.active() + c.waitingCount() }

// idle reports whether the core has nothing to do: no request, and none
// finished still to free.
func (c *core) idle() bool { return len(c.running)+c.waitingCount() == 0 }

// add queues a new request.
func (c *core) add(s *seq) {
	c.cfg.Deviation.sharePrefix(s)
	c.uids++
	s.uid = c.uids
	c.waiting = append(c.waiting, s)
}

// blocksFor is the number of blocks holding n tokens.
func (c *core) blocksFor(n int) int { return (n + c.bs - 1) / c.bs }

// held is the number of KV blocks s holds or, with its hits found and not
// yet pinned, will hold.
func (c *core) held(s *seq) int { return len(s.pages)*c.pageBlocks + s.blocks }

// allocate grows s's blocks to hold n tokens (and their windowed
// layers' share, hybrid.go), evicting free cached pages
// (least recently freed first) when the free pool is short. reserve
// blocks must stay free afterwards. A sequence's hits found by
// lookupPrefix are pinned here, once the allocation is sure to succeed:
// those that sit in the free queue cannot also be evicted for it (vLLM's
// allocate_slots counts them apart the same way).
func (c *core) allocate(s *seq, n, reserve int) bool {
	need := c.blocksFor(n) + c.boundedBlocks(n) - c.held(s)
	if need <= 0 {
		c.pin(s)
		return true
	}
	free := c.totalBlocks - c.usedBlocks
	avail := free + c.evictable
	if !s.pinned {
		for _, p := range s.pages {
			if p.refs == 0 {
				avail -= c.pageBlocks
			}
		}
	}
	if need+reserve > avail {
		return false
	}
	c.pin(s)
	if short := need + reserve - free; short > 0 {
		c.evict(short)
	}
	c.usedBlocks += need
	s.blocks += need
	return true
}

// pin takes a reference on each of s's pages (its hits).
func (c *core) pin(s *seq) {
	if s.pinned {
		return
	}
	s.pinned = true
	for _, p := range s.pages {
		if p.refs == 0 {
			c.unqueue(p)
		}
		p.refs++
	}
}

// enqueue puts a page no sequence references at the tail of the free
// queue; unqueue takes it out (a hit, or its eviction). Finished and
// preempted requests free into the one queue, as vLLM's free block queue
// does.
func (c *core) enqueue(p *page) {
	p.prev, p.next = c.freeTail, nil
	if c.freeTail != nil {
		c.freeTail.next = p
	} else {
		c.freeHead = p
	}
	c.freeTail = p
	c.evictable += c.pageBlocks
}

func (c *core) unqueue(p *page) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		c.freeHead = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		c.freeTail = p.prev
	}
	p.prev, p.next = nil, nil
	c.evictable -= c.pageBlocks
}

// evict frees at least n blocks of cached pages no sequence references,
// from the head of the free queue (the least recently freed; vLLM's free
// block queue, SGLang's LRU leaves), or all of them.
func (c *core) evict(n int) {
	for n > 0 && c.freeHead != nil {
		p := c.freeHead
		c.unqueue(p)
		if p.own {
			c.ownCached--
		} else {
			delete(c.table, p.hash)
		}
		p.cached = false
		c.usedBlocks -= c.pageBlocks
		n -= c.pageBlocks
		c.spare = append(c.spare, p) // referenced by no sequence: reused
	}
}

// resetCache forgets every cached page (vLLM's POST /reset_prefix_cache):
// free ones are freed, and those running sequences reference stay theirs,
// no longer found by a lookup and freed when released.
func (c *core) resetCache() {
	c.evict(c.evictable)
	for h, p := range c.table {
		p.cached = false
		delete(c.table, h)
	}
	// Every page a sequence references is a running one's (release).
	for _, s := range c.running {
		for _, p := range s.pages {
			if p.own && p.cached {
				p.cached = false
				c.ownCached--
			}
		}
	}
}

// findable reports whether a lookup of p's hash finds p: the table's
// entry, or its owner's own page.
func (c *core) findable(p *page) bool {
	if !p.own {
		return c.table[p.hash] == p
	}
	own := p.owner.own
	return p.cached && p.idx < len(own) && own[p.idx] == p
}

// cachedCount is the number of pages a lookup finds.
func (c *core) cachedCount() int { return len(c.table) + c.ownCached }

// ownPage reports whether s's page k is the sequence's own content: its
// hash chains on s.uid (pageHash), so no other sequence's page has it.
func (c *core) ownPage(s *seq, k int) bool {
	return s.ids == nil && !(s.prefixID >= 0 && (k+1)*c.pageTokens <= s.prefixTokens)
}

// cachedPage is the cached page of s's page k, or nil: the table's entry
// of its hash, or for an own page the one s cached as its k-th (a page
// evicted and reused is another's, or s's at another index).
func (c *core) cachedPage(s *seq, k int) *page {
	if !c.ownPage(s, k) {
		return c.table[c.pageHash(s, k)]
	}
	if k < len(s.own) {
		if p := s.own[k]; p != nil && p.cached && p.owner == s && p.idx == k {
			return p
		}
	}
	return nil
}

// release drops s's blocks: its private ones are freed, its pages lose a
// reference, and a cached page no one references joins the free queue,
// the sequence's last page first (vLLM frees a request's blocks in
// reverse, so its tail is evicted before the prefix others may share).
// A page that is not cached is freed.
func (c *core) release(s *seq) {
	c.usedBlocks -= s.blocks
	s.blocks = 0
	if s.pinned {
		for i := len(s.pages) - 1; i >= 0; i-- {
			p := s.pages[i]
			p.refs--
			if p.refs > 0 {
				continue
			}
			if p.cached {
				c.enqueue(p)
			} else {
				c.usedBlocks -= c.pageBlocks
				c.spare = append(c.spare, p)
			}
		}
	}
	clear(s.pages)
	s.pages, s.pinned = s.pages[:0], false
}

// Content and hashing. A token is an id of the server's tokenizer, or,
// when only lengths are known, a synthetic one: the prefix's group's
// i-th token (a shared system prompt), the prefix group's i-th token, or
// the sequence's own.
const (
	hashSeed      = 0x6a09e667f3bcc908
	prefixTokenNS = 0x510e527fade682d1
	ownTokenNS    = 0x9b05688c2b3e6c1f
	groupTokenNS  = 0x3c6ef372fe94f82b
)

// mix64 chains x onto h (splitmix64's finalizer over both).
func mix64(h, x uint64) uint64 {
	z := h ^ (x + 0x9e3779b97f4a7c15 + h<<6 + h>>2)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// tokenAt is the token at position i of s's content: the prompt, then
// the tokens it generated (outputText's words, as the server sends them).
func (c *core) tokenAt(s *seq, i int) uint64 {
	switch {
	case s.prefixID >= 0 && i < s.groupTokens:
		return mix64(mix64(groupTokenNS, uint64(s.groupID)), uint64(i))
	case s.prefixID >= 0 && i < s.prefixTokens:
		return mix64(mix64(prefixTokenNS, uint64(s.prefixID)), uint64(i))
	case s.ids != nil && i < len(s.ids):
		return uint64(s.ids[i])
	case s.ids != nil && i >= s.prompt:
		return uint64(c.outIDs[(i-s.prompt)%len(c.outIDs)])
	}
	return mix64(mix64(ownTokenNS, s.uid), uint64(i))
}

// pageHash is the hash of s's page k, chained on page k-1's. Without
// token ids a page is the prefix group's k-th or, when any of its tokens
// is the sequence's own, the sequence's own k-th: hashed as one token
// each, the same keys as tokenAt's tokens give, faster.
func (c *core) pageHash(s *seq, k int) uint64 {
	if s.hashes == nil {
		s.hashes = make([]uint64, 0, (s.prompt+s.maxOut)/c.pageTokens+1)
	}
	for len(s.hashes) <= k {
		j := len(s.hashes)
		h := uint64(hashSeed)
		if j > 0 {
			h = s.hashes[j-1]
		}
		switch {
		case s.ids == nil && s.prefixID >= 0 && (j+1)*c.pageTokens <= s.groupTokens:
			h = mix64(h, mix64(mix64(groupTokenNS, uint64(s.groupID)), uint64(j)))
		case s.ids == nil && s.prefixID >= 0 && (j+1)*c.pageTokens <= s.prefixTokens:
			h = mix64(h, mix64(mix64(prefixTokenNS, uint64(s.prefixID)), uint64(j)))
		case s.ids == nil:
			h = mix64(h, mix64(mix64(ownTokenNS, s.uid), uint64(j)))
		default:
			for i := j * c.pageTokens; i < (j+1)*c.pageTokens; i++ {
				h = mix64(h, c.tokenAt(s, i))
			}
		}
		s.hashes = append(s.hashes, h)
	}
	return s.hashes[k]
}

// newPage returns a page of hash h with one reference, reusing a spare,
// else taking one of a slab: an engine makes pages by the hundred
// thousand, which one allocation each made the simulator's largest cost.
func (c *core) newPage(h uint64) *page {
	if n := len(c.spare); n > 0 {
		p := c.spare[n-1]
		c.spare = c.spare[:n-1]
		*p = page{hash: h, refs: 1}
		return p
	}
	if len(c.slab) == 0 {
		c.slab = make([]page, pageSlab)
	}
	p := &c.slab[0]
	c.slab = c.slab[1:]
	*p = page{hash: h, refs: 1}
	return p
}

// pageSlab is how many pages newPage allocates at once.
const pageSlab = 256

// lookupPrefix applies prefix cache hits to a sequence about to be
// admitted: the leading pages of its content (its prompt and, after a
// preemption, the tokens it generated) found in the cache count as
// computed. At least one token is always computed, as in the engines.
// The hits are pinned by allocate; undoPrefix forgets them.
func (c *core) lookupPrefix(s *seq) {
	if s.remote > 0 && !s.looked && s.computed == 0 {
		// The KV pulled from the prefill engine: its blocks are allocated
		// with the sequence's first step, like a hit's.
		s.looked = true
		c.prefixQueries += int64(s.prompt)
		s.computed = min(s.remote, s.prompt-1)
		c.prefixHits += int64(s.computed)
		return
	}
	if s.looked || !c.prefixCache || s.computed > 0 {
		return
	}
	s.looked = true
	c.prefixQueries += int64(s.prompt)
	limit := (s.target() - 1) / c.pageTokens // pages a hit may cover
	for k := 0; k < limit; k++ {
		p := c.cachedPage(s, k)
		if p == nil {
			break
		}
		s.pages = append(s.pages, p)
	}
	s.computed = len(s.pages) * c.pageTokens
	c.prefixHits += int64(s.computed)
}

// undoPrefix forgets what lookupPrefix found when admission fails.
func (c *core) undoPrefix(s *seq) {
	if !s.looked {
		return
	}
	c.prefixHits -= int64(s.computed)
	c.prefixQueries -= int64(s.prompt)
	if !s.pinned {
		clear(s.pages)
		s.pages = s.pages[:0]
	}
	s.computed, s.looked = 0, false
}

// cachePages turns the full pages s has computed into cache pages (vLLM
// caches each block once it is full, prompt and generated tokens alike;
// SGLang inserts a request's prompt into its radix tree after prefill and
// what it generated when it finishes, finished set). A page whose hash is
// already cached (computed by another sequence alongside) stays this
// sequence's own copy, as vLLM keeps both.
func (c *core) cachePages(s *seq, finished bool) {
	if !c.prefixCache || s.private {
		return
	}
	upto := s.computed
	if c.cfg.Engine == engine.SGLang && !finished {
		upto = min(upto, s.prompt)
	}
	if s.pages == nil {
		s.pages = make([]*page, 0, (s.prompt+s.maxOut)/c.pageTokens+1)
	}
	for k := len(s.pages); k < upto/c.pageTokens; k++ {
		own := c.ownPage(s, k)
		var h uint64
		if !own {
			h = c.pageHash(s, k)
		}
		p := c.newPage(h)
		switch {
		case c.cachedPage(s, k) != nil:
			// A copy beside the cached page.
		case own:
			p.cached, p.own, p.owner, p.idx = true, true, s, k
			c.ownCached++
			if s.own == nil {
				s.own = make([]*page, 0, cap(s.pages))
			}
			for len(s.own) <= k {
				s.own = append(s.own, nil)
			}
			s.own[k] = p
		default:
			p.cached = true
			c.table[h] = p
		}
		s.blocks -= c.pageBlocks
		s.pages = append(s.pages, p)
	}
}

// preempt evicts a running sequence back to the front of the queue; it will
// recompute its prompt and the tokens generated so far (vLLM V1 and SGLang
// both recompute rather than swap). Its cached pages stay in the cache
// until evicted, so re-admission finds what was not: vLLM's every full
// block, SGLang's prompt (a retracted request frees what it generated).
func (c *core) preempt(s *seq) {
	c.release(s)
	s.computed, s.looked = 0, false
	s.remote = 0 // the pulled KV is gone: it recomputes
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
}

// addToShape accounts n tokens of s in the step being planned.
func (c *core) addToShape(b *batchShape, s *seq, n int) {
	s.sched = n
	c.scheduled = append(c.scheduled, s)
	b.tokens += n
	b.seqs++
	if s.computed+n == s.target() {
		b.sampled++
		b.filtered = b.filtered || s.filters
	}
	if s.computed+n == s.target() && c.specK > 0 {
		b.drafting++
		b.draftCtx += float64(s.computed + n)
	}
	w := c.cfg.Deviation.attentionWeight(s.computed + n) // 1 unless the engine deviates
	if n == 1 && s.computed >= s.prompt {
		b.decodes++
		b.decodeCtx += w * float64(s.computed+1)
		if v := c.ahead(s, n); v > 0 { // verify the drafts: every one sampled
			b.tokens += c.specVerify - 1
			b.sampled += c.specVerify - 1
			b.verifyCtx += w * float64(c.specVerify-1) * float64(s.computed+1)
		}
		return
	}
	b.prefillTokens += n
	b.prefillPairs += w * float64(n) * (float64(s.computed) + float64(n+1)/2)
	b.prefillKV += w * float64(s.computed+n)
}

// ahead is the KV slots beyond n tokens that s's step writes: the drafts
// a decode step verifies (vLLM's lookahead slots), 0 otherwise.
func (c *core) ahead(s *seq, n int) int {
	if c.specK == 0 || n != 1 || s.computed < s.prompt {
		return 0
	}
	return c.specVerify - 1
}

// schedule plans the step starting at now (engine clock, seconds) and
// returns its shape and duration in seconds. A zero shape means nothing
// can run.
//
// Under vLLM's async scheduling the engine core keeps two steps in flight
// (vllm/v1/engine/core.py, step_with_batch_queue, with the executor's
// max_concurrent_batches of 2): it plans step N+1 as soon as step N is
// launched, and only then blocks on step N's result. A request that
// arrives while step N runs therefore waits for step N+1, planned
// without it, and joins step N+2: one step more than a synchronous
// engine, for every request that arrives while the engine is busy. When
// the engine was idle, or step N+1 would be empty, nothing was planned
// ahead and the request joins the next step.
//
// SGLang's overlap scheduler does the same (scheduler.py,
// event_loop_overlap, sgl-project/sglang at
// d51c1c21d1ac07cd5d1de9ead6c99087d8428e79; the loop of PR #2067, v0.4):
// each pass receives the new requests, plans and launches the next batch,
// and only then waits for the batch before it and processes its result.
// The pass that plans batch N+1 starts when batch N-1's result is in, that
// is when batch N starts on the GPU, so a request that arrives while batch
// N runs is received by the pass that plans batch N+2. When the last pass
// launched nothing (the scheduler was idle) it is received at once.
func (c *core) schedule(now float64) (batchShape, float64) {
	var b batchShape
	c.plan(&b, now)
	c.retime(now, c.sm.stepSeconds(b))
	return b, c.stepSecs
}

// plan is schedule without the step's timing: it picks the step's batch
// (b, which it clears first) and counts the step; retime sets when it
// ends.
func (c *core) plan(b *batchShape, now float64) {
	if c.idle() {
		// Nothing to free or schedule (a data-parallel rank in a
		// step of the others'): the empty step, counted.
		*b = batchShape{}
		c.scheduled = c.scheduled[:0]
		c.steps++
		return
	}
	*b = batchShape{}
	c.scheduled = c.scheduled[:0]
	cutoff := math.Inf(1) // the latest arrival this step may admit
	if (c.sm.async || c.sm.overlap) && c.steps > 0 && now <= c.endsAt+1e-9 {
		cutoff = now - c.stepSecs
	}
	// Requests the last step finished are freed before this one is
	// planned, unless it was planned while that step ran (holdsFinished);
	// then they are freed after, and if it would be empty without them
	// the engine took the result first and plans it again.
	hold := c.holdsFinished() && c.steps > 0 && now <= c.endsAt+1e-9
	if !hold {
		c.dropFinished()
	}
	if c.cfg.Engine == engine.SGLang && !c.cfg.MixedChunk {
		c.scheduleSGLang(b, cutoff)
	} else {
		c.scheduleVLLM(b, cutoff)
	}
	if hold {
		n := len(c.running)
		c.dropFinished()
		if b.tokens == 0 && len(c.running) < n {
			c.scheduled = c.scheduled[:0]
			c.scheduleVLLM(b, cutoff)
		}
	}
	c.steps++
}

// retime sets the duration of the step just planned to secs, from now:
// its own step time (schedule), or, for a data-parallel rank that steps
// with the others, the group's (virtualRun.startLockstep).
func (c *core) retime(now, secs float64) {
	c.stepSecs = secs
	c.endsAt = now + secs
}

// scheduleVLLM is vLLM V1's scheduler: running requests first (decodes and
// unfinished chunked prefills) under the token budget, preempting the
// lowest-priority (latest) running request when KV blocks run out; then, if
// nothing was preempted, waiting requests in FCFS order while seats, budget
// and blocks last, those that arrived after cutoff only into a step that
// has nothing else (schedule).
func (c *core) scheduleVLLM(b *batchShape, cutoff float64) {
	if c.cfg.V0Scheduler && !c.cfg.ChunkedPrefill && c.scheduleV0Prefills(b) {
		return
	}
	budget := c.cfg.MaxBatchedTokens
	preempted := false
	for i := 0; i < len(c.running) && budget > 0; i++ {
		s := c.running[i]
		if s.done {
			continue // finished in the step running now (holdsFinished)
		}
		rem := s.target() - s.computed
		n := min(rem, budget)
		ok := true
		for !c.allocate(s, s.computed+n+c.ahead(s, n), 0) {
			victim := c.running[len(c.running)-1]
			c.running = c.running[:len(c.running)-1]
			if victim.done {
				c.release(victim) // its blocks were to be freed anyway
				continue
			}
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
		budget -= n + c.ahead(s, n)
	}
	if preempted {
		return
	}
	for c.head < len(c.waiting) && len(c.running) < c.maxSeqs && budget > 0 && c.cfg.Deviation.admits(c.steps, len(c.running)) {
		s := c.waiting[c.head]
		if s.arrival > cutoff && len(c.scheduled) > 0 {
			break // came after this step was planned (schedule)
		}
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

// scheduleV0Prefills is vLLM V0's default scheduler without chunked
// prefill (vllm/core/scheduler.py, Scheduler._schedule_default; at
// commit 0054e1fa0f8ac79f0524b6b1f4d7c02f9e37eca1 of
// vllm-project/vllm, the same through the V0 releases, 0.6 among
// them): it schedules waiting prompts first, whole, in FCFS order while
// the token budget (max_num_batched_tokens), the seats (max_num_seqs,
// running requests included) and the KV blocks last, and when it
// scheduled any it runs no decodes in that step ("Don't schedule
// decodes if prefills are scheduled"). It reports whether it scheduled
// a prompt; if not, the running requests decode (scheduleVLLM).
func (c *core) scheduleV0Prefills(b *batchShape) bool {
	budget := c.cfg.MaxBatchedTokens
	for c.head < len(c.waiting) && len(c.running) < c.maxSeqs && c.cfg.Deviation.admits(c.steps, len(c.running)) {
		s := c.waiting[c.head]
		c.lookupPrefix(s)
		rem := s.target() - s.computed
		if rem > budget || !c.allocate(s, s.computed+rem, 0) {
			c.undoPrefix(s)
			break
		}
		c.admit(s)
		c.addToShape(b, s, rem)
		budget -= rem
	}
	return b.tokens > 0
}

// scheduleSGLang is SGLang's default scheduler: a prefill batch whenever new
// requests can be admitted (the unfinished chunked request first, then the
// queue, up to the chunk size and max_prefill_tokens, keeping blocks for
// the running requests' future output), otherwise one decode step of every
// running request, retracting the latest requests when the pool runs out.
// Requests that arrived after cutoff were not yet received when the step
// was planned (schedule): they wait unless the step would be empty.
func (c *core) scheduleSGLang(b *batchShape, cutoff float64) {
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
		if s.arrival > cutoff && (len(c.scheduled) > 0 || len(c.running) > 0) {
			break // came after this step was planned (schedule)
		}
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
		for !c.allocate(s, s.target()+c.ahead(s, s.target()-s.computed), 0) {
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
		verified := c.ahead(s, s.sched) > 0
		s.computed += s.sched
		c.promptTokens += int64(min(s.sched, max(0, s.prompt-(s.computed-s.sched))))
		s.sched = 0
		if s.computed < s.target() {
			c.cachePages(s, false)
			continue
		}
		m := 1 // tokens sampled
		if verified {
			m += c.verify(s)
		}
		c.cachePages(s, false)
		s.generated += m
		c.genTokens += int64(m)
		c.remainOut -= m
		if s.generated == m {
			s.firstAt = now
		}
		last := s.generated >= s.maxOut
		if last {
			s.done = true
			c.cachePages(s, true)
			finished++
		}
		emit(s, last)
	}
	c.scheduled = c.scheduled[:0]
	if finished > 0 && !c.holdsFinished() {
		c.dropFinished()
	}
}

// holdsFinished reports whether a request that finished in a step keeps
// its seat and its KV blocks while the next step is planned: vLLM's
// async scheduling plans step N+1 before it takes step N's result
// (schedule), and only that result (the scheduler's update_from_output)
// frees the requests N finished, so the step planned meanwhile counts
// them among the running requests against max_num_seqs and their blocks
// as used (vllm/v1/core/sched/scheduler.py at
// b4622cf924bc72504aed99e486062d6633fde39e of vllm-project/vllm: the
// running loop skips a request whose previous step reached max_tokens,
// and the waiting loop stops when len(self.running) reaches
// max_num_running_reqs). SGLang's overlap loop and vLLM's V0 scheduler
// are left as they were.
func (c *core) holdsFinished() bool {
	return c.sm.async && !c.cfg.V0Scheduler
}

// dropFinished frees the finished requests still among the running ones.
func (c *core) dropFinished() {
	i := 0
	for i < len(c.running) && !c.running[i].done {
		i++ // most steps finish none: nothing to move
	}
	if i == len(c.running) {
		return
	}
	kept := c.running[:i]
	for _, s := range c.running[i:] {
		if s.done {
			c.release(s)
			continue
		}
		kept = append(kept, s)
	}
	clear(c.running[len(kept):])
	c.running = kept
}

// verify accepts s's drafts of the step just run (specAccepted), no more
// than its output has room for; their KV stays in the cache. It returns
// the drafts accepted.
func (c *core) verify(s *seq) int {
	j := specAccepted(s, c.specK, c.specAccept)
	c.specDrafts++
	c.specDraftTokens += int64(c.specK)
	c.specAccepted += int64(j)
	for i := range j {
		c.specAcceptedAt[i]++
	}
	j = min(j, s.maxOut-s.generated-1)
	s.computed += j
	return j
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
			return
		}
	}
}

// abortAll removes every request (a phase given up, virtualRun.giveUp):
// each frees its blocks as at its end, its cached pages joining the free
// queue, and the step planned last is forgotten.
func (c *core) abortAll() {
	for _, s := range c.running {
		if !s.done {
			s.done = true
			c.remainOut -= s.maxOut - s.generated
		}
		c.release(s)
	}
	clear(c.running)
	c.running = c.running[:0]
	for _, s := range c.waiting[c.head:] {
		s.done = true
		c.release(s) // holds no block: preempted ones freed theirs
	}
	clear(c.waiting)
	c.waiting, c.head = c.waiting[:0], 0
	clear(c.scheduled)
	c.scheduled = c.scheduled[:0]
}

// kvUsage is the share of KV blocks held by requests, as the engines report
// it (vllm:kv_cache_usage_perc, sglang:token_usage): a cached page that no
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

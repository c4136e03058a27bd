package trace

// Token ids of built prompts lie in [tokenBase, tokenBase+tokenSpan): clear
// of the low ids tokenizers keep for special and byte tokens, and below
// every current vocabulary's size (32,000 and up).
const (
	tokenBase = 1000
	tokenSpan = 30000
)

// Stream domains keep a block's content, a request's own content and a
// conversation's apart even when their numbers coincide.
const (
	domainBlock uint64 = iota + 1
	domainUnique
	domainConversation
)

// Prompts builds each request's prompt as token ids, deterministic in seed.
// A request with hash ids is its blocks' contents in order (block id ->
// BlockSize tokens, the same for every request that names the id), cut to
// Input tokens, so prompts share prefixes exactly where the trace's hash ids
// do; tokens past its blocks, and every token of a request without hash
// ids, are the request's own.
func Prompts(reqs []Request, seed uint64) [][]int {
	out := make([][]int, len(reqs))
	blocks := map[int64][]int{}
	for i, q := range reqs {
		p := make([]int, 0, q.Input)
		if q.BlockSize > 0 {
			for _, id := range q.HashIDs {
				if len(p) >= q.Input {
					break
				}
				b, ok := blocks[id]
				if !ok {
					b = tokens(seed, domainBlock, uint64(id), q.BlockSize)
					blocks[id] = b
				}
				p = append(p, b[:min(len(b), q.Input-len(p))]...)
			}
		}
		if rest := q.Input - len(p); rest > 0 {
			p = append(p, tokens(seed, domainUnique, uint64(i), rest)...)
		}
		out[i] = p
	}
	return out
}

// Prompt is request i's prompt as Prompts builds it, built alone (its
// blocks drawn again rather than kept): a replay builds each prompt as it
// sends it, so memory holds the prompts in flight, not the trace's.
func Prompt(q Request, i int, seed uint64) []int {
	p := make([]int, 0, q.Input)
	if q.BlockSize > 0 {
		for _, id := range q.HashIDs {
			if len(p) >= q.Input {
				break
			}
			b := tokens(seed, domainBlock, uint64(id), min(q.BlockSize, q.Input-len(p)))
			p = append(p, b...)
		}
	}
	if rest := q.Input - len(p); rest > 0 {
		p = append(p, tokens(seed, domainUnique, uint64(i), rest)...)
	}
	return p
}

// tokens returns n token ids of the stream (seed, domain, id).
func tokens(seed, domain, id uint64, n int) []int {
	s := newStream(seed, domain, id)
	return s.tokens(n)
}

// newStream starts the token stream (seed, domain, id).
func newStream(seed, domain, id uint64) *splitmix {
	return &splitmix{mix(mix(seed^mix(domain)) ^ id)}
}

// tokens draws the stream's next n token ids.
func (r *splitmix) tokens(n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = tokenBase + int(r.next()%tokenSpan)
	}
	return t
}

// splitmix is SplitMix64: a tiny seeded stream, enough for token ids and
// cheap to start per block.
type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix(r.s)
}

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Shared counts, per request, the prompt tokens an earlier request of reqs
// already sent: what a prefix cache that kept everything could reuse. A
// block counts as far as an earlier prompt held it (the last block of a
// prompt may be partial), and only while the prompt so far was all sent
// before, as caches match prefixes.
func Shared(reqs []Request) []int {
	held := map[int64]int{} // block id -> the most of its tokens sent
	out := make([]int, len(reqs))
	for i, q := range reqs {
		prefix := true
		for j, id := range q.HashIDs {
			n := min(q.BlockSize, q.Input-j*q.BlockSize)
			if n <= 0 {
				break
			}
			if prefix {
				out[i] += min(n, held[id])
				prefix = held[id] >= n
			}
		}
		for j, id := range q.HashIDs {
			held[id] = max(held[id], min(q.BlockSize, q.Input-j*q.BlockSize))
		}
	}
	return out
}

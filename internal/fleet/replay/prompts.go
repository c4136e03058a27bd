package replay

import (
	"strings"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/load/trace"
	"github.com/servetune/servetune/internal/model/sim"
)

// The content a prompt's words are drawn from: a group's (a system
// prompt), a prefix's (a session or a trace's shared blocks), or the
// request's own.
const (
	domainGroup uint64 = iota + 1
	domainPrefix
	domainOwn
)

// span is an answer inside a prefix's content: n generated tokens from
// position start.
type span struct{ start, n int }

// prompts renders the fleet's requests as prompt text the simulated
// engine tokenizes to their lengths (one word, one token: trace.Text's
// words and sim.OutputWord are at most four letters), sharing content
// where the requests do: a group's first GroupTokens words, a prefix's
// first PrefixTokens, where a conversation's earlier answers are the
// engine's own output words (sim.OutputWord), so the pages the engine
// cached while it generated them match. build is called once per
// request, in order: a prefix's answers are known from its earlier
// requests.
type prompts struct {
	seed    uint64
	left    map[int64]int    // requests of each prefix not built yet
	answers map[int64][]span // each prefix's answers so far
	ids     []int
}

func newPrompts(reqs []fleet.Request, seed uint64) *prompts {
	p := &prompts{seed: seed, left: map[int64]int{}, answers: map[int64][]span{}}
	for _, r := range reqs {
		if r.PrefixID >= 0 {
			p.left[r.PrefixID]++
		}
	}
	return p
}

// word is the id (into trace.Text's words) at position pos of the
// content (domain, id).
func (p *prompts) word(domain, id uint64, pos int) int {
	z := p.seed ^ domain*0x9e3779b97f4a7c15 ^ id*0xbf58476d1ce4e5b9 ^ uint64(pos)*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) >> 1)
}

// build is request i's prompt.
func (p *prompts) build(i int, r fleet.Request) string {
	var b strings.Builder
	b.Grow(int(r.Prompt) * 5)
	prompt, shared := int(r.Prompt), 0
	if r.PrefixID >= 0 {
		shared = min(int(r.PrefixTokens), prompt)
	}
	spans := p.answers[r.PrefixID]
	// flush writes the words of p.ids.
	flush := func() {
		if len(p.ids) > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(trace.Text(p.ids))
			p.ids = p.ids[:0]
		}
	}
	for j := 0; j < prompt; {
		switch {
		case j < shared && j < int(r.GroupTokens):
			p.ids = append(p.ids, p.word(domainGroup, uint64(r.GroupID), j))
			j++
		case j < shared:
			if s, ok := within(spans, j); ok {
				flush()
				for ; j < min(s.start+s.n, shared); j++ {
					if b.Len() > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(sim.OutputWord(j - s.start))
				}
				continue
			}
			p.ids = append(p.ids, p.word(domainPrefix, uint64(r.PrefixID), j))
			j++
		default:
			p.ids = append(p.ids, p.word(domainOwn, uint64(i), j))
			j++
		}
	}
	flush()
	if r.PrefixID >= 0 {
		if int(r.PrefixTokens) > prompt {
			p.answers[r.PrefixID] = append(spans, span{prompt, min(int(r.PrefixTokens)-prompt, int(r.Output))})
		}
		if p.left[r.PrefixID]--; p.left[r.PrefixID] <= 0 {
			delete(p.left, r.PrefixID)
			delete(p.answers, r.PrefixID)
		}
	}
	return b.String()
}

// within is the span holding position j.
func within(spans []span, j int) (span, bool) {
	for _, s := range spans {
		if j >= s.start && j < s.start+s.n {
			return s, true
		}
	}
	return span{}, false
}

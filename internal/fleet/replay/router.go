package replay

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"hash/maphash"
	"io"
	"net/http"
	"strings"

	"github.com/servetune/servetune/internal/httpserve"
)

// pageWords is the words a page of the router's prefix index covers:
// vLLM's 16-token block, one word a token in the simulated engine.
const pageWords = 16

// pageHashes are the chained hashes of text's whole pages: page k's hash
// covers every word up to its end, so two prompts share page k only when
// they agree up to there.
func pageHashes(seed maphash.Seed, text string) []uint64 {
	words := strings.Fields(text)
	out := make([]uint64, 0, len(words)/pageWords)
	var prev uint64
	for k := 0; (k+1)*pageWords <= len(words); k++ {
		var h maphash.Hash
		h.SetSeed(seed)
		var b [8]byte
		for i := range b {
			b[i] = byte(prev >> (8 * i))
		}
		h.Write(b[:])
		for _, w := range words[k*pageWords : (k+1)*pageWords] {
			h.WriteString(w)
			h.WriteByte(' ')
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out
}

// prefixIndex is what the router remembers of the prompts it sent one
// replica: their pages, the least recently sent evicted past the
// replica's KV cache (an approximate prefix-cache index, as SGLang's
// router and llm-d's approximate prefix scorer keep).
type prefixIndex struct {
	capacity int // pages
	order    *list.List
	pages    map[uint64]*list.Element
}

func newPrefixIndex(pages int) *prefixIndex {
	return &prefixIndex{capacity: max(pages, 1), order: list.New(), pages: map[uint64]*list.Element{}}
}

// match is how many leading pages of hs the index holds.
func (x *prefixIndex) match(hs []uint64) int {
	n := 0
	for _, h := range hs {
		if _, ok := x.pages[h]; !ok {
			break
		}
		n++
	}
	return n
}

// add records hs as sent most recently.
func (x *prefixIndex) add(hs []uint64) {
	for _, h := range hs {
		if e, ok := x.pages[h]; ok {
			x.order.MoveToFront(e)
			continue
		}
		x.pages[h] = x.order.PushFront(h)
	}
	for x.order.Len() > x.capacity {
		e := x.order.Back()
		x.order.Remove(e)
		delete(x.pages, e.Value.(uint64))
	}
}

// view is the ready replicas as a fleet router sees them for one
// request.
type view struct {
	pages []uint64
	rs    []*replica
}

func (v *view) Len() int              { return len(v.rs) }
func (v *view) Outstanding(i int) int { return v.rs[i].outstanding }
func (v *view) Cached(i int) int      { return v.rs[i].index.match(v.pages) * pageWords }

// handleGenerate routes one completion: it picks a ready replica with
// the fleet's router (waiting for one while none is ready), passes the
// request to it and its answer back as it streams, flushing every read
// so that the stream's chunks keep their times.
func (f *live) handleGenerate(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		Prompt string `json:"prompt"`
	}
	_ = json.Unmarshal(body, &in)
	pages := pageHashes(f.seed, in.Prompt)
	f.received.Add(1)
	r, ok := f.pick(req.Context(), pages)
	if !ok {
		http.Error(w, "no replica became ready", http.StatusServiceUnavailable)
		return
	}
	defer f.done(r)
	er, err := http.NewRequestWithContext(req.Context(), http.MethodPost, r.url+req.URL.Path, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	er.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(er)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	httpserve.Relay(w, resp, "Content-Type", "Cache-Control")
}

// pick takes a ready replica for a request of the given pages and
// counts the request outstanding on it; false when ctx ends first.
func (f *live) pick(ctx context.Context, pages []uint64) (*replica, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.pool) == 0 {
		wake := f.readyCh
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			f.mu.Lock()
			return nil, false
		case <-wake:
		}
		f.mu.Lock()
	}
	f.view.pages, f.view.rs = pages, f.pool
	r := f.pool[f.router.Pick(&f.view)]
	f.view.pages, f.view.rs = nil, nil
	r.outstanding++
	r.index.add(pages)
	return r, true
}

// done counts a request finished on r; a draining replica with none left
// is stopped.
func (f *live) done(r *replica) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.outstanding--
	if r.state == draining && r.outstanding == 0 {
		f.retire(r)
	}
}

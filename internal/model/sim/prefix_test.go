package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// The text the server sends for its output tokens tokenizes back to the
// ids the prefix cache gave them, so a conversation's next turn, whose
// prompt carries the answer, hits the answer's pages.
func TestOutputTextRoundTrip(t *testing.T) {
	cfg, est := smallKV(t)
	c := newCore(cfg, est)
	user := "tell me about the weather in a few words please"
	ids := TokenIDs(user, cfg.Model.Vocab)
	s := &seq{prompt: len(ids), ids: ids, prefixID: -1}
	var answer strings.Builder
	for i := range 100 {
		answer.WriteString(outputText(i))
	}
	next := TokenIDs(user+answer.String()+" and more", cfg.Model.Vocab)
	if len(next) != len(ids)+100+2 {
		t.Fatalf("%d tokens in the next prompt, want %d", len(next), len(ids)+102)
	}
	for i := range len(ids) + 100 {
		if got := c.tokenAt(s, i); got != uint64(next[i]) {
			t.Fatalf("token %d: the engine's %d, the next prompt's %d", i, got, next[i])
		}
	}
	n := &seq{prompt: len(next), ids: next, prefixID: -1}
	for k := range (len(ids) + 100) / c.pageTokens {
		if c.pageHash(s, k) != c.pageHash(n, k) {
			t.Fatalf("page %d: hashes differ", k)
		}
	}
}

// queued yields the pages of c's free queue in eviction order.
func (c *core) queued() func(func(*page) bool) {
	return func(yield func(*page) bool) {
		for p := c.freeHead; p != nil; p = p.next {
			if !yield(p) {
				return
			}
		}
	}
}

// lruSeq is a request of prompt tokens of prefix group g, all of its
// content the group's.
func lruSeq(id, g, prompt, maxOut int) *seq {
	return &seq{id: id, prompt: prompt, maxOut: maxOut, prefixID: g, prefixTokens: prompt}
}

// TestPrefixEvictionLRU fills a cache of 40 blocks beyond its capacity:
// the least recently freed pages go first (a hit makes a page recent
// again, and a request's tail goes before its head), and a page a running
// request references is never evicted.
func TestPrefixEvictionLRU(t *testing.T) {
	// Synchronous scheduling: a request's blocks are freed with the step
	// it finished in, not with the next step's planning (holdsFinished).
	cfg, est := smallKV(t, "--no-async-scheduling")
	est.KVBlocks = 40
	c := newCore(cfg, est)
	if c.pageTokens != 16 || c.pageBlocks != 1 {
		t.Fatalf("pages of %d tokens, %d blocks: want vLLM's 16, 1", c.pageTokens, c.pageBlocks)
	}
	step := 0
	run := func(until func() bool) {
		t.Helper()
		for ; !until(); step++ {
			if step > 1e5 {
				t.Fatal("stalled")
			}
			if b, _ := c.schedule(c.endsAt); b.tokens == 0 {
				t.Fatalf("step %d: nothing runs", step)
			}
			c.commit(float64(step), func(*seq, bool) {})
			checkBlocks(t, c, step)
			for _, s := range c.running {
				for k, p := range s.pages {
					if p.cached && !c.findable(p) {
						t.Fatalf("step %d: page %d of running request %d was evicted", step, k, s.id)
					}
				}
			}
		}
	}
	cached := func(s *seq, k int) bool { return c.table[c.pageHash(s, k)] != nil }
	// A and B, 10 pages each, finish: 20 free cached pages.
	a, b := lruSeq(0, 1, 160, 1), lruSeq(1, 2, 160, 1)
	for _, s := range []*seq{a, b} {
		c.add(s)
		run(func() bool { return s.done })
	}
	// A2 hits A's first 9 pages (the last token is always computed): they
	// are now more recent than B's; A's 10th stays where it was.
	a2 := lruSeq(2, 1, 160, 1)
	c.add(a2)
	run(func() bool { return a2.done })
	if got := c.prefixHits; got != 9*16 {
		t.Fatalf("A2: %d hit tokens, want %d", got, 9*16)
	}
	if c.usedBlocks != 20 || c.evictable != 20 {
		t.Fatalf("used %d, evictable %d: want 20 cached free blocks", c.usedBlocks, c.evictable)
	}
	// D runs and holds its 10 pages; E needs 15 blocks where 9 are free.
	d := lruSeq(3, 3, 160, 200)
	c.add(d)
	run(func() bool { return d.generated > 0 })
	e := lruSeq(4, 4, 240, 200)
	c.add(e)
	run(func() bool { return e.generated > 0 })
	// The free queue was A's 10th page, B's pages last first, A's 9th to
	// 1st; 10 blocks were free: D's next block took one, and E's 15 took
	// the other 9 and 6 pages from the queue's head.
	if cached(a, 9) {
		t.Error("A's 10th page, the least recently freed, is still cached")
	}
	for k := 5; k < 10; k++ {
		if cached(b, k) {
			t.Errorf("B's page %d is still cached; B's tail goes before A's recently hit pages", k)
		}
	}
	for k := range 5 {
		if !cached(b, k) {
			t.Errorf("B's page %d was evicted before its tail", k)
		}
	}
	for k := range 9 {
		if !cached(a, k) {
			t.Errorf("A's page %d, hit last, was evicted before B's", k)
		}
	}
	// Pressure: F cannot fit beside D and E; the free pages go, D's and E's
	// never (checked every step), and everything finishes.
	f := lruSeq(5, 5, 400, 50)
	c.add(f)
	run(func() bool { return d.done && e.done && f.done })
	if c.usedBlocks-c.evictable != 0 {
		t.Errorf("%d blocks held after every request finished", c.usedBlocks-c.evictable)
	}
	t.Logf("%d steps, %d preemptions, %d cached pages left", step, c.preemptions, len(c.table))
}

// convTurn is one turn's result: the answer's text and the engine's TTFT.
type convTurn struct {
	answer string
	ttftUs int64
}

// chatTurn sends one streaming turn and reads the answer and the first
// token's engine time (servetune_engine_us, the server's time scale
// undone).
func chatTurn(t *testing.T, url string, chat bool, history []string, maxTokens int) (convTurn, error) {
	req := map[string]any{"max_tokens": maxTokens, "stream": true}
	path := "/v1/completions"
	if chat {
		path = "/v1/chat/completions"
		var msgs []map[string]string
		for i, m := range history {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, map[string]string{"role": role, "content": m})
		}
		req["messages"] = msgs
	} else {
		req["prompt"] = strings.Join(history, " ")
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+path, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return convTurn{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return convTurn{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var out convTurn
	var answer strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	first := true
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var chunk struct {
			EngineUs *int64 `json:"servetune_engine_us"`
			Choices  []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			return convTurn{}, err
		}
		if chunk.EngineUs == nil || len(chunk.Choices) == 0 {
			continue
		}
		if first {
			out.ttftUs, first = *chunk.EngineUs, false
		}
		answer.WriteString(chunk.Choices[0].Text + chunk.Choices[0].Delta.Content)
	}
	out.answer = answer.String()
	return out, sc.Err()
}

// metricValue reads one sample of family name from a /metrics page.
func metricValue(page, name string) (float64, bool) {
	for _, l := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(l, name+"{"); ok {
			if i := strings.LastIndexByte(rest, ' '); i >= 0 {
				v, err := strconv.ParseFloat(rest[i+1:], 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runConversations runs sessions conversations of turns turns at once
// against the server at url: the first prompt is 2,000 words of the
// session's own, each answer 1,000 tokens, each later prompt the history
// (prompts and the server's actual answers) and 100 new words. Sessions
// start 80 ms apart (1.6 s of engine time at time scale 20, a quarter of
// a turn), so that turns' prefills seldom coincide, the first turn's as
// the later ones'. It returns each turn's TTFTs in engine milliseconds
// and the server's prefix cache hit rate.
func runConversations(t *testing.T, url string, eng engine.Engine, chat bool, sessions, turns int) ([][]float64, float64) {
	ttft := make([][]float64, turns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			time.Sleep(time.Duration(s) * 80 * time.Millisecond) // the sessions' stagger is the workload
			words := func(n, from int) string {
				w := make([]string, n)
				for i := range w {
					w[i] = fmt.Sprintf("%c%d", 'a'+s, (from+i)%1000) // one token each
				}
				return strings.Join(w, " ")
			}
			history := []string{words(2000, 0)}
			for turn := range turns {
				r, err := chatTurn(t, url, chat, history, 1000)
				if err != nil {
					errs <- err
					return
				}
				if got := CountTokens(r.answer); got != 1000 {
					errs <- fmt.Errorf("session %d turn %d: %d answer tokens", s, turn, got)
					return
				}
				mu.Lock()
				ttft[turn] = append(ttft[turn], float64(r.ttftUs)/1e3)
				mu.Unlock()
				history = append(history, r.answer, words(100, 100*turn+7))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := engine.Metrics(eng)
	q, ok1 := metricValue(string(page), n.PrefixQueries[0])
	h, ok2 := metricValue(string(page), n.PrefixHits[0])
	if !ok1 || !ok2 {
		t.Fatalf("no prefix cache counters (%s, %s) in /metrics", n.PrefixQueries[0], n.PrefixHits[0])
	}
	if q == 0 { // vLLM with caching off queries nothing
		return ttft, 0
	}
	if eng == engine.SGLang {
		// sglang:prompt_tokens_total counts cached and computed tokens
		// alike, the queries.
		if rate, ok := metricValue(string(page), n.HitRate[0]); !ok || rate != h/q {
			t.Errorf("%s %v, want %v", n.HitRate[0], rate, h/q)
		}
	}
	return ttft, h / q
}

// TestConversationPrefixCache: multi-turn conversations over loopback HTTP
// hit the pages of their earlier turns, answers included, with prefix
// caching on: the hit rate is high and later turns' TTFT is below the
// first's, whose prompt is computed whole; with it off nothing hits and
// later turns, whose prompts are longer, wait longer. TTFTs are the
// engine's own (servetune_engine_us), so a loaded machine moves only the
// client's pace, not them.
func TestConversationPrefixCache(t *testing.T) {
	const sessions, turns = 4, 4
	flavours := []struct {
		eng      engine.Engine
		chat     bool
		on, off  []string
		baseArgs []string
	}{
		{engine.VLLM, true, nil, []string{"--no-enable-prefix-caching"},
			[]string{"llama-3.1-8b", "--max-model-len", "16384"}},
		{engine.SGLang, false, nil, []string{"--disable-radix-cache"},
			[]string{"--model-path", "llama-3.1-8b", "--context-length", "16384"}},
	}
	for _, f := range flavours {
		t.Run(string(f.eng), func(t *testing.T) {
			result := map[bool][][]float64{}
			rate := map[bool]float64{}
			for _, caching := range []bool{true, false} {
				args := append(slices.Clone(f.baseArgs), "--time-scale", "20", "--sim-load-time", "0")
				if caching {
					args = append(args, f.on...)
				} else {
					args = append(args, f.off...)
				}
				_, url := startServer(t, args...)
				result[caching], rate[caching] = runConversations(t, url, f.eng, f.chat, sessions, turns)
				var later []float64
				for _, x := range result[caching][2:] {
					later = append(later, x...)
				}
				t.Logf("caching %v: hit rate %.3f; median TTFT turn 1 %.1f ms, turn 2 %.1f ms, turns 3+ %.1f ms",
					caching, rate[caching], median(result[caching][0]), median(result[caching][1]), median(later))
			}
			later := func(caching bool) float64 {
				var xs []float64
				for _, x := range result[caching][2:] {
					xs = append(xs, x...)
				}
				return median(xs)
			}
			first := func(caching bool) float64 { return median(result[caching][0]) }
			if rate[true] <= 0.5 {
				t.Errorf("caching on: hit rate %.3f, want over 0.5", rate[true])
			}
			if rate[false] != 0 {
				t.Errorf("caching off: hit rate %.3f, want 0", rate[false])
			}
			if l, f1 := later(true), first(true); l >= 0.5*f1 {
				t.Errorf("caching on: median TTFT of turns 3+ %.1f ms, want under half of turn 1's %.1f ms", l, f1)
			}
			if l, f1 := later(false), first(false); l <= f1 {
				t.Errorf("caching off: median TTFT of turns 3+ %.1f ms, want over turn 1's %.1f ms", l, f1)
			}
		})
	}
}

// TestPromptGroupsShareTheSystemPrompt: prompts of one group share the
// full pages of their system prompt and nothing after it (a page that
// mixes the system prompt's tail with a question is the prompt's own);
// another group's prompts share none. Ten prompts of one group, sent
// one after another, hit the first's six system-prompt pages each.
func TestPromptGroupsShareTheSystemPrompt(t *testing.T) {
	cfg, est := smallKV(t)
	c := newCore(cfg, est)
	mk := func(prefix, group int) *seq {
		return &seq{prompt: 575, maxOut: 8, prefixID: prefix, prefixTokens: 575, groupID: group, groupTokens: 100}
	}
	a, b, other := mk(1, 3), mk(2, 3), mk(3, 4)
	for k := range 8 {
		if same := c.pageHash(a, k) == c.pageHash(b, k); same != (k < 6) {
			t.Errorf("page %d: shared %v within the group, want %v (100 tokens: six full pages)", k, same, k < 6)
		}
		if c.pageHash(a, k) == c.pageHash(other, k) {
			t.Errorf("page %d shared across groups", k)
		}
	}
	v, err := NewVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]measure.Request, 10)
	for i := range reqs {
		reqs[i] = measure.Request{Index: i, PromptTokens: 575, MaxTokens: 8, PrefixID: i, PrefixTokens: 575, GroupID: 0, GroupTokens: 100}
	}
	virtualPhase(v, reqs, 1, false)
	m := v.EngineMetrics()
	if want := 9 * 96.0 / (10 * 575); m.PrefixCacheHitRate == nil || math.Abs(*m.PrefixCacheHitRate-want) > 1e-9 {
		t.Errorf("prefix hit rate %v, want %.5f: nine of ten prompts hit their group's 96 system-prompt tokens", m.PrefixCacheHitRate, want)
	}
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/parallel"
)

// tokenizeProbes is how many prompts are sent to /tokenize to fit the
// words-to-tokens line, and again to check the result.
const tokenizeProbes = 4

// countTokens asks the server's /tokenize (vLLM's API) for prompt's length.
// ok is false when the server has no usable /tokenize.
func countTokens(ctx context.Context, hc *http.Client, t openai.Target, prompt string) (n int, ok bool) {
	body, _ := json.Marshal(map[string]string{"model": t.Model, "prompt": prompt})
	req, err := t.Post(ctx, "/tokenize", body)
	if err != nil {
		return 0, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	var out struct {
		Count  *int  `json:"count"`
		Tokens []int `json:"tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, false
	}
	if out.Count != nil {
		return *out.Count, true
	}
	if out.Tokens != nil {
		return len(out.Tokens), true
	}
	return 0, false
}

// alignPrompts re-sizes synthetic prompts so the server's tokenizer counts
// exactly PromptTokens for each. It probes a few prompts, fits
// tokens = a·words + b, resizes every synthetic prompt by that line, then
// counts and corrects each one (never trimming the shared prefix) until ctx
// ends. Without /tokenize it changes nothing. The returned note goes into
// meta.
func alignPrompts(ctx context.Context, hc *http.Client, t openai.Target, reqs []measure.Request, rng *rand.Rand) string {
	var idx []int
	for i := range reqs {
		if reqs[i].Synthetic {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return "not needed"
	}
	// Probe distinct word counts so the fit has a slope.
	var ws, cs []float64
	seen := map[int]bool{}
	for _, i := range idx {
		if len(ws) == tokenizeProbes {
			break
		}
		w := len(strings.Fields(reqs[i].Prompt))
		if seen[w] && len(idx) > tokenizeProbes {
			continue
		}
		seen[w] = true
		c, ok := countTokens(ctx, hc, t, reqs[i].Prompt)
		if !ok {
			return "unavailable (no /tokenize): prompt lengths approximate"
		}
		ws, cs = append(ws, float64(w)), append(cs, float64(c))
	}
	a, b := fitLine(ws, cs)
	if a <= 0 {
		return "unavailable (/tokenize gave unusable counts): prompt lengths approximate"
	}
	// First pass: resize every prompt by the fitted line, so most need at
	// most one correction below.
	for _, i := range idx {
		r := &reqs[i]
		want := int(math.Round((float64(r.PromptTokens) - b) / a))
		r.Prompt = resizeWords(r.Prompt, max(want, prefixWords(r)+1), rng)
	}
	exact, counted := exactAlign(ctx, hc, t, reqs, idx, rng.Uint64())
	note := fmt.Sprintf("aligned with /tokenize: tokens = %.3g*words %+.3g; %d of %d prompts exact", a, b, exact, len(idx))
	if counted < len(idx) {
		note += fmt.Sprintf(" (%d not counted before the alignment deadline: lengths approximate)", len(idx)-counted)
	}
	return note
}

// alignWorkers bounds concurrent /tokenize calls during alignment.
const alignWorkers = 16

// alignRounds bounds the count-and-correct rounds per prompt; with the fitted
// first pass, one or two rounds reach the exact length.
const alignRounds = 5

// prefixWords is how many leading words of r's prompt are a shared prefix,
// which alignment never trims.
func prefixWords(r *measure.Request) int {
	if r.PrefixID >= 0 && r.PrefixTokens > 0 {
		return r.PrefixTokens // the prefix is built one word per token
	}
	return 0
}

// exactAlign counts each prompt of reqs[idx] with /tokenize and adds or
// trims trailing words until the count equals PromptTokens. Each request's
// PromptTokens becomes the server's own count. Added words come from a
// stream seeded per request from seed, so the result does not depend on
// goroutine order. It stops early when ctx ends; counted is how many prompts
// got a server count, exact how many hit their target.
func exactAlign(ctx context.Context, hc *http.Client, t openai.Target, reqs []measure.Request, idx []int, seed uint64) (exact, counted int) {
	var mu sync.Mutex
	parallel.Each(ctx, len(idx), alignWorkers, func(k int) {
		i := idx[k]
		hit, ok := alignOne(ctx, hc, t, &reqs[i], rand.New(rand.NewPCG(seed, uint64(i))))
		if !ok {
			return
		}
		mu.Lock()
		counted++
		if hit {
			exact++
		}
		mu.Unlock()
	})
	return exact, counted
}

// alignOne corrects one prompt; see exactAlign. Large gaps are closed by
// this prompt's own tokens-per-word ratio, small ones a short word at a
// time. Every round ends with a count, so PromptTokens always matches the
// prompt sent. ok is false when the server never counted it.
func alignOne(ctx context.Context, hc *http.Client, t openai.Target, r *measure.Request, rng *rand.Rand) (hit, ok bool) {
	target := r.PromptTokens
	for round := 0; ; round++ {
		c, cok := countTokens(ctx, hc, t, r.Prompt)
		if !cok {
			return false, ok
		}
		ok = true
		r.PromptTokens = c
		diff := target - c
		if diff == 0 || round == alignRounds {
			return diff == 0, true
		}
		n := len(strings.Fields(r.Prompt))
		perWord := float64(c) / float64(max(n, 1))
		switch {
		case diff > 2:
			r.Prompt = resizeWords(r.Prompt, n+max(1, int(float64(diff)/perWord)), rng)
		case diff > 0:
			r.Prompt += strings.Repeat(" "+shortWords[rng.IntN(len(shortWords))], diff)
		default:
			drop := max(1, int(float64(-diff)/perWord))
			if n-drop <= prefixWords(r) {
				return false, true // never shrink into the shared prefix
			}
			r.Prompt = resizeWords(r.Prompt, n-drop, rng)
		}
	}
}

// shortWords are the words of at most three letters, one token each in the
// common BPE vocabularies (and in the simulated engine's tokenizer): the
// last steps of alignment add them one token at a time.
var shortWords = func() []string {
	var out []string
	for _, w := range words {
		if len(w) <= 3 {
			out = append(out, w)
		}
	}
	return out
}()

// fitLine returns the least-squares line y = a·x + b, slope 1 when all x
// are equal.
func fitLine(x, y []float64) (a, b float64) {
	n := float64(len(x))
	if n == 0 {
		return 1, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	den := n*sxx - sx*sx
	if math.Abs(den) < 1e-9 {
		return 1, (sy - sx) / n
	}
	a = (n*sxy - sx*sy) / den
	return a, (sy - a*sx) / n
}

// resizeWords trims or extends prompt to n words.
func resizeWords(prompt string, n int, rng *rand.Rand) string {
	f := strings.Fields(prompt)
	if len(f) >= n {
		return strings.Join(f[:n], " ")
	}
	return prompt + " " + randomWords(rng, n-len(f))
}

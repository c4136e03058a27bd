package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
)

// tokenizeProbes is how many prompts are sent to /tokenize to fit the
// words-to-tokens line, and again to check the result.
const tokenizeProbes = 4

// countTokens asks the server's /tokenize (vLLM's API) for prompt's length.
// ok is false when the server has no usable /tokenize.
func countTokens(ctx context.Context, hc *http.Client, t Target, prompt string) (n int, ok bool) {
	body, _ := json.Marshal(map[string]string{"model": t.Model, "prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url("/tokenize"), bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	t.header(req.Header)
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
// about PromptTokens for each. It probes a few prompts, fits
// tokens = a·words + b, adds or trims trailing words of every synthetic
// prompt (never the shared prefix), and checks a few results; probed prompts
// get their exact count. Without /tokenize it changes nothing. The returned
// note goes into meta.
func alignPrompts(ctx context.Context, hc *http.Client, t Target, reqs []Request, rng *rand.Rand) string {
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
	for _, i := range idx {
		r := &reqs[i]
		prefixWords := 0
		if r.PrefixID >= 0 && r.PrefixTokens > 0 {
			prefixWords = r.PrefixTokens // prefix was built one word per token
		}
		want := int(math.Round((float64(r.PromptTokens) - b) / a))
		want = max(want, prefixWords+1)
		r.Prompt = resizeWords(r.Prompt, want, rng)
		r.PromptTokens = int(math.Round(a*float64(want) + b))
	}
	exact := 0
	for k, i := range idx {
		if k == tokenizeProbes {
			break
		}
		if c, ok := countTokens(ctx, hc, t, reqs[i].Prompt); ok {
			if c == reqs[i].PromptTokens {
				exact++
			}
			reqs[i].PromptTokens = c
		}
	}
	return fmt.Sprintf("aligned with /tokenize: tokens = %.3g*words %+.3g; %d of %d checks exact", a, b, exact, min(len(idx), tokenizeProbes))
}

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

package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/openai"
)

// tokenizeServer serves vLLM's /tokenize with a tokenizer unlike the word
// list's one-word-one-token guess: one token per three bytes of each word,
// so alignment must correct, not assume.
func tokenizeServer(t *testing.T) *httptest.Server {
	count := func(s string) int {
		n := 0
		for _, w := range strings.Fields(s) {
			n += (len(w) + 2) / 3
		}
		return n
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tokenize" {
			http.NotFound(w, r)
			return
		}
		var in struct{ Prompt string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"count": count(in.Prompt), "max_model_len": 1 << 20})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAlignPromptsExact(t *testing.T) {
	srv := tokenizeServer(t)
	for _, tc := range []struct {
		name string
		spec DatasetSpec
	}{
		{"fixed", DatasetSpec{Kind: DatasetRandom, Input: Dist{Kind: "fixed", Value: 512}, Output: Dist{Kind: "fixed", Value: 8}}},
		{"uniform", DatasetSpec{Kind: DatasetRandom, Input: Dist{Kind: "uniform", Min: 5, Max: 900}, Output: Dist{Kind: "fixed", Value: 8}}},
		{"prefix", DatasetSpec{Kind: DatasetPrefix, PrefixGroups: 2, PrefixLen: 64, Input: Dist{Kind: "fixed", Value: 200}, Output: Dist{Kind: "fixed", Value: 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := tc.spec.Generate(rand.New(rand.NewPCG(1, 1)), 40)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int, len(reqs))
			prefixes := make([]string, len(reqs))
			for i, r := range reqs {
				want[i] = r.PromptTokens
				if r.PrefixTokens > 0 {
					prefixes[i] = strings.Join(strings.Fields(r.Prompt)[:r.PrefixTokens], " ")
				}
			}
			note := alignPrompts(context.Background(), srv.Client(), openai.Target{BaseURL: srv.URL, Model: "m"}, reqs, rand.New(rand.NewPCG(2, 2)))
			if !strings.Contains(note, "40 of 40 prompts exact") {
				t.Errorf("note = %q", note)
			}
			for i, r := range reqs {
				f := strings.Fields(r.Prompt)
				n := 0
				for _, w := range f {
					n += (len(w) + 2) / 3
				}
				if n != want[i] || r.PromptTokens != want[i] {
					t.Errorf("request %d: server counts %d, recorded %d, want %d", i, n, r.PromptTokens, want[i])
				}
				if prefixes[i] != "" && !strings.HasPrefix(r.Prompt, prefixes[i]) {
					t.Errorf("request %d: shared prefix changed", i)
				}
			}
		})
	}
}

func TestAlignPromptsWithoutTokenize(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	reqs, _ := DatasetSpec{Kind: DatasetRandom, Input: Dist{Kind: "fixed", Value: 64}, Output: Dist{Kind: "fixed", Value: 8}}.Generate(rand.New(rand.NewPCG(1, 1)), 3)
	before := reqs[0].Prompt
	note := alignPrompts(context.Background(), srv.Client(), openai.Target{BaseURL: srv.URL, Model: "m"}, reqs, rand.New(rand.NewPCG(2, 2)))
	if !strings.Contains(note, "unavailable") || reqs[0].Prompt != before {
		t.Errorf("note %q; prompt changed: %v", note, reqs[0].Prompt != before)
	}
}

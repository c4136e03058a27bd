package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
)

// multiTurn is a ShareGPT file written from the published schema: a
// three-turn conversation, one opening with a system message, one whose
// messages stop alternating after its first answer, one never answered
// and one empty.
const multiTurn = "testdata/sharegpt_multiturn.json"

// A ShareGPT file's conversations as sessions: the human messages in order,
// each answer as long as the gpt message after it; a system message is
// skipped, a conversation ends where it stops alternating, and one with
// no answer is left out.
func TestShareGPTConversations(t *testing.T) {
	cfg := Config{Seed: 3, Warmup: 2, Dataset: DatasetSpec{Kind: DatasetConversation, Path: multiTurn, Sessions: 3,
		Think: &ThinkTime{Kind: ThinkFixed, Value: 2}}}
	if err := cfg.Dataset.Validate(); err != nil {
		t.Fatal(err)
	}
	sessions, reqs, warm, err := cfg.conversation(true)
	if err != nil {
		t.Fatal(err)
	}
	byFirst := map[string][]string{}
	for _, s := range sessions {
		var msgs []string
		for k, i := range s.turns {
			r := reqs[i]
			msgs = append(msgs, r.Prompt)
			if r.PromptTokens != ApproxTokens(r.Prompt) || r.Synthetic || r.PrefixID != -1 {
				t.Errorf("turn %q: %+v", r.Prompt, r)
			}
			if (k == 0) != (s.think[k] == 0) {
				t.Errorf("turn %d of %q thinks %v", k, msgs[0], s.think[k])
			}
		}
		byFirst[msgs[0]] = msgs
	}
	want := map[string][]string{
		"What is a B-tree and where is it used?": {"What is a B-tree and where is it used?", "How is that different from a binary search tree?", "Thanks, that helps."},
		"Translate good morning into French.":    {"Translate good morning into French.", "And good night?"},
		"Give me three names for a cat.":         {"Give me three names for a cat."},
	}
	if len(byFirst) != len(want) {
		t.Fatalf("sessions %v, want %v", byFirst, want)
	}
	for first, msgs := range want {
		if strings.Join(byFirst[first], "|") != strings.Join(msgs, "|") {
			t.Errorf("session %q: %q, want %q", first, byFirst[first], msgs)
		}
	}
	for _, r := range reqs {
		if r.Prompt == "Translate good morning into French." && r.MaxTokens != ApproxTokens("Bonjour.") {
			t.Errorf("answer length %d, want the gpt message's %d", r.MaxTokens, ApproxTokens("Bonjour."))
		}
	}
	if len(warm) != 2 || !warm[0].Synthetic || strings.Contains(warm[0].Prompt, "B-tree") {
		t.Errorf("warm-up %+v: want random words, nothing a session could hit", warm)
	}
	// An output length overrides the file's answers.
	cfg.Dataset.Output = Dist{Kind: DistFixed, Value: 7}
	if _, reqs, _, err := cfg.conversation(false); err != nil || reqs[0].MaxTokens != 7 || reqs[0].Prompt != "" {
		t.Errorf("with output 7: %v, %+v", err, reqs[0])
	}
	cfg.Dataset.Sessions = 4
	if _, _, _, err := cfg.conversation(true); !errors.Is(err, ErrBadDataset) || !strings.Contains(err.Error(), "3 conversations") {
		t.Errorf("4 sessions of 3 conversations: %v", err)
	}
	cfg.Dataset.Sessions, cfg.Dataset.Turns = 1, &Dist{Kind: DistFixed, Value: 2}
	if err := cfg.Dataset.Validate(); err == nil {
		t.Error("turns with a file: accepted")
	}
}

// A ShareGPT conversation over HTTP: each turn sends the whole history,
// the server's own answers included, as chat messages.
func TestShareGPTConversationOverHTTP(t *testing.T) {
	var (
		mu   sync.Mutex
		seen [][]string // each request's message contents
	)
	f := &fakeServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var q struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if json.Unmarshal(body, &q) == nil && len(q.Messages) > 0 {
			var c []string
			for _, m := range q.Messages {
				c = append(c, m.Role+": "+m.Content)
			}
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Config{
		Target:  openai.Target{BaseURL: srv.URL, Model: "m", Endpoint: openai.EndpointChat},
		Dataset: DatasetSpec{Kind: DatasetConversation, Path: multiTurn, Sessions: 3},
		Seed:    1, NoAlign: true, Load: measure.Load{MaxConcurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Summary.Conversation
	if res.Summary.Completed != 6 || c == nil || c.SessionsCompleted != 3 || len(c.Turns) != 3 {
		t.Fatalf("%d completed, conversation %+v", res.Summary.Completed, c)
	}
	var third []string
	for _, m := range seen {
		if len(m) == 5 {
			third = m
		}
	}
	if len(third) != 5 || third[0] != "user: What is a B-tree and where is it used?" || !strings.HasPrefix(third[1], "assistant: ") ||
		third[1] == "assistant: " || third[4] != "user: Thanks, that helps." {
		t.Errorf("third turn's messages %q: want the history with the server's answers", third)
	}
}

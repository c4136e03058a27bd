package replay

import (
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/model/sim"
)

// Every prompt tokenizes, on the simulated engine's tokenizer, to its
// request's length; a conversation's next turn begins with its previous
// turn's prompt and the words the engine generated for its answer; two
// sessions share their system prompt and nothing after it.
func TestPromptsShareWhatTheRequestsDo(t *testing.T) {
	reqs, err := fleet.Conversations(fleet.Day(2), fleet.DefaultChat, 1)
	if err != nil {
		t.Fatal(err)
	}
	reqs = reqs[:2000]
	p := newPrompts(reqs, 7)
	last := map[int64]string{} // each session's previous prompt and answer
	bySys := map[int32]string{}
	checked := 0
	for i, r := range reqs {
		text := p.build(i, r)
		if n := sim.CountTokens(text); n != int(r.Prompt) {
			t.Fatalf("request %d: %d tokens, want %d", i, n, r.Prompt)
		}
		words := strings.Fields(text)
		if prev, ok := last[r.PrefixID]; ok {
			if !strings.HasPrefix(text, prev+" ") {
				t.Fatalf("request %d does not begin with its session's previous turn and answer", i)
			}
			checked++
		}
		sys := strings.Join(words[:r.GroupTokens], " ")
		if other, ok := bySys[r.GroupID]; ok && other != sys {
			t.Fatalf("request %d: system prompt %d differs from another session's", i, r.GroupID)
		}
		bySys[r.GroupID] = sys
		var answer []string
		for k := range int(r.Output) {
			answer = append(answer, sim.OutputWord(k))
		}
		last[r.PrefixID] = text + " " + strings.Join(answer, " ")
	}
	if checked < 100 {
		t.Fatalf("only %d later turns checked", checked)
	}
}

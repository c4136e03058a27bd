package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// shareGPTTurn is one human message of a ShareGPT conversation with its
// token count, and the token count of the gpt answer after it.
type shareGPTTurn struct {
	message        string
	tokens, answer int
}

// parseShareGPTConversations reads a ShareGPT file (a JSON array of
// {"id", "conversations": [{"from": "human"|"gpt", "value"}]}) as
// conversations of turns: each human message answered by the gpt message
// after it. Turns before the first human message (a system prompt) are
// skipped, and a conversation ends where its messages stop alternating
// human, gpt (or at an empty message); one with no answered message is left
// out. Token counts are ApproxTokens'.
func parseShareGPTConversations(raw []byte, path string) ([][]shareGPTTurn, error) {
	entries, err := shareGPTEntries(raw, path)
	if err != nil {
		return nil, err
	}
	var out [][]shareGPTTurn
	for _, e := range entries {
		msgs := e.Conversations
		for len(msgs) > 0 && msgs[0].From != "human" {
			msgs = msgs[1:]
		}
		var turns []shareGPTTurn
		for i := 0; i+1 < len(msgs); i += 2 {
			h, g := msgs[i], msgs[i+1]
			if h.From != "human" || g.From != "gpt" || h.Value == "" || g.Value == "" {
				break
			}
			turns = append(turns, shareGPTTurn{
				message: h.Value,
				tokens:  min(ApproxTokens(h.Value), MaxLen),
				answer:  min(ApproxTokens(g.Value), MaxLen),
			})
		}
		if len(turns) > 0 {
			out = append(out, turns)
		}
	}
	return out, nil
}

// shareGPTConversation is conversation for a dataset with a path: Sessions
// of the file's conversations, drawn without replacement by cfg.Seed, each
// turn's new message a human message of the file and its answer as long as
// the gpt message after it (or Output's draw when set); the server's own
// answer goes into the history. Warm-up requests are random words as long
// as the sessions' first turns, so they leave nothing in a prefix cache
// that a session could hit.
func (cfg Config) shareGPTConversation(text bool) (sessions []convSession, reqs, warm []measure.Request, err error) {
	d := cfg.Dataset
	raw, err := os.ReadFile(d.Path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrBadDataset, err)
	}
	convs, err := parseShareGPTConversations(raw, d.Path)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(convs) < d.Sessions {
		return nil, nil, nil, fmt.Errorf("%w: %s: %d conversations with an answered human message, fewer than the %d sessions asked for",
			ErrBadDataset, d.Path, len(convs), d.Sessions)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, streamTurns))
	think := d.Think.dist()
	sessions = make([]convSession, d.Sessions)
	for s, c := range rng.Perm(len(convs))[:d.Sessions] {
		for k, t := range convs[c] {
			if len(reqs) == MaxRequests {
				return nil, nil, nil, fmt.Errorf("%w: %s: %d sessions hold over %d turns, the most a level sends", ErrBadDataset, d.Path, d.Sessions, MaxRequests)
			}
			out := t.answer
			if d.Output.isSet() {
				out = d.Output.Sample(rng)
			}
			r := measure.Request{Index: len(reqs), PromptTokens: t.tokens, MaxTokens: out, PrefixID: -1}
			if text {
				r.Prompt = t.message
			}
			var wait time.Duration
			if k > 0 {
				wait = time.Duration(math.Max(0, think.Sample(rng)) * float64(time.Second))
			}
			sessions[s].turns = append(sessions[s].turns, len(reqs))
			sessions[s].think = append(sessions[s].think, wait)
			reqs = append(reqs, r)
		}
	}
	if n := min(cfg.Warmup, countPool); n > 0 {
		wrng := rand.New(rand.NewPCG(cfg.Seed, streamWarmup))
		for i := range n {
			first := reqs[sessions[i%len(sessions)].turns[0]]
			w := measure.Request{PromptTokens: first.PromptTokens, MaxTokens: first.MaxTokens, PrefixID: -1, Synthetic: true}
			if text {
				w.Prompt = randomWords(wrng, first.PromptTokens)
			}
			warm = append(warm, w)
		}
	}
	return sessions, reqs, warm, nil
}

package trace

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Dist is a distribution of non-negative numbers drawn from a seeded
// source.
type Dist interface {
	Sample(r *rand.Rand) float64
}

// Fixed is always its value.
type Fixed float64

// Sample returns f.
func (f Fixed) Sample(*rand.Rand) float64 { return float64(f) }

// Uniform is uniform on [Min, Max].
type Uniform struct{ Min, Max float64 }

// Sample draws from u.
func (u Uniform) Sample(r *rand.Rand) float64 { return u.Min + r.Float64()*(u.Max-u.Min) }

// LogNormal has median Median and log-space standard deviation Sigma.
type LogNormal struct{ Median, Sigma float64 }

// Sample draws from l.
func (l LogNormal) Sample(r *rand.Rand) float64 {
	return l.Median * math.Exp(l.Sigma*r.NormFloat64())
}

// Exponential has mean Mean.
type Exponential struct{ Mean float64 }

// Sample draws from e.
func (e Exponential) Sample(r *rand.Rand) float64 { return e.Mean * r.ExpFloat64() }

// ConversationSpec describes multi-turn chat traffic: Sessions
// conversations of Turns turns; each turn's new user message has Input
// tokens and its answer Output tokens, and the user thinks Think seconds
// after an answer before the next turn. Every draw comes from Seed.
type ConversationSpec struct {
	Sessions, Turns int
	Input, Output   Dist
	Think           Dist
	Seed            uint64
}

// Turn is one turn of a session: the user's new message and the answer it
// expects (placeholder tokens; a live run puts the server's real answer in
// the history instead).
type Turn struct {
	// Think is the wait after the previous turn's answer (0 on the first).
	Think time.Duration
	// Message and Answer are the turn's tokens: nil until the session is
	// built (Session.Build).
	Message []int
	// Output is the answer's length, the request's max tokens.
	Output int
	Answer []int
	// New and Reused split the turn's prompt: the new message's tokens,
	// and the history before it, which a prefix cache may hold.
	New, Reused int
}

// Session is one conversation.
type Session struct {
	ID    int
	Turns []Turn
	seed  uint64
}

// Prompt is turn k's prompt: every earlier message and answer, in order,
// then turn k's message (of a built session).
func (s Session) Prompt(k int) []int {
	n := s.Turns[k].Reused + s.Turns[k].New
	p := make([]int, 0, n)
	for _, t := range s.Turns[:k] {
		p = append(append(p, t.Message...), t.Answer...)
	}
	return append(p, s.Turns[k].Message...)
}

// Build returns s with its turns' tokens: each session's are its own
// stream, drawn in turn order (message, then answer). Conversations plans
// lengths only, so a run of 100,000 sessions holds the tokens of those in
// flight, not of every session from the start.
func (s Session) Build() Session {
	src := newStream(s.seed, domainConversation, uint64(s.ID))
	turns := make([]Turn, len(s.Turns))
	for k, t := range s.Turns {
		t.Message = src.tokens(t.New)
		t.Answer = src.tokens(t.Output)
		turns[k] = t
	}
	s.Turns = turns
	return s
}

// Conversations plans spec's sessions, deterministic in spec.Seed: each
// turn's lengths and think time, its tokens left to Session.Build. Each
// session's tokens are its own, so sessions share nothing but what a turn
// repeats of its own history.
func Conversations(spec ConversationSpec) ([]Session, error) {
	if spec.Sessions < 1 || spec.Turns < 1 {
		return nil, fmt.Errorf("conversations need at least one session and one turn (have %d sessions, %d turns)", spec.Sessions, spec.Turns)
	}
	if spec.Input == nil || spec.Output == nil {
		return nil, errors.New("conversations need input and output length distributions")
	}
	think := spec.Think
	if think == nil {
		think = Fixed(0)
	}
	r := rand.New(rand.NewPCG(spec.Seed, domainConversation))
	out := make([]Session, spec.Sessions)
	for s := range out {
		sess := Session{ID: s, Turns: make([]Turn, spec.Turns), seed: spec.Seed}
		history := 0
		for k := range sess.Turns {
			in, outLen := length(spec.Input, r), length(spec.Output, r)
			t := Turn{Output: outLen, New: in, Reused: history}
			if k > 0 {
				t.Think = time.Duration(math.Max(0, think.Sample(r)) * float64(time.Second))
			}
			history += in + outLen
			sess.Turns[k] = t
		}
		out[s] = sess
	}
	return out, nil
}

// length draws a token count of at least 1.
func length(d Dist, r *rand.Rand) int {
	v := math.Round(d.Sample(r))
	if v < 1 || math.IsNaN(v) {
		return 1
	}
	return int(min(v, 1<<24))
}

package trace

import (
	"slices"
	"testing"
	"time"
)

func TestConversations(t *testing.T) {
	spec := ConversationSpec{
		Sessions: 3, Turns: 4,
		Input: Uniform{50, 150}, Output: LogNormal{Median: 200, Sigma: 0.5},
		Think: Exponential{Mean: 2}, Seed: 9,
	}
	ss, err := Conversations(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Turns[0].Message != nil {
			t.Fatal("the plan holds tokens: they are built when a session starts")
		}
	}
	again, _ := Conversations(spec)
	for i := range ss {
		ss[i], again[i] = ss[i].Build(), again[i].Build()
	}
	if len(ss) != 3 {
		t.Fatalf("%d sessions", len(ss))
	}
	for si, s := range ss {
		if len(s.Turns) != 4 || s.ID != si {
			t.Fatalf("session %d: %d turns, id %d", si, len(s.Turns), s.ID)
		}
		var history []int
		for k, turn := range s.Turns {
			if (k == 0) != (turn.Think == 0) || turn.Think < 0 {
				t.Errorf("session %d turn %d: think %v", si, k, turn.Think)
			}
			if turn.New != len(turn.Message) || turn.New < 50 || turn.New > 150 || turn.Output != len(turn.Answer) || turn.Output < 1 {
				t.Errorf("session %d turn %d: new %d (message %d), output %d (answer %d)", si, k, turn.New, len(turn.Message), turn.Output, len(turn.Answer))
			}
			p := s.Prompt(k)
			if turn.Reused != len(history) || !slices.Equal(p[:len(history)], history) || !slices.Equal(p[len(history):], turn.Message) {
				t.Errorf("session %d turn %d: the prompt is not the history (%d tokens) and the message", si, k, turn.Reused)
			}
			history = append(append(history, turn.Message...), turn.Answer...)
			a := again[si].Turns[k]
			if a.Think != turn.Think || !slices.Equal(a.Message, turn.Message) || !slices.Equal(a.Answer, turn.Answer) {
				t.Errorf("session %d turn %d: the same seed built another turn", si, k)
			}
		}
	}
	if slices.Equal(ss[0].Turns[0].Message[:40], ss[1].Turns[0].Message[:40]) {
		t.Error("two sessions share their first message")
	}
	other, _ := Conversations(ConversationSpec{Sessions: 1, Turns: 1, Input: Fixed(100), Output: Fixed(10), Seed: 10})
	other[0] = other[0].Build()
	if slices.Equal(other[0].Turns[0].Message, ss[0].Turns[0].Message[:min(100, len(ss[0].Turns[0].Message))]) {
		t.Error("another seed built the same message")
	}
}

func TestConversationsFixed(t *testing.T) {
	ss, err := Conversations(ConversationSpec{Sessions: 1, Turns: 3, Input: Fixed(100), Output: Fixed(1000), Think: Fixed(1.5)})
	if err != nil {
		t.Fatal(err)
	}
	for k, turn := range ss[0].Turns {
		if want := k * 1100; turn.Reused != want || turn.New != 100 {
			t.Errorf("turn %d: reused %d new %d, want %d and 100", k, turn.Reused, turn.New, want)
		}
		if k > 0 && turn.Think != 1500*time.Millisecond {
			t.Errorf("turn %d: think %v", k, turn.Think)
		}
	}
}

func TestConversationsRefuse(t *testing.T) {
	for _, spec := range []ConversationSpec{
		{Sessions: 0, Turns: 1, Input: Fixed(1), Output: Fixed(1)},
		{Sessions: 1, Turns: 0, Input: Fixed(1), Output: Fixed(1)},
		{Sessions: 1, Turns: 1, Output: Fixed(1)},
	} {
		if _, err := Conversations(spec); err == nil {
			t.Errorf("%+v: no error", spec)
		}
	}
}

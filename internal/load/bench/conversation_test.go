package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/trace"
)

func TestParseThinkTime(t *testing.T) {
	good := map[string]ThinkTime{
		"2":                            {Kind: ThinkFixed, Value: 2},
		"500ms":                        {Kind: ThinkFixed, Value: 0.5},
		"fixed:0":                      {Kind: ThinkFixed},
		"uniform:1s,5s":                {Kind: ThinkUniform, Min: 1, Max: 5},
		"exp:mean=3s":                  {Kind: ThinkExponential, Mean: 3},
		"lognormal:median=2,sigma=0.5": {Kind: ThinkLognormal, Median: 2, Sigma: 0.5},
		" exponential:mean=1500ms ":    {Kind: ThinkExponential, Mean: 1.5},
	}
	for in, want := range good {
		got, err := ParseThinkTime(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseThinkTime(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q reads back as %+v, %v", in, got.String(), again, err)
		}
	}
	for _, in := range []string{"", "soon", "-1s", "48h", "uniform:5s,1s", "uniform:1s", "exponential:mean=0",
		"lognormal:median=2s,sigma=11", "gamma:k=2", "exponential:rate=2", "fixed:NaN"} {
		if _, err := ParseThinkTime(in); !errors.Is(err, ErrBadThink) {
			t.Errorf("%q: err %v, want ErrBadThink", in, err)
		}
	}
}

// TestConversationPlan: sessions draw their turn counts from the turns
// distribution, every turn is a synthetic request of the input and output
// lengths, the first turn has no think time and the others the fixed one,
// and one seed gives one plan.
func TestConversationPlan(t *testing.T) {
	cfg := Config{Seed: 9, Warmup: 3, Dataset: DatasetSpec{Kind: DatasetConversation, Sessions: 50,
		Turns: &Dist{Kind: DistUniform, Min: 2, Max: 4}, Think: &ThinkTime{Kind: ThinkFixed, Value: 1.5},
		Input: Dist{Kind: DistFixed, Value: 32}, Output: Dist{Kind: DistFixed, Value: 8}}}
	sessions, reqs, warm, err := cfg.conversation(true)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]int{}
	n := 0
	for _, s := range sessions {
		counts[len(s.turns)]++
		for k, i := range s.turns {
			if i != n || reqs[i].Index != i || reqs[i].PromptTokens != 32 || reqs[i].MaxTokens != 8 || !reqs[i].Synthetic || reqs[i].Prompt == "" {
				t.Fatalf("turn %d: request %d %+v", k, i, reqs[i])
			}
			if want := map[bool]time.Duration{true: 0, false: 1500 * time.Millisecond}[k == 0]; s.think[k] != want {
				t.Errorf("turn %d thinks %v, want %v", k, s.think[k], want)
			}
			n++
		}
	}
	if len(sessions) != 50 || len(reqs) != n || len(warm) != 3 || len(counts) != 3 || counts[2] == 0 || counts[4] == 0 {
		t.Errorf("%d sessions, %d requests, %d warm-up, turn counts %v", len(sessions), len(reqs), len(warm), counts)
	}
	again, reqs2, _, _ := cfg.conversation(true)
	for s := range again {
		if len(again[s].turns) != len(sessions[s].turns) {
			t.Fatalf("session %d: %d turns, then %d", s, len(sessions[s].turns), len(again[s].turns))
		}
	}
	if reqs2[n-1].Prompt != reqs[n-1].Prompt {
		t.Errorf("one seed, two plans")
	}
	// The lengths the server's context must hold: the whole history,
	// every answer at its full length.
	lens, err := cfg.conversationLengths()
	if err != nil {
		t.Fatal(err)
	}
	if lens[1].PromptTokens != 32+8+32 {
		t.Errorf("turn 2 of session 1: %d tokens, want 72", lens[1].PromptTokens)
	}
}

func TestConversationConfigRefused(t *testing.T) {
	ds := DatasetSpec{Kind: DatasetConversation, Sessions: 2, Turns: &Dist{Kind: DistFixed, Value: 2},
		Input: Dist{Kind: DistFixed, Value: 8}, Output: Dist{Kind: DistFixed, Value: 8}}
	for name, cfg := range map[string]Config{
		"duration":         {Dataset: ds, Duration: time.Second, Load: measure.Load{MaxConcurrency: 1}},
		"no turns":         {Dataset: DatasetSpec{Kind: DatasetConversation, Sessions: 2, Input: ds.Input, Output: ds.Output}},
		"turns and a path": {Dataset: DatasetSpec{Kind: DatasetConversation, Sessions: 2, Turns: ds.Turns, Path: "x.json", Input: ds.Input, Output: ds.Output}},
	} {
		cfg.Target.BaseURL, cfg.Target.Model = "http://127.0.0.1:1", "m"
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestConversationLazy: a level of more than eagerTurns turns holds no
// message until its session starts (200,000 turns built up front took 3.9
// GB), and the messages a session then builds are the ones a small level
// of the same seed builds up front.
func TestConversationLazy(t *testing.T) {
	spec := func(sessions int) Config {
		return Config{Seed: 4, Dataset: DatasetSpec{Kind: DatasetConversation, Sessions: sessions,
			Turns: &Dist{Kind: DistFixed, Value: 2}, Input: Dist{Kind: DistFixed, Value: 40}, Output: Dist{Kind: DistFixed, Value: 8}}}
	}
	big, bigReqs, _, err := spec(eagerTurns/2 + 1).conversation(true)
	if err != nil {
		t.Fatal(err)
	}
	small, smallReqs, _, err := spec(3).conversation(true)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range bigReqs {
		if r.Prompt != "" || r.Synthetic {
			t.Fatalf("request %d of a level of %d turns holds a prompt before its session starts", i, len(bigReqs))
		}
	}
	if small[0].lazy != nil {
		t.Fatal("a small level builds its prompts up front (they are aligned with /tokenize)")
	}
	for s := range small {
		b := big[s].lazy.Build()
		for k, i := range small[s].turns {
			if got := trace.Text(b.Turns[k].Message); got != smallReqs[i].Prompt {
				t.Fatalf("session %d turn %d: the lazily built message differs from the one built up front", s, k)
			}
		}
	}
}

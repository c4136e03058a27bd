package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/yamlpos"
)

// conversationSpec is goodSpec with a conversation workload written in
// block style, one field a line (line 14 is kind).
var conversationSpec = strings.Replace(goodSpec, "  dataset: {kind: random, input: 512, output: {uniform: [32, 64]}}\n",
	`  dataset:
    kind: conversation
    sessions: 16
    turns: {uniform: [2, 6]}
    think_time: exponential:mean=3s
    input: 128
    output: {lognormal: {median: 200, sigma: 0.5}}
`, 1)

func TestParseSpecConversation(t *testing.T) {
	if conversationSpec == goodSpec {
		t.Fatal("replacement not applied")
	}
	study, err := parseSpec([]byte(conversationSpec), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := study.Workload.Dataset
	if d.Kind != bench.DatasetConversation || d.Sessions != 16 || d.Turns == nil || *d.Turns != (bench.Dist{Kind: bench.DistUniform, Min: 2, Max: 6}) {
		t.Fatalf("dataset %+v", d)
	}
	if d.Think == nil || *d.Think != (bench.ThinkTime{Kind: bench.ThinkExponential, Mean: 3}) {
		t.Errorf("think time %+v", d.Think)
	}
	if d.Input.Value != 128 || d.Output.Median != 200 {
		t.Errorf("lengths %+v %+v", d.Input, d.Output)
	}
	// The forecast runs a conversation closed loop on the virtual clock:
	// the default sampler is guided, as for any study the launcher can
	// change the settings of.
	study, err = parseSpec([]byte(strings.Replace(conversationSpec, "tuner: {sampler: random, trials: 5, seed: 7}", "tuner: {trials: 5}", 1)), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if study.Tuner.Sampler != "guided" {
		t.Errorf("default sampler %q for a conversation, want guided", study.Tuner.Sampler)
	}
}

// TestParseSpecConversationVirtual: the virtual launcher runs a
// conversation's sessions closed loop on its clock, and a capacity
// search over the rate searches the sessions' arrival rate.
func TestParseSpecConversationVirtual(t *testing.T) {
	src := strings.Replace(conversationSpec, "kind: sim\n  gpus: [0, 1]\n  ready_timeout: 30s\n  time_scale: 50", "kind: virtual\n  gpus: [0, 1]", 1)
	src = strings.Replace(src, "load: {concurrency: [1, 8]}", "load: {capacity: rate}", 1)
	if strings.Count(src, "kind: virtual")+strings.Count(src, "capacity: rate") != 2 {
		t.Fatal("replacements not applied")
	}
	study, err := parseSpec([]byte(src), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if study.Launcher.Kind != "virtual" || !study.Workload.CapacityRate || study.Workload.Dataset.Kind != bench.DatasetConversation {
		t.Errorf("launcher %s, capacity rate %v, dataset %s", study.Launcher.Kind, study.Workload.CapacityRate, study.Workload.Dataset.Kind)
	}
}

func TestParseSpecConversationBad(t *testing.T) {
	for _, tc := range []struct {
		name, old, new   string
		line             int
		field, wantInMsg string
	}{
		{"no sessions", "    sessions: 16\n", "", 15, "workload.dataset.sessions", "missing"},
		{"zero sessions", "sessions: 16", "sessions: 0", 16, "workload.dataset.sessions", ""},
		{"zero turns", "turns: {uniform: [2, 6]}", "turns: 0", 17, "workload.dataset.turns", "must be >= 1"},
		{"bad think time", "think_time: exponential:mean=3s", "think_time: gamma:k=2", 18, "workload.dataset.think_time", "unknown kind"},
		{"negative think time", "think_time: exponential:mean=3s", "think_time: -2s", 18, "workload.dataset.think_time", "want 0 to"},
		{"sessions on random", "kind: conversation", "kind: random", 16, "workload.dataset.sessions", "only with kind: conversation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(conversationSpec, tc.old, tc.new, 1)
			if src == conversationSpec {
				t.Fatalf("replacement %q not applied", tc.old)
			}
			_, err := parseSpec([]byte(src), "c.yaml")
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *yamlpos.Error", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || se.Line != tc.line || se.Field != tc.field || !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("%v: want line %d, field %s, %q", err, tc.line, tc.field, tc.wantInMsg)
			}
		})
	}
}

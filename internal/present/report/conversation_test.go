package report

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/store"
)

const convSpec = `name: conv
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: sim, gpus: [0], time_scale: 10}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  prefix_caching: [true, false]
  max_running_requests: [16, 64]
workload:
  dataset: {kind: conversation, sessions: 32, turns: 3, think_time: "uniform:1s,3s", input: 300, output: 300}
  load: {concurrency: [32]}
slo: {ttft_p99_ms: 1200, tpot_p99_ms: 40}
tuner: {sampler: grid, trials: 4, seed: 1, confirm: false}
`

// convLevel is a conversation level: tput output tokens/s, the engine's
// hit rate (nil: not read) and each turn's median TTFT.
func convLevel(tput float64, hit *float64, ttft ...float64) measure.Level {
	s := measure.Summary{Completed: 96, Duration: 20, OutputThroughput: tput, RequestThroughput: 4.8, RequestGoodput: 4.8,
		TTFT: measure.Stats{N: 96, Median: 60, P99: 300}, TPOT: measure.Stats{N: 96, Median: 9, P99: 12},
		E2EL: measure.Stats{N: 96, Median: 2800, P99: 3500}}
	c := &measure.Conversation{Sessions: 32, SessionsCompleted: 32, NewInputTokens: 28800, ReusedInputTokens: 38400,
		ReusedShare: 38400.0 / 67200, MedianSessionMS: 12345, PrefixCacheHitRate: hit}
	for k, ms := range ttft {
		c.Turns = append(c.Turns, measure.Turn{Turn: k + 1, Sent: 32, Completed: 32, MeanInputTokens: float64(300 + 600*k),
			MeanReusedTokens: float64(600 * k), MedianTTFTMS: ms, P99TTFTMS: 2 * ms})
	}
	s.Conversation = c
	return measure.NewLevel(measure.Load{MaxConcurrency: 32}, s, nil)
}

// TestStudyReportConversation stores a conversation study in SQLite: the
// recommendation (prefix caching on), a runner-up (on, fewer sequences)
// and a trial with the cache off. Both formats show, at the recommended
// level, each one's engine hit rate, new and reused prompt tokens, each
// turn's median TTFT with its prompt length, and the workload as sessions
// of turns; a study of random prompts has no such section.
func TestStudyReportConversation(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.CreateStudy(ctx, store.Study{Name: "conv", Spec: convSpec, Seed: 1, Tool: "servetune test"})
	if err != nil {
		t.Fatal(err)
	}
	on, off := 0.84, 0.0
	for n, tc := range []struct {
		set engine.Settings
		lv  measure.Level
	}{
		{engine.Settings{"prefix_caching": true, "max_running_requests": 64}, convLevel(2100, &on, 130, 25.5, 27.5)},
		{engine.Settings{"prefix_caching": true, "max_running_requests": 16}, convLevel(1900, &on, 150, 26, 28)},
		{engine.Settings{"prefix_caching": false, "max_running_requests": 64}, convLevel(1800, &off, 210, 74.1, 166)},
	} {
		if err := db.StartTrial(ctx, st.ID, n, tc.set, []int{0}); err != nil {
			t.Fatal(err)
		}
		obj := tc.lv.Summary.OutputThroughput
		if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: n, Status: measure.StatusOK, Objective: &obj,
			LoadPoints: []measure.Level{tc.lv}}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Load(ctx, db, "conv")
	if err != nil {
		t.Fatal(err)
	}
	var html, md bytes.Buffer
	if err := s.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"HTML": html.String(), "Markdown": md.String()} {
		for _, want := range []string{
			"Conversation: prefix reuse and TTFT per turn",
			"57% of the prompt tokens", "28800 new, 38400 reused",
			"Median TTFT per turn (ms)", "runner-up (trial 1)", "1500",
			"84%", "0%", "25.5", "74.1", "166", "12345",
			"runner-up", "best with prefix", "32 sessions per level of 3 turns",
		} {
			if !strings.Contains(strings.ReplaceAll(out, `\_`, "_"), want) {
				t.Errorf("%s report lacks %q", name, want)
			}
		}
	}
	// The rows in order: the recommendation, the runner-up, the cache off.
	m := md.String()
	i, j, k := strings.Index(m, "| recommended | 0 |"), strings.Index(m, "| runner-up | 1 |"), strings.Index(m, "=false | 2 |")
	if i < 0 || j < i || k < j {
		t.Errorf("conversation rows out of order or missing (%d, %d, %d):\n%s", i, j, k, m)
	}
	// Turn 3's row: its prompt length, then each configuration's median.
	if !strings.Contains(m, "| 3 | 1500 | 27.5 | 28.0 | 166 |") {
		t.Errorf("no turn-3 row with the three medians:\n%s", m)
	}

	// A random-prompt study: no conversation section.
	st2, err := db.CreateStudy(ctx, store.Study{Name: "small", Spec: smallSpec, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StartTrial(ctx, st2.ID, 0, engine.Settings{"max_running_requests": 32, "gpu_memory_fraction": 0.8}, []int{0}); err != nil {
		t.Fatal(err)
	}
	obj := 9.0
	if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st2.ID, Number: 0, Status: measure.StatusOK, Objective: &obj,
		LoadPoints: []measure.Level{level(0)}}); err != nil {
		t.Fatal(err)
	}
	s2, err := Load(ctx, db, "small")
	if err != nil {
		t.Fatal(err)
	}
	var h2 bytes.Buffer
	if err := s2.WriteHTML(&h2); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h2.String(), "Conversation:") || !strings.Contains(h2.String(), "Serve trial 0") {
		t.Error("a random-prompt study's report has a conversation section, or no recommendation")
	}
}

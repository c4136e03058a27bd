package report

import (
	"bytes"
	"context"
	"github.com/servetune/servetune/tuner/memory"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/serving/engine"
	_ "github.com/servetune/servetune/launcher/kinds" // the quick start's virtual launcher
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

const smallSpec = `name: small
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: [32, 64]
  gpu_memory_fraction: [0.8, 0.9]
workload:
  dataset: {kind: random, input: {lognormal: {median: 256, sigma: 0.5}}, output: {uniform: [32, 96]}}
  load: {concurrency: [8]}
  requests_per_level: 100
slo: {ttft_p99_ms: 800, tpot_p99_ms: 50}
tuner: {sampler: grid, trials: 4, seed: 3, confirm: false}
`

func level(failed int) measure.Level {
	s := measure.Summary{Completed: 100, Failed: failed, Duration: 10, OutputThroughput: 2000, RequestThroughput: 10,
		RequestGoodput: 9, Errors: map[string]int{"http_5xx": failed},
		TTFT: measure.Stats{N: 100, Median: 200, P99: 400}, TPOT: measure.Stats{N: 100, Median: 20, P99: 30},
		E2EL: measure.Stats{N: 100, Median: 2000, P99: 3000}}
	if failed > 0 {
		s.ErrorMessages = map[string]string{"http_5xx": "HTTP 503: server overloaded"}
	}
	return measure.NewLevel(measure.Load{MaxConcurrency: 8}, s, nil)
}

// TestStudyReportFailures stores the cases a report must not hide: a
// failed trial with a long engine message, a trial interrupted and re-run,
// one still running, failed requests inside a level, GPU telemetry, and a
// finding; both formats show them, the message whole.
func TestStudyReportFailures(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.CreateStudy(ctx, store.Study{Name: "small", Spec: smallSpec, Seed: 3, Tool: "servetune test"})
	if err != nil {
		t.Fatal(err)
	}
	set := func(n int) engine.Settings {
		return engine.Settings{"max_running_requests": []int{32, 64}[n%2], "gpu_memory_fraction": []float64{0.8, 0.9}[n/2%2]}
	}
	long := strings.Repeat("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. ", 8) + "END-OF-MESSAGE"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.StartTrial(ctx, st.ID, 0, set(0), []int{0}))
	must(db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusFailed, Failure: engine.FailOOM, FailureMsg: long, LogTail: "engine log line"}))
	must(db.StartTrial(ctx, st.ID, 1, set(1), []int{0}))
	must(db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 1, Status: measure.StatusInterrupted}))
	must(db.StartTrial(ctx, st.ID, 1, set(1), []int{0})) // the resume's re-run
	obj := 9.0
	must(db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 1, Status: measure.StatusOK, Objective: &obj,
		LoadPoints: []measure.Level{level(0)},
		GPU: []gpu.Sample{{Time: time.Now(), GPU: 0, PowerW: 600, UtilGPU: 90, MemUsed: 70 << 30, EnergyMilliJ: 1_000_000},
			{Time: time.Now().Add(10 * time.Second), GPU: 0, PowerW: 600, UtilGPU: 90, MemUsed: 70 << 30, EnergyMilliJ: 7_000_000}}}))
	must(db.StartTrial(ctx, st.ID, 3, set(3), []int{0}))
	must(db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 3, Status: measure.StatusOK, LoadPoints: []measure.Level{level(3)}}))
	must(db.StartTrial(ctx, st.ID, 2, set(2), []int{0})) // still running

	s, err := Load(ctx, db, "small")
	if err != nil {
		t.Fatal(err)
	}
	s.Tool = "servetune report-test"
	s.Findings = []TrialFinding{{Trial: 1, Finding: diagnose.Finding{Level: "concurrency=8", Severity: diagnose.Action, Summary: "requests wait while KV has room",
		Evidence: []diagnose.Evidence{{Name: "waiting peak", Value: 12}}, Advice: "raise max_running_requests"}}}
	var html, md bytes.Buffer
	must(s.WriteHTML(&html))
	must(s.WriteMarkdown(&md))
	for _, want := range []string{
		"END-OF-MESSAGE", "<td>oom</td>", "engine log line",
		"Re-run after an interruption: trial 1", "Running now (or their process died): trials 2",
		"HTTP 503: server overloaded", "600 W", "6000 J", "power (W, sum of GPUs' means)", "Requests wait while KV has room",
		"Serve trial 1", "servetune test", "catalog 2026-01",
	} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Count(html.String(), long) != 1 {
		t.Error("the engine's message is not in the HTML whole, once")
	}
	for _, want := range []string{long, "oom: 1 (trials 0)", "Re-run after an interruption: 1", "HTTP 503", "Requests wait while KV has room"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown report lacks %q", want)
		}
	}
	// Trial 3 lost requests: it does not meet the SLO and is no candidate.
	if strings.Contains(html.String(), "Serve trial 3") {
		t.Error("a level with failed requests was recommended")
	}
}

// TestStudyReportNothingMeasured: a study whose every trial failed still
// gets a report that says so.
func TestStudyReportNothingMeasured(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.CreateStudy(ctx, store.Study{Name: "small", Spec: smallSpec, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StartTrial(ctx, st.ID, 0, engine.Settings{"max_running_requests": 32, "gpu_memory_fraction": 0.8}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusFailed, Failure: engine.FailLaunchError, FailureMsg: "image not found"}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, db, "small")
	if err != nil {
		t.Fatal(err)
	}
	var html bytes.Buffer
	if err := s.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No recommendation: no measured point meets the SLOs", "image not found", "No measured point meets the SLO.", "not recorded"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestReportDiagnosesRecommendation: the report's findings are the
// diagnosis of the recommended configuration's levels (package diagnose).
func TestReportDiagnosesRecommendation(t *testing.T) {
	ctx := context.Background()
	src, err := os.ReadFile("../../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	study, err := spec.ParseSpec([]byte(strings.Replace(string(src), "trials: 24", "trials: 6", 1)), "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := (&tuner.Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, db, "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Findings) == 0 {
		t.Fatal("no findings for the quick start's recommendation")
	}
	for _, f := range s.Findings {
		if f.Summary == "" || len(f.Evidence) == 0 || f.Trial < 0 {
			t.Errorf("finding %+v", f)
		}
	}
}

// TestTicksDiffer: tick labels over a narrow range carry the digits that
// tell them apart (gonum's defaults read 2.6, 2.6, 2.6 from 2.60 to 2.64),
// and no more than a wide range needs.
func TestTicksDiffer(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{2.6, 2.64, []string{"2.60", "2.62", "2.64"}},
		{2861, 2875, []string{"2862", "2868", "2874"}},
		{0, 1000, []string{"0", "500", "1000"}},
	} {
		var got []string
		for _, tk := range (distinctTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("ticks over [%g, %g]: %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestReportReproduce: the reproduce line names no file the study was
// never read from (the store keeps the spec's text, not its path): it says
// to save the spec shown and run it.
func TestReportReproduce(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateStudy(ctx, store.Study{Name: "small", Spec: smallSpec, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, db, "small")
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "save the study spec below as small.yaml") || !strings.Contains(md.String(), "servetune tune small.yaml --fresh") {
		t.Errorf("reproduce line:\n%s", md.String())
	}
}

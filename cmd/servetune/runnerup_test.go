package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/servetune/servetune/store"
)

// runnerUpStudy measures three configurations at two levels and confirms
// the best two twice (virtual time).
const runnerUpStudy = `name: ru
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 3}
space:
  max_running_requests: [8, 16, 32]
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4, 16]}
  requests_per_level: 24
  warmup: 0
slo: {ttft_p99_ms: 60000}
objectives: [max output_throughput_per_gpu]
tuner: {sampler: grid, trials: 3, seed: 2, objective: max output_throughput_per_gpu, confirm: {top: 2, runs: 2}}
`

// TestRunnerUpOneFigure: recommend and the report give the runner-up the
// same figure and interval, for a study whose confirmation runs stopped
// after their first level (their best level that met the SLO is not the
// search trial's).
func TestRunnerUpOneFigure(t *testing.T) {
	ctx := context.Background()
	spec := writeSpec(t, runnerUpStudy)
	src := filepath.Join(t.TempDir(), "src.db")
	if code, out, errs := runCLI(t, "tune", spec, "--db", src); code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	// The same study again, its confirmation runs cut to the first level.
	from, err := store.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	st, err := from.GetStudy(ctx, "ru")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := from.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ru.db")
	to, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := to.Begin(ctx, store.Study{Name: "ru", Spec: st.Spec, Seed: st.Seed}, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	confirmed := 0
	for _, tr := range trials {
		res := store.TrialResult{StudyID: run.Study.ID, Number: tr.Number, Status: tr.Status, Failure: tr.Failure,
			FailureMsg: tr.FailureMsg, Objective: tr.Objective, LoadPoints: tr.LoadPoints}
		if tr.Confirms != nil {
			confirmed++
			res.LoadPoints = res.LoadPoints[:1]
			err = run.StartConfirmation(ctx, tr.Number, *tr.Confirms, tr.Settings, []int{0})
		} else {
			err = run.StartTrial(ctx, tr.Number, tr.Settings, []int{0})
		}
		if err == nil {
			err = run.FinishTrial(ctx, res)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := run.End(ctx, store.StudyFinished); err != nil {
		t.Fatal(err)
	}
	to.Close()
	if confirmed != 4 {
		t.Fatalf("%d confirmation runs, want 4", confirmed)
	}

	code, rec, errs := runCLI(t, "recommend", "ru", "--db", db)
	if code != exitOK {
		t.Fatalf("recommend: exit %d: %s", code, errs)
	}
	out := filepath.Join(t.TempDir(), "ru.md")
	if code, _, errs := runCLI(t, "report", "ru", "--db", db, "--format", "md", "-o", out); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	recFig := regexp.MustCompile(`runner-up: trial (\d+), output_throughput_per_gpu=([^;]+);`).FindStringSubmatch(rec)
	repFig := regexp.MustCompile(`Runner-up: trial (\d+), ([^;(]+?)(?: \(|;)`).FindStringSubmatch(string(md))
	if recFig == nil || repFig == nil {
		t.Fatalf("no runner-up line:\n%s\n%s", rec, md)
	}
	// The Markdown report escapes punctuation ("\\["): compare the text a reader sees.
	repFig[2] = regexp.MustCompile(`\\([[:punct:]])`).ReplaceAllString(repFig[2], "$1")
	t.Logf("recommend: trial %s, %s; report: trial %s, %s", recFig[1], recFig[2], repFig[1], repFig[2])
	// Its runs (one at the second level, two at the first) disagree
	// beyond the noise: both say so.
	if !strings.Contains(rec, "runs disagree beyond their noise") || !strings.Contains(string(md), "runs disagree beyond their noise") {
		t.Errorf("the split runs are not said:\n%s\n%s", rec, md)
	}
	if recFig[1] != repFig[1] || recFig[2] != repFig[2] {
		t.Errorf("recommend says trial %s, %s; the report trial %s, %s", recFig[1], recFig[2], repFig[1], repFig[2])
	}
}

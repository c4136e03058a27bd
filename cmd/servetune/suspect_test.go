package main

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

const suspectSpec = `name: suspect
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: [32, 64]
workload:
  dataset: {kind: random, input: 128, output: 24}
  load: {concurrency: [8]}
  requests_per_level: 100
slo: {ttft_p99_ms: 800}
tuner: {sampler: grid, trials: 2, seed: 1, confirm: false}
`

// TestSuspectLevelShown stores two trials, the better one measured by a
// client that fell behind: trials marks it, recommend warns on stderr
// (its output stays whole) and the report names it; the other trial's
// level, measured normally, is not marked.
func TestSuspectLevelShown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.CreateStudy(ctx, store.Study{Name: "suspect", Spec: suspectSpec, Seed: 1, Tool: "servetune test"})
	if err != nil {
		t.Fatal(err)
	}
	for i, late := range []float64{0.8, 250} {
		n := i + 1
		if err := db.StartTrial(ctx, st.ID, n, engine.Settings{"max_running_requests": 32 * n}, []int{0}); err != nil {
			t.Fatal(err)
		}
		c := measure.NewClient(nil, nil, 0, 0, 300, 2000)
		c.SendLatenessP50, c.SendLatenessP99 = late, 2*late
		c.Judge(300, 2000)
		sum := measure.Summary{Completed: 100, Duration: 10, OutputThroughput: 1000 * float64(n), RequestThroughput: 10, RequestGoodput: 9,
			Errors: map[string]int{}, TTFT: measure.Stats{N: 100, Median: 200, P99: 300}, TPOT: measure.Stats{N: 100, Median: 20, P99: 30},
			E2EL: measure.Stats{N: 100, Median: 2000, P99: 3000}, Client: c}
		obj := 1000 * float64(n)
		if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: n, Status: measure.StatusOK, Objective: &obj,
			LoadPoints: []measure.Level{measure.NewLevel(measure.Load{MaxConcurrency: 8}, sum, nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishStudy(ctx, st.ID, store.StudyFinished); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cli := func(args ...string) (string, string) {
		var out, errb bytes.Buffer
		if code := run(ctx, append(args, "--db", path), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	out, _ := cli("trials", "suspect")
	if strings.Count(out, "(suspect)") != 1 || !strings.Contains(out, "trial 2 at concurrency=8 is suspect: the client sent late: median 250.0 ms") {
		t.Errorf("trials:\n%s", out)
	}
	js, _ := cli("trials", "suspect", "--json", "-")
	if strings.Count(js, `"suspect": true`) != 1 || strings.Count(js, `"send_lateness_p99_ms"`) != 2 {
		t.Errorf("trials --json:\n%s", js)
	}
	out, errs := cli("recommend", "suspect")
	if !strings.Contains(errs, "warning: trial 2 at concurrency=8 is suspect") || strings.Contains(out, "is suspect") {
		t.Errorf("recommend: stdout\n%s\nstderr\n%s", out, errs)
	}
	md, _ := cli("report", "suspect", "--format", "md")
	if !strings.Contains(md, "Suspect level: the benchmark client fell behind** (trial 2 concurrency=8)") || strings.Contains(md, "(trial 1 concurrency=8)") {
		t.Errorf("report:\n%s", md)
	}
	html, _ := cli("report", "suspect")
	if !strings.Contains(html, "Suspect level: the benchmark client fell behind") || !strings.Contains(html, "concurrency=8 (suspect: client fell behind)") {
		t.Error("the HTML report does not mark the suspect level")
	}
}

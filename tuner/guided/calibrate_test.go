package guided

import (
	"context"
	"github.com/servetune/servetune/tuner/memory"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/model/calibrate"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
)

// recoverySpec is a study whose trials and levels excite each efficiency
// constant differently: one request at a time (memory-bound decode, and
// prefills short and long: the median TTFT is a short prompt's, the p99 a
// long one's, which tells attention from the GEMMs), mid and high
// concurrency (compute-bound decode, queueing), one GPU and two (the
// link).
const recoverySpec = `name: recovery
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, calibration: PROFILE}
hardware: {gpu: H100-SXM}
space:
  tensor_parallel: [1, 2]
  max_running_requests: [16, 256]
workload:
  dataset:
    kind: mix
    mix:
      - {weight: 3, spec: {kind: random, input: {uniform: [64, 512]}, output: {uniform: [16, 96]}}}
      - {weight: 1, spec: {kind: random, input: {uniform: [12000, 16000]}, output: {uniform: [16, 96]}}}
  load: {concurrency: [1, 12, 96]}
  requests_per_level: 48
  warmup: 0
slo: {ttft_p99_ms: 100000}
tuner: {sampler: grid, trials: 4, seed: 7, confirm: false}
`

// TestCalibrationRecoversPerturbedConstants is the calibration test of the
// what-if issue: a study runs against the simulated engine whose constants
// were perturbed by up to ±30% (a profile); calibrating from the study's
// trials with the stock constants as the start recovers each perturbed
// constant within 10% and the study's measured p99 TTFT and TPOT within 5%.
func TestCalibrationRecoversPerturbedConstants(t *testing.T) {
	ctx := context.Background()
	stock := sim.StockConstants(engine.VLLM)
	truth := stock
	perturb := map[string]float64{
		"hbm_efficiency":       0.78, // -22%
		"bf16_gemm_efficiency": 1.25, // +25%
		"attention_efficiency": 0.75, // -25%
		"link_efficiency":      1.3,  // +30%
		"step_overhead_ms":     1.3,  // +30%
	}
	for name, f := range perturb {
		v, _ := stock.Get(name)
		if err := truth.Set(name, v*f); err != nil {
			t.Fatal(err)
		}
	}
	profile := filepath.Join(t.TempDir(), "truth.json")
	if err := (sim.Profile{GPU: "H100-SXM", Engine: engine.VLLM, Constants: truth}).Save(profile); err != nil {
		t.Fatal(err)
	}
	study := mustSpec(t, strings.Replace(recoverySpec, "PROFILE", profile, 1))
	db, err := store.Open(ctx, store.Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, err := (&tuner.Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trials, err := db.Trials(ctx, out.StudyID)
	if err != nil {
		t.Fatal(err)
	}
	// The stored study, read back as calibrate would: without the profile.
	plain := mustSpec(t, strings.Replace(recoverySpec, ", calibration: PROFILE", "", 1))
	runs, skipped, err := CalibrationRuns(plain, trials)
	if err != nil || skipped > 0 {
		t.Fatalf("%d runs, %d skipped: %v", len(runs), skipped, err)
	}
	res, err := calibrate.Fit(ctx, runs, stock, calibrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %v in %d evaluations of %d points (loss %.3g -> %.3g); held %v", res.Fitted, res.Evals, res.Points, res.StartLoss, res.Loss, res.Held)
	for name := range perturb {
		want, _ := truth.Get(name)
		got, _ := res.Constants.Get(name)
		start, _ := stock.Get(name)
		t.Logf("%-22s stock %.4g  truth %.4g  fitted %.4g (%+.1f%%)", name, start, want, got, 100*(got/want-1))
		// A constant these points cannot see is held, not guessed: under
		// vLLM's async scheduling the host's step work hides behind a
		// slower GPU step (internal/model/sim/steptime.go), so step_overhead_ms moves no
		// figure here. The errors below still hold the fit to 5%.
		if slices.Contains(res.Held, name+" (no effect on these points)") {
			continue
		}
		if math.Abs(got/want-1) > 0.10 {
			t.Errorf("%s: fitted %.4g, truth %.4g: more than 10%% off", name, got, want)
		}
	}
	for _, e := range res.Errors {
		t.Logf("%-9s median error %.2f%% -> %.2f%% (max %.2f%%) over %d points", e.Metric, 100*e.Before, 100*e.After, 100*e.MaxAfter, e.Points)
		if (e.Metric == "ttft_p99" || e.Metric == "tpot_p99") && e.MaxAfter > 0.05 {
			t.Errorf("%s: largest error after the fit %.1f%%, want within 5%%", e.Metric, 100*e.MaxAfter)
		}
	}
}

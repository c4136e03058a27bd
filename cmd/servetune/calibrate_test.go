package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/model/sim"
)

// calibStudy is a small virtual study against a simulated engine whose
// memory bandwidth is 20% below the stock figure (PROFILE).
const calibStudy = `name: cal
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, calibration: PROFILE}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [16, 128]}
workload:
  dataset: {kind: random, input: {uniform: [64, 2000]}, output: 64}
  load: {concurrency: [1, 32]}
  requests_per_level: 40
  warmup: 0
slo: {ttft_p99_ms: 5000}
tuner: {sampler: grid, trials: 2, confirm: false}
`

// TestCalibrateCLI stores a study measured on a perturbed engine,
// calibrates it, and uses the profile in sim commands: on its GPU, refused
// on another (exit 2, one line) unless forced.
func TestCalibrateCLI(t *testing.T) {
	dir := t.TempDir()
	truth := sim.StockConstants("vllm")
	truth.HBMEfficiency = 0.68
	if err := (sim.Profile{GPU: "H100-SXM", Engine: "vllm", Constants: truth}).Save(filepath.Join(dir, "truth.json")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "cal.yaml")
	if err := os.WriteFile(spec, []byte(strings.Replace(calibStudy, "PROFILE", filepath.Join(dir, "truth.json"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	db, prof := filepath.Join(dir, "cal.db"), filepath.Join(dir, "prof.json")
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errs := cli("tune", spec, "--db", db); code != exitOK {
		t.Fatalf("tune: %d %s", code, errs)
	}
	code, out, errs := cli("calibrate", "cal", "--db", db, "-o", prof, "--engine-version", "v0.11.0", "--fit", "hbm_efficiency")
	if code != exitOK {
		t.Fatalf("calibrate: %d %s", code, errs)
	}
	for _, want := range []string{"hbm_efficiency", "ttft_p99", "tpot_p99", "wrote " + prof, "H100-SXM, vllm v0.11.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("calibrate output lacks %q:\n%s", want, out)
		}
	}
	// Off a terminal the progress is plain lines (it was one endless '\r'
	// line); --no-progress silences it.
	if strings.ContainsAny(errs, "\r\033") || !strings.HasPrefix(errs, "calibrate cal: ") || !strings.Contains(errs, " simulations of 2 runs, loss ") || strings.Count(errs, "\n") > 12 {
		t.Errorf("calibrate progress off a terminal:\n%q", errs)
	}
	if code, _, errs := cli("calibrate", "cal", "--db", db, "-o", filepath.Join(dir, "quiet.json"), "--fit", "hbm_efficiency", "--max-evals", "20", "--no-progress"); code != exitOK || errs != "" {
		t.Errorf("calibrate --no-progress: %d, stderr %q", code, errs)
	}
	p, err := sim.LoadProfile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Constants.HBMEfficiency/0.68 - 1; d > 0.02 || d < -0.02 {
		t.Errorf("fitted hbm_efficiency %.4f, truth 0.68", p.Constants.HBMEfficiency)
	}
	if code, out, errs := cli("sim", "estimate", "llama-3.1-8b", "--calibration", prof); code != exitOK || !strings.Contains(out, "calibration "+prof) {
		t.Errorf("sim estimate with the profile: %d\n%s%s", code, out, errs)
	}
	code, _, errs = cli("sim", "estimate", "llama-3.1-8b", "--gpu", "H200", "--calibration", prof)
	if code != exitUsage || !strings.Contains(errs, "measured on H100-SXM") || strings.Count(errs, "\n") != 1 {
		t.Errorf("profile on another GPU: code %d, stderr %q", code, errs)
	}
	if code, _, errs := cli("sim", "estimate", "llama-3.1-8b", "--gpu", "H200", "--calibration", prof, "--force-calibration"); code != exitOK {
		t.Errorf("forced: %d %s", code, errs)
	}
	// Bad input: one line, exit 2.
	for _, args := range [][]string{
		{"calibrate", "nope", "--db", db, "-o", prof},
		{"calibrate", "cal", "--db", db},
		{"calibrate", "cal", "--db", db, "-o", prof, "--fit", "warp_drive"},
		{"calibrate", "cal", "--db", filepath.Join(dir, "missing.db"), "-o", prof},
	} {
		if code, _, errs := cli(args...); code != exitUsage || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q", args, code, errs)
		}
	}
}

// TestSimModelFromConfig: every sim command takes a Hugging Face
// config.json, or a directory holding one, as its model (vLLM's --model
// DIR).
func TestSimModelFromConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
		"intermediate_size": 8192, "vocab_size": 32000, "max_position_embeddings": 4096}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "estimate", dir}, "tiny"},
		{[]string{"sim", "estimate", "--model", filepath.Join(dir, "config.json"), "--json", "-"}, "tiny"},
		{[]string{"sim", "run", dir, "--input-len", "128", "--output-len", "16", "--num-requests", "20"}, "Successful requests:                   20"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != exitOK || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: code %d\n%s%s", tc.args, code, out.String(), errb.String())
		}
	}
}

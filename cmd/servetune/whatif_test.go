package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/model/whatif"
)

// TestWhatifCLI asks a small question end to end: the table, the prices
// with their dates, the serve commands and the JSON file.
func TestWhatifCLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "w.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM,L4", "--max-gpus", "2",
		"--input-len", "512", "--output-len", "64", "--slo", "ttft_p99_ms=1000,tpot_p99_ms=60", "--target-rps", "25",
		"--price", "L4=0.7", "--trials", "3", "--requests", "60", "--json", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	text := stdout.String()
	for _, want := range []string{"$/month", "reserved", "$/Mtok", "error", "prices used", "H100-SXM  2.95  2026-01, catalog",
		"L4        0.70", "given (--price)", "serve commands", "vllm serve llama-3.1-8b", "searched 4 candidates"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(stderr.String(), "whatif: 4/4 candidates") {
		t.Errorf("no progress line on stderr: %q", stderr.String())
	}
	// stderr is not a terminal here: plain lines, no escape codes.
	if e := stderr.String(); strings.ContainsAny(e, "\r\033") || !strings.HasSuffix(e, "\n") {
		t.Errorf("progress on a non-terminal: %q", e)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows   []map[string]any `json:"rows"`
		Prices map[string]struct {
			PerGPUHour float64 `json:"per_gpu_hour"`
			Date       string  `json:"date"`
		} `json:"prices"`
		Calibration any `json:"calibration"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) != 4 || doc.Prices["L4"].PerGPUHour != 0.7 || doc.Prices["H100-SXM"].Date != "2026-01" || doc.Calibration != nil {
		t.Errorf("JSON: %d rows, prices %+v, calibration %v", len(doc.Rows), doc.Prices, doc.Calibration)
	}
}

// TestWhatifBadInput: one line on stderr, exit 2, nothing searched.
func TestWhatifBadInput(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "h200.json")
	if err := (sim.Profile{GPU: "H200", Engine: "vllm", Constants: sim.StockConstants("vllm")}).Save(prof); err != nil {
		t.Fatal(err)
	}
	base := []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM", "--slo", "ttft_p99_ms=1000", "--trials", "1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown GPU", []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM,Z80", "--slo", "ttft_p99_ms=1000"}, `GPU "Z80"`},
		{"bad SLO", []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM", "--slo", "ttft_p99=fast"}, "want METRIC_STAT_ms=LIMIT"},
		{"no SLO", []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM"}, "--slo"},
		{"fits nowhere", []string{"whatif", "--model", "llama-3.3-70b", "--gpus", "L4", "--max-gpus", "2", "--slo", "ttft_p99_ms=1000"}, "fits on none of the 2 candidates"},
		{"profile for another GPU", append(base, "--calibration", prof), "measured on H200"},
		{"missing profile", append(base, "--calibration", prof+".nope"), "calibration profile"},
		{"bad price", append(base, "--price", "H100-SXM=free"), "--price"},
		{"two targets", append(base, "--target-rps", "3", "--requests-per-day", "1000"), "give one"},
		{"spec tokens alone", append(base, "--spec-tokens", "2"), "--spec-tokens needs --spec-acceptance"},
		{"spec without draft", append(base, "--spec-acceptance", "0.7"), "--spec-method eagle3 needs --spec-draft"},
		{"spec acceptance past 1", append(base, "--spec-acceptance", "1.2", "--spec-method", "ngram"), "--spec-acceptance 1.2"},
		{"unknown model", []string{"whatif", "--model", "acme/none", "--gpus", "H100-SXM", "--slo", "ttft_p99_ms=1000"}, "not in the catalog"},
		{"bad shape", append(base, "--shapes", "aggregated,mixed"), "--shapes"},
		{"bad link", append(base, "--shapes", "disaggregated", "--kv-link", "smoke"), "--kv-link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("code %d, stderr %q (want exit 2, one line with %q)", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestWhatifSpec reads the question from a study spec's whatif: section;
// a flag wins over it.
func TestWhatifSpec(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(spec, []byte(`name: w
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
space: {max_running_requests: [64]}
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4]}
slo: {ttft_p99_ms: 800, tpot_p99_ms: 50}
whatif:
  gpus: [L4]
  max_gpus: 1
  requests_per_day: 86400
  peak_factor: 3
  prices: {L4: 0.9}
  trials: 2
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"whatif", "--spec", spec, "--requests", "40", "--no-progress", "--reserved-discount", "0.5"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"target 3 req/s", "reserved (-50%)", "L4        0.90", "SLO tpot_p99<=50ms ttft_p99<=800ms", "input 256, output 32"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestWhatifProgress: on a terminal the line is redrawn in place; on a
// file or pipe each finished candidate is a plain line of its own.
func TestWhatifProgress(t *testing.T) {
	for _, tty := range []bool{true, false} {
		var b bytes.Buffer
		var last time.Time
		p := whatifProgress(&b, tty, &last)
		for i, done := range []int{0, 0, 1, 1, 2} {
			p(whatif.Progress{Done: done, Total: 2, Running: "H200 x1 vllm: trial 1/3", Elapsed: time.Duration(i) * time.Second})
		}
		got := b.String()
		if tty {
			if !strings.HasPrefix(got, "\r\033[Kwhatif: 0/2 candidates") || !strings.HasSuffix(got, "\r\033[Kwhatif: 2/2 candidates  H200 x1 vllm: trial 1/3  4s") {
				t.Errorf("terminal: %q", got)
			}
			continue
		}
		want := "whatif: 0/2 candidates  H200 x1 vllm: trial 1/3  0s\nwhatif: 1/2 candidates  H200 x1 vllm: trial 1/3  2s\nwhatif: 2/2 candidates  H200 x1 vllm: trial 1/3  4s\n"
		if got != want {
			t.Errorf("not a terminal:\n got %q\nwant %q", got, want)
		}
	}
}

// TestWhatifShapesCLI: with both shapes the table names each row's
// shape, a line says which wins, and a disaggregated row's commands are
// its parts' and its router's.
func TestWhatifShapesCLI(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"whatif", "--model", "llama-3.1-8b", "--gpus", "H100-SXM", "--max-gpus", "2",
		"--input-len", "4000", "--output-len", "200", "--slo", "tpot_p99_ms=30", "--shapes", "aggregated,disaggregated", "--kv-link", "infiniband",
		"--trials", "3", "--requests", "60", "--no-progress"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	text := stdout.String()
	for _, want := range []string{"shape", "aggregated", "P1xTP1:D1xTP1", "wins for this workload and SLO", "(infiniband KV link)",
		"prefill x1 (1 GPUs each): vllm serve llama-3.1-8b", "--kv-transfer-config", "router: python3 toy_proxy_server.py"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

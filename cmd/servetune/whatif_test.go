package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/tuner/whatif"
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
		"prefill x1 (1 GPUs each): vllm serve llama-3.1-8b", "--kv-transfer-config", "router: vllm-router --vllm-pd-disaggregation"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// TestWhatifSpecDeployment: whatif.shapes, whatif.kv_link and
// whatif.speculative give the options their flags give; a spec's
// disaggregation.kv_link is the link when whatif names none, and a flag
// overrides the spec's value field by field.
func TestWhatifSpecDeployment(t *testing.T) {
	const base = `name: w
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
space: {max_running_requests: [64]%s}
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4]}
slo: {ttft_p99_ms: 800}
%swhatif:
  gpus: [L4]
%s`
	const disagg = `disaggregation:
  router: ["{servetune}", sim, router, --port, "{port}", --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}", --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]
  kv_link: roce
`
	flagsBase := []string{"--model", "x", "--gpus", "L4", "--slo", "ttft_p99_ms=800"}
	for _, tc := range []struct {
		name         string
		disagg       bool     // the spec has a disaggregation section (kv_link: roce)
		whatif       string   // lines under whatif:
		specFlags    []string // flags given with --spec
		flags        []string // the same question in flags alone
		shapes       []string
		link         string
		specDecoding *whatif.Speculation
	}{
		{name: "none", flags: nil},
		{name: "both shapes and a link",
			whatif: "  shapes: [aggregated, disaggregated]\n  kv_link: infiniband\n",
			flags:  []string{"--shapes", "aggregated,disaggregated", "--kv-link", "infiniband"},
			shapes: []string{"aggregated", "disaggregated"}, link: "infiniband"},
		{name: "link from disaggregation", disagg: true,
			whatif: "  shapes: [disaggregated]\n",
			flags:  []string{"--shapes", "disaggregated", "--kv-link", "roce"},
			shapes: []string{"disaggregated"}, link: "roce"},
		{name: "whatif link over disaggregation's", disagg: true,
			whatif: "  kv_link: ethernet\n",
			flags:  []string{"--kv-link", "ethernet"},
			link:   "ethernet"},
		{name: "flag link over the spec's", disagg: true,
			specFlags: []string{"--kv-link", "pcie"},
			flags:     []string{"--kv-link", "pcie"},
			link:      "pcie"},
		{name: "speculative defaults",
			whatif:       "  speculative: {acceptance: 0.7, draft: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B}\n",
			flags:        []string{"--spec-acceptance", "0.7", "--spec-draft", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
			specDecoding: &whatif.Speculation{Method: "eagle3", Tokens: 3, Draft: "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", Acceptance: 0.7}},
		{name: "speculative ngram",
			whatif:       "  speculative: {acceptance: 0.4, tokens: 5, method: ngram}\n",
			flags:        []string{"--spec-acceptance", "0.4", "--spec-tokens", "5", "--spec-method", "ngram"},
			specDecoding: &whatif.Speculation{Method: "ngram", Tokens: 5, Acceptance: 0.4}},
		{name: "flags override speculative fields",
			whatif:       "  speculative: {acceptance: 0.4, tokens: 5, method: ngram}\n",
			specFlags:    []string{"--spec-tokens", "2", "--spec-acceptance", "0.6"},
			flags:        []string{"--spec-acceptance", "0.6", "--spec-tokens", "2", "--spec-method", "ngram"},
			specDecoding: &whatif.Speculation{Method: "ngram", Tokens: 2, Acceptance: 0.6}},
	} {
		if tc.shapes == nil {
			tc.shapes = []string{whatif.ShapeAggregated}
		}
		if tc.link == "" {
			tc.link = sim.DefaultLink
		}
		t.Run(tc.name, func(t *testing.T) {
			space, section := "", ""
			if tc.disagg {
				space, section = ", disaggregated: [false, true]", disagg
			}
			path := filepath.Join(t.TempDir(), "w.yaml")
			if err := os.WriteFile(path, []byte(fmt.Sprintf(base, space, section, tc.whatif)), 0o600); err != nil {
				t.Fatal(err)
			}
			fromSpec := whatifTestOptions(t, append([]string{"--spec", path}, tc.specFlags...))
			fromFlags := whatifTestOptions(t, append(slices.Clone(flagsBase), tc.flags...))
			for _, o := range []whatif.Options{fromSpec, fromFlags} {
				if !slices.Equal(o.Shapes, tc.shapes) || o.KVLink != tc.link {
					t.Errorf("shapes %q, link %q; want %q, %q", o.Shapes, o.KVLink, tc.shapes, tc.link)
				}
				if (o.Spec == nil) != (tc.specDecoding == nil) || o.Spec != nil && *o.Spec != *tc.specDecoding {
					t.Errorf("speculation %+v, want %+v", o.Spec, tc.specDecoding)
				}
			}
		})
	}
}

// whatifTestOptions parses args as whatif's flags and returns the
// options they ask for.
func whatifTestOptions(t *testing.T, args []string) whatif.Options {
	t.Helper()
	var f whatifFlags
	cmd := whatifCmd(&f)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	o, err := whatifOptions(cmd.Flags(), &f)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return o
}

// The question, small: gpt-oss-120b on H200 and B200 gets rows,
// its MXFP4 checkpoint named as the rows' weights, and serve commands
// that keep the checkpoint's format (no --quantization: the engines read
// it from config.json).
func TestWhatifGptOss(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"whatif", "--model", "openai/gpt-oss-120b", "--gpus", "H200,B200", "--max-gpus", "1",
		"--input-len", "2048", "--output-len", "500", "--slo", "ttft_p99_ms=1000,tpot_p99_ms=30", "--target-rps", "20",
		"--trials", "2", "--requests", "40", "--no-progress"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	text := stdout.String()
	for _, want := range []string{"weights mxfp4 (the checkpoint's", "H200", "B200", "vllm serve openai/gpt-oss-120b"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, cmds, _ := strings.Cut(text, "serve commands"); strings.Contains(cmds, "--quantization") {
		t.Errorf("a serve command overrides the checkpoint's quantization:\n%s", text)
	}
}

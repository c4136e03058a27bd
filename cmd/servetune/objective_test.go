package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// objectiveStudy optimises p99 TPOT: a small batch decodes each token
// sooner and serves fewer of them per second, so the study's objective
// and throughput pick different configurations (virtual time).
const objectiveStudy = `name: obj
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: [2, 32]
workload:
  dataset: {kind: random, input: 256, output: 64}
  load: {concurrency: [32]}
  requests_per_level: 48
  warmup: 0
slo: {ttft_p99_ms: 600000}
tuner: {sampler: grid, trials: 2, seed: 1, objective: min tpot_p99, confirm: false}
`

// TestRecommendRanksByObjective: recommend, diagnose and tune's last
// lines rank by the study's tuner.objective and say so; --prefer takes
// throughput or any metric instead.
func TestRecommendRanksByObjective(t *testing.T) {
	spec := writeSpec(t, objectiveStudy)
	db := t.TempDir() + "/obj.db"
	code, out, errs := runCLI(t, "tune", spec, "--db", db)
	if code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "best min tpot_p99 (the study's objective)") || !strings.Contains(out, "--max-num-seqs 2") {
		t.Errorf("tune's recommendation does not rank by min tpot_p99 (want max_running_requests 2):\n%s", out)
	}
	_, out, _ = runCLI(t, "recommend", "obj", "--db", db)
	if !strings.Contains(out, "best min tpot_p99 (the study's objective)") || !strings.Contains(out, "--max-num-seqs 2") {
		t.Errorf("recommend:\n%s", out)
	}
	_, out, _ = runCLI(t, "recommend", "obj", "--db", db, "--prefer", "throughput")
	if !strings.Contains(out, "best throughput under") || !strings.Contains(out, "--max-num-seqs 32") {
		t.Errorf("recommend --prefer throughput:\n%s", out)
	}
	_, out, _ = runCLI(t, "recommend", "obj", "--db", db, "--prefer", "output_throughput_per_gpu")
	if !strings.Contains(out, "best max output_throughput_per_gpu under") {
		t.Errorf("recommend --prefer output_throughput_per_gpu:\n%s", out)
	}
	_, out, _ = runCLI(t, "diagnose", "obj", "--db", db)
	if !strings.Contains(out, "prefer min tpot_p99 (the study's objective)") {
		t.Errorf("diagnose:\n%s", out)
	}
	if code, _, errs := runCLI(t, "recommend", "obj", "--db", db, "--prefer", "speed"); code != exitUsage || !strings.Contains(errs, "goodput_per_gpu") {
		t.Errorf("--prefer speed: exit %d, %s; want a usage error listing the metrics", code, errs)
	}
}

// TestRecommendNamesEngineVersion: the printed command names the engine
// release it is for (the newest known by default), a flag that release
// lacks is called out, --engine-version picks another, and an SGLang
// command from a vLLM-measured study warns.
func TestRecommendNamesEngineVersion(t *testing.T) {
	src := strings.Replace(objectiveStudy, "  max_running_requests: [2, 32]\n", "  max_running_requests: [2, 32]\n  extra_args: [--disable-log-requests]\n", 1)
	spec := writeSpec(t, src)
	db := t.TempDir() + "/obj.db"
	if code, out, errs := runCLI(t, "tune", spec, "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	newest := engine.NewestVersion(engine.VLLM).String()
	_, out, _ := runCLI(t, "recommend", "obj", "--db", db)
	if !strings.Contains(out, "# for vllm "+newest) || !strings.Contains(out, "# warning: --disable-log-requests: vllm "+newest+" has no such flag") {
		t.Errorf("recommend: want the version %s named and --disable-log-requests refused:\n%s", newest, out)
	}
	_, out, _ = runCLI(t, "recommend", "obj", "--db", db, "--engine-version", "0.9.2")
	if !strings.Contains(out, "# for vllm 0.9.2") || strings.Contains(out, "warning: --disable-log-requests") {
		t.Errorf("recommend --engine-version 0.9.2: want 0.9.2 named, the flag taken:\n%s", out)
	}
	if code, _, errs := runCLI(t, "recommend", "obj", "--db", db, "--engine-version", "0.1.0"); code != exitUsage || !strings.Contains(errs, "0.6.0") {
		t.Errorf("--engine-version 0.1.0: exit %d, %s; want a usage error naming the known span", code, errs)
	}
	_, out, errs := runCLI(t, "recommend", "obj", "--db", db, "--format", "sglang")
	if !strings.Contains(errs, "measured on vllm") || !strings.Contains(out, "# for sglang "+engine.NewestVersion(engine.SGLang).String()) {
		t.Errorf("--format sglang: want a warning and the SGLang version:\nstdout %s\nstderr %s", out, errs)
	}
}

// TestSimHelpListsFlags: the sim commands that parse their own arguments
// (run, serve, estimate, router) list them in --help (cobra alone lists
// only -h), and no help offers a model every command refuses.
func TestSimHelpListsFlags(t *testing.T) {
	for _, c := range [][]string{{"sim", "run", "--help"}, {"sim", "serve", "--help"}} {
		_, out, _ := runCLI(t, c...)
		for _, want := range []string{"--max-num-seqs", "--gpu ", "--enforce-eager              turns off:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q:\n%s", c, want, out)
			}
		}
	}
	if _, out, _ := runCLI(t, "sim", "run", "--help"); !strings.Contains(out, "--max-concurrency") {
		t.Errorf("sim run --help lists no workload flags:\n%s", out)
	}
	if _, out, _ := runCLI(t, "sim", "estimate", "--help"); !strings.Contains(out, "--json PATH") || !strings.Contains(out, "--max-num-seqs") {
		t.Errorf("sim estimate --help lists neither --json nor the engine's flags:\n%s", out)
	}
	_, out, _ := runCLI(t, "sim", "router", "--help")
	for _, f := range routerFlags {
		if !strings.Contains(out, f.name+" "+f.value) {
			t.Errorf("sim router --help lacks %s:\n%s", f.name, out)
		}
	}
	for _, want := range []string{"--host HOST", "--port PORT", "--prefiller-hosts", "--decoder-ports"} {
		if !strings.Contains(out, want) {
			t.Errorf("sim router --help lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runCLI(t, "sim", "estimate", "--help")
	if !strings.Contains(out, "Llama-3.1-8B") {
		t.Errorf("sim estimate --help offers no model:\n%s", out)
	}
	for _, m := range catalog.Models() {
		if err := m.Simulable(); err != nil && strings.Contains(out, m.ID+" ") {
			t.Errorf("sim estimate --help offers %s, which every command refuses (%v)", m.ID, err)
		}
	}
}

// TestExamplesNameRealFlags: every `servetune recommend` line an example
// spec's comments advise takes only flags recommend has.
func TestExamplesNameRealFlags(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v", err)
	}
	flags := newRecommendCmd().Flags()
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			_, cmdline, ok := strings.Cut(line, "servetune recommend ")
			if !ok || !strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, w := range strings.Fields(cmdline) {
				if w == "#" {
					break
				}
				if name, ok := strings.CutPrefix(w, "--"); ok {
					name, _, _ = strings.Cut(name, "=")
					if flags.Lookup(name) == nil && name != "db" {
						t.Errorf("%s advises `servetune recommend ... --%s`: recommend has no such flag", f, name)
					}
				}
			}
		}
	}
}

// TestVLLMBenchSpellings: a `vllm bench serve` command line's names run
// as they are: --num-prompts, --dataset-name, space-separated --goodput,
// --percentile-metrics and --tokenizer; a bad percentile metric is a
// usage error.
func TestVLLMBenchSpellings(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, errs := runCLI(t, "sim", "run", "meta-llama/Llama-3.1-8B-Instruct", "--dataset-name", "random", "--input-len", "128",
		"--output-len", "16", "--num-prompts", "20", "--max-concurrency", "4", "--goodput", "ttft:500", "tpot:50",
		"--percentile-metrics", "ttft,tpot,itl", "--tokenizer", "meta-llama/Llama-3.1-8B-Instruct", "--json", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "Successful requests:                   20") || !strings.Contains(stdout, "Request goodput") {
		t.Errorf("want 20 requests and goodput:\n%s", stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(raw), `"tpot_ms": 50`) || !strings.Contains(string(raw), `"ttft_ms": 500`) {
		t.Errorf("goodput limits not both taken: %v\n%.400s", err, raw)
	}
	if code, _, errs := runCLI(t, "sim", "run", "meta-llama/Llama-3.1-8B-Instruct", "--num-prompts", "4", "--percentile-metrics", "ttft,speed"); code != exitUsage || !strings.Contains(errs, "speed") {
		t.Errorf("--percentile-metrics ttft,speed: exit %d, %s", code, errs)
	}
	if got := joinGoodput([]string{"bench", "--goodput", "ttft:500", "tpot:50", "--seed", "1"}); strings.Join(got, " ") != "bench --goodput=ttft:500,tpot:50 --seed 1" {
		t.Errorf("joinGoodput = %q", got)
	}
}

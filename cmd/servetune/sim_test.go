package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/catalog"
)

// TestSimEstimateHelpListsCatalog: docs/spec.md sends readers to `sim
// estimate --help` for the model ids; it lists every catalog model the
// simulator runs (a model it only sizes, refused by every command, is not
// offered) and every GPU.
func TestSimEstimateHelpListsCatalog(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"sim", "estimate", "--help"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, m := range catalog.Models() {
		if m.Simulable() != nil {
			if strings.Contains(out.String(), m.ID) {
				t.Errorf("help offers %s, which every command refuses", m.ID)
			}
			continue
		}
		if !strings.Contains(out.String(), "  "+m.ID) {
			t.Errorf("help lacks model %s", m.ID)
		}
		for _, a := range m.Aliases {
			if !strings.Contains(out.String(), a) {
				t.Errorf("help lacks alias %s of %s", a, m.ID)
			}
		}
	}
	for _, g := range catalog.GPUs() {
		if !strings.Contains(out.String(), g.ID) {
			t.Errorf("help lacks GPU %s", g.ID)
		}
	}
}

func TestSimEstimateCLI(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		kvApprox float64
	}{
		{"8B fits", []string{"sim", "estimate", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16000", "--json", "-"}, exitOK, `"kv_cache_tokens"`, "", 51.38},
		{"70B fp8 TP2", []string{"sim", "estimate", "--model", "llama-3.3-70b", "--quantization", "fp8", "-tp", "2", "--max-model-len", "16000", "--json", "-"}, exitOK, `"weights_gib"`, "", 32.0},
		{"70B fp8 TP1 fails", []string{"sim", "estimate", "llama-3.3-70b", "--quantization", "fp8", "--max-model-len", "16000"}, exitFailed, "KV cache", "No available memory for the cache blocks", 0},
		{"sglang", []string{"sim", "estimate", "--model-path", "qwen2.5-7b", "--tp-size", "1", "--context-length", "8192"}, exitOK, "KV cache", "", 0},
		{"unknown flag", []string{"sim", "estimate", "llama-3.1-8b", "--bogus", "1"}, exitUsage, "", "unrecognized arguments: --bogus", 0},
		{"unknown model", []string{"sim", "estimate", "acme/none"}, exitUsage, "", "not in the catalog", 0},
		{"bad gpu", []string{"sim", "estimate", "llama-3.1-8b", "--gpu", "Z80"}, exitUsage, "", `GPU "Z80"`, 0},
		{"tp must divide heads", []string{"sim", "estimate", "llama-3.1-8b", "-tp", "3", "--num-gpus", "4"}, exitUsage, "", "must be divisible by tensor parallel size", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errb)
			if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errb.String(), tt.stderr) {
				t.Fatalf("code %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, out.String(), errb.String())
			}
			if tt.kvApprox > 0 {
				var est struct {
					KV float64 `json:"kv_cache_gib"`
				}
				if err := json.Unmarshal(out.Bytes(), &est); err != nil {
					t.Fatal(err)
				}
				if d := est.KV/tt.kvApprox - 1; d > 0.08 || d < -0.08 {
					t.Errorf("kv_cache_gib %.2f, want ~%.2f", est.KV, tt.kvApprox)
				}
			}
			if strings.Count(errb.String(), "\n") > 1 {
				t.Errorf("error is more than one line: %q", errb.String())
			}
		})
	}
}

func TestSimRunCLI(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "result.json")
	args := []string{"sim", "run", "llama-3.1-8b", "--max-model-len", "4096", "--gpu", "H100-SXM",
		"--input-len", "256", "--output-len", "32", "--max-concurrency", "16", "--num-requests", "200",
		"--seed", "3", "--bootstrap", "10", "--json", jsonPath}
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != exitOK {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"completed", "output_throughput", "median_ttft_ms", "p99_tpot_ms", "meta"} {
		if _, ok := res[k]; !ok {
			t.Errorf("result JSON lacks %q", k)
		}
	}
	if res["completed"].(float64) != 200 {
		t.Errorf("completed = %v", res["completed"])
	}
	// Same seed, same numbers.
	var out2 bytes.Buffer
	args[len(args)-1] = filepath.Join(dir, "again.json")
	run(context.Background(), args, &out2, &errb)
	b2, _ := os.ReadFile(args[len(args)-1])
	var res2 map[string]any
	_ = json.Unmarshal(b2, &res2)
	if res["median_ttft_ms"] != res2["median_ttft_ms"] || res["output_throughput"] != res2["output_throughput"] {
		t.Errorf("not deterministic: %v vs %v", res["median_ttft_ms"], res2["median_ttft_ms"])
	}

	// Bad workload flags are usage errors.
	errb.Reset()
	if code := run(context.Background(), []string{"sim", "run", "llama-3.1-8b", "--request-rate", "fast"}, &out, &errb); code != exitUsage {
		t.Errorf("bad rate: code %d, %s", code, errb.String())
	}
	// A config that does not fit fails with the engine's message.
	errb.Reset()
	if code := run(context.Background(), []string{"sim", "run", "llama-3.3-70b", "-q", "fp8", "--max-model-len", "8192", "--num-requests", "5"}, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), "No available memory for the cache blocks") {
		t.Errorf("OOM: code %d, %s", code, errb.String())
	}
}

func TestSimServeCLIStartupFailure(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"sim", "serve", "--model", "Qwen/Qwen3-32B", "--max-model-len", "32000", "--port", "0"}, &out, &errb)
	if code != exitFailed || !strings.Contains(errb.String(), "KV cache is needed, which is larger than the available KV cache memory") {
		t.Fatalf("code %d: %s", code, errb.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and any readers, who
// may wait for what is written (await).
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // closed by the next Write; nil while nobody waits
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote != nil {
		close(s.wrote)
		s.wrote = nil
	}
	return s.b.Write(p)
}

// await waits until the text written holds a match of re, waking on each
// write, and returns the match with its groups; after within it fails
// the test with what was written.
func (s *syncBuffer) await(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		m := re.FindStringSubmatch(s.b.String())
		if m == nil && s.wrote == nil {
			s.wrote = make(chan struct{})
		}
		wrote := s.wrote
		s.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-wrote:
		case <-deadline.C:
			t.Fatalf("no %q in %v of output: %s", re, within, s.String())
		}
	}
}

// uvicornURL is the base URL `sim serve` logs once it listens, as vLLM's
// server does.
var uvicornURL = regexp.MustCompile(`Uvicorn running on (\S+)`)

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSimServeCLI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	var wg sync.WaitGroup
	code := -1
	wg.Go(func() {
		code = run(ctx, []string{"sim", "serve", "llama-3.1-8b", "--max-model-len", "2048", "--host", "127.0.0.1", "--port", "0", "--sim-load-time", "10ms", "--time-scale", "20"}, &out, &errb)
	})
	defer func() {
		cancel()
		wg.Wait()
		if code != exitOK {
			t.Errorf("exit code %d: %s", code, errb.String())
		}
	}()
	base := errb.await(t, uvicornURL, 5*time.Second)[1]
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"llama-3.1-8b","prompt":"a b","max_tokens":4,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(body), "data: ") != 5 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream: %s", body)
	}
}

func TestSimRunDurationCLI(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"duration with rate", []string{"--request-rate", "20", "--duration", "10s"}, exitOK, "Successful requests"},
		// Closed loop for a duration and warm-up requests run in virtual
		// time as they would against a server.
		{"duration without rate", []string{"--max-concurrency", "4", "--duration", "10s"}, exitOK, "concurrency=4"},
		{"warmup", []string{"--warmup", "3"}, exitOK, "Successful requests:                   1000"},
		{"duration without rate or cap", []string{"--duration", "10s"}, exitUsage, "needs a request rate or a max concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"sim", "run", "llama-3.1-8b", "--max-model-len", "2048", "--input-len", "128", "--output-len", "16", "--bootstrap", "5"}, tt.args...)
			code := run(context.Background(), args, &out, &errb)
			if code != tt.code || !strings.Contains(out.String()+errb.String(), tt.want) {
				t.Fatalf("code %d: %s%s", code, out.String(), errb.String())
			}
		})
	}
}

// A model the simulated engine cannot cost is refused by name, with its
// weights sized, by every command that simulates it; never sized as
// something else (DeepSeek-V3 read as a dense 38B model once). Jamba's
// Mamba layers are not modelled.
func TestUnmodelledModelRefused(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../internal/serving/catalog/testdata/jamba-1.5-mini.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(strings.NewReplacer("REQS", "8", "TRIALS", "2").Replace(tuneSpec),
		"model: meta-llama/Llama-3.1-8B-Instruct", "model: "+dir, 1)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"sim estimate", []string{"sim", "estimate", dir, "--gpu", "B200"}},
		{"whatif", []string{"whatif", "--model", dir, "--gpus", "B200,H100-SXM", "--slo", "tpot_p99_ms=50", "--target-rps", "3", "--no-progress"}},
		{"tune --dry-run", []string{"tune", "--dry-run", writeSpec(t, spec)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", code, stderr)
			}
			for _, f := range []string{"mamba_d_state", "attn_layer_period", "JambaForCausalLM"} {
				if !strings.Contains(stderr, f) {
					t.Errorf("stderr %q does not name %s", stderr, f)
				}
			}
		})
	}
	code, _, stderr := runCLI(t, "sim", "estimate", dir, "--gpu", "B200")
	if code != exitUsage || !strings.Contains(stderr, "GiB at 16-bit") {
		t.Errorf("sim estimate: exit %d, stderr %q: want the weights sized", code, stderr)
	}
	// A Mixtral-style config.json is modelled: its experts count in the weights.
	mix := t.TempDir()
	raw, err = os.ReadFile("../../internal/serving/catalog/testdata/mixtral-8x7b.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mix, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "sim", "estimate", mix, "-tp", "2", "--max-model-len", "8192", "--json", "-")
	var est struct {
		Weights float64 `json:"weights_gib"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &est) != nil || est.Weights < 43 || est.Weights > 44 {
		t.Errorf("Mixtral TP2: exit %d, weights %.2f GiB per GPU (want 46.7B*2/2 bytes, ~43.5 GiB); stderr %q", code, est.Weights, stderr)
	}
}

// DeepSeek-V3 (FP8, 671B) on 8 H200: with TP8 and with DP8 + EP8, sim
// estimate prints the weights, the MLA KV cache and the tokens that fit
// per GPU and in total; on 8 H100 it fails with vLLM's own message. The
// catalog's entry and its config.json (a directory holding it) agree.
func TestSimEstimateDeepSeekV3(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../internal/serving/catalog/testdata/deepseek-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"deepseek-ai/DeepSeek-V3", dir} {
		for _, tc := range []struct {
			name    string
			layout  []string
			want    []string
			perGPU  int // tokens per GPU at least
			ranks   int
			weights float64 // GiB per GPU
		}{
			{"tp8", []string{"-tp", "8"}, []string{"TP 8 PP 1 DP 1", "routed experts", "sliced over 8 GPUs", "MLA latent"}, 600000, 1, 78.33},
			{"dp8 ep8", []string{"-dp", "8", "--enable-expert-parallel"},
				[]string{"TP 1 PP 1 DP 8, data-parallel attention, EP 8", "whole experts over 8 GPUs", "MLA latent", "in total (8 data-parallel ranks)"}, 400000, 8, 93.79},
		} {
			t.Run(filepath.Base(model)+" "+tc.name, func(t *testing.T) {
				args := append([]string{"sim", "estimate", model, "--gpu", "H200", "--max-model-len", "32768"}, tc.layout...)
				code, stdout, stderr := runCLI(t, args...)
				if code != exitOK {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				for _, w := range append(tc.want, "weights", "KV cache", "tokens that fit") {
					if !strings.Contains(stdout, w) {
						t.Errorf("output lacks %q:\n%s", w, stdout)
					}
				}
				code, stdout, _ = runCLI(t, append(args, "--json", "-")...)
				var est struct {
					Weights     float64 `json:"weights_gib"`
					MLA         bool    `json:"mla"`
					Tokens      int     `json:"kv_cache_tokens"`
					TokensTotal int     `json:"kv_cache_tokens_total"`
				}
				if code != exitOK || json.Unmarshal([]byte(stdout), &est) != nil {
					t.Fatalf("--json: exit %d, %s", code, stdout)
				}
				if math.Abs(est.Weights-tc.weights) > 0.01 || !est.MLA || est.Tokens < tc.perGPU || est.TokensTotal != est.Tokens*tc.ranks {
					t.Errorf("weights %.2f GiB (want %.2f), MLA %v, %d tokens per GPU (want at least %d), %d in total (want ×%d)",
						est.Weights, tc.weights, est.MLA, est.Tokens, tc.perGPU, est.TokensTotal, tc.ranks)
				}
			})
		}
		code, stdout, stderr := runCLI(t, "sim", "estimate", model, "--gpu", "H100-SXM", "-tp", "8", "--max-model-len", "32768")
		if code != exitFailed || !strings.Contains(stderr, "No available memory for the cache blocks") || !strings.Contains(stdout, "weights") {
			t.Errorf("8 H100: exit %d, stderr %q, stdout %q: want vLLM's out-of-memory message", code, stderr, stdout)
		}
	}
}

// TestSimRunSpeculative: sim run takes vLLM's --speculative-config and the
// simulator's --spec-acceptance; EAGLE with 3 drafts at acceptance 0.7
// lowers the median TPOT at concurrency 1 and gains less at 256.
func TestSimRunSpeculative(t *testing.T) {
	dir := t.TempDir()
	tpot := func(conc int, spec bool) float64 {
		t.Helper()
		path := filepath.Join(dir, fmt.Sprintf("r%d%v.json", conc, spec))
		args := []string{"sim", "run", "llama-3.1-8b", "--max-model-len", "4096", "--gpu", "H100-SXM",
			"--input-len", "512", "--output-len", "128", "--max-concurrency", strconv.Itoa(conc),
			"--num-requests", strconv.Itoa(max(8, 2*conc)), "--seed", "3", "--bootstrap", "10", "--json", path}
		if spec {
			args = append(args, "--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`, "--spec-acceptance", "0.7")
		}
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != exitOK {
			t.Fatalf("code %d: %s", code, errb.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		if spec {
			s, _ := json.Marshal(res["meta"].(map[string]any)["engine_settings"])
			if !strings.Contains(string(s), `"spec_method":"eagle"`) || !strings.Contains(string(s), `"spec_tokens":3`) {
				t.Errorf("engine settings %s", s)
			}
		}
		return res["median_tpot_ms"].(float64)
	}
	g1 := tpot(1, false) / tpot(1, true)
	g256 := tpot(256, false) / tpot(256, true)
	t.Logf("median TPOT speed-up: %.2fx at concurrency 1, %.2fx at 256", g1, g256)
	if g1 < 1.5 || g256 > g1-0.3 {
		t.Errorf("speed-up %.2fx at concurrency 1, %.2fx at 256: want >= 1.5x, and well less at 256", g1, g256)
	}
}

// sim estimate accepts each GPU of the 2026 systems.
func TestSimEstimate2026GPUs(t *testing.T) {
	for _, g := range []string{"B300", "GB200", "GB300", "MI325X", "MI355X", "RTXPRO6000"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"sim", "estimate", "llama-3.3-70b", "--gpu", g, "-tp", "2", "--max-model-len", "16000", "--json", "-"}, &out, &errb)
		if code != exitOK || !strings.Contains(out.String(), `"kv_cache_tokens"`) {
			t.Errorf("%s: exit %d, stderr %s", g, code, errb.String())
		}
	}
}

// A model that does not fit: sim estimate prints what was sized and the
// shortfall, never a negative cache or the zeros of parts never sized,
// and exits 1 with the engine's message. Kimi-K2.5's INT4 weights fill
// 8 H100s past SGLang's request; Kimi-K2's FP8 weights exceed the GPU.
func TestSimEstimateDoesNotFit(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  []string
	}{
		{"moonshotai/Kimi-K2.5", []string{"KV cache", "GiB short", "Not enough memory"}},
		{"moonshotai/Kimi-K2-Instruct", []string{"more than the GPU holds", "OutOfMemoryError"}},
	} {
		code, stdout, stderr := runCLI(t, "sim", "estimate", "--model", tc.model, "--gpu", "H100-SXM", "--tp", "8")
		all := stdout + stderr
		if code != exitFailed {
			t.Errorf("%s: exit %d, want %d; output %q", tc.model, code, exitFailed, all)
		}
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.model, w, all)
			}
		}
		if neg := regexp.MustCompile(`\s-[0-9]`).FindString(stdout); neg != "" {
			t.Errorf("%s: output holds a negative size (%q):\n%s", tc.model, neg, stdout)
		}
		for _, bad := range []string{"0 tokens", "0.00 GiB requested", "max concurrency"} {
			if strings.Contains(stdout, bad) {
				t.Errorf("%s: output holds %q, a part never sized:\n%s", tc.model, bad, stdout)
			}
		}
	}
}

// TestSimStartHint: a configuration that does not start for want of
// memory names the least memory fraction it starts at, or says none up to
// 1 does: at the named fraction the engine starts, a hundredth below it
// does not, and at 1 the one said to start at none does not. The cases are
// SGLang refusing DeepSeek-R1 in FP8 at TP4 on B200 at its default of
// 0.855; vLLM short of KV cache for one request of max_model_len, with a
// negative pool and with a small one; gpt-oss's sliding-window layers under
// vLLM; Qwen3-Next's state pool under SGLang; and DeepSeek-V3.2 at TP8 on
// H100, whose CUDA graphs no fraction leaves room for.
func TestSimStartHint(t *testing.T) {
	hint := regexp.MustCompile(`(--mem-fraction-static|--gpu-memory-utilization) ([0-9.]+) or more`)
	for _, tc := range []struct {
		name string
		args []string // the engine's flags, the fraction's last
		run  bool     // sim run says the same
		none bool     // no fraction starts it
	}{
		{"sglang", []string{"--model", "deepseek-ai/DeepSeek-R1", "--gpu", "B200", "--tp", "4", "--mem-fraction-static", "0.855"}, true, false},
		{"vllm short", []string{"--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM", "--tensor-parallel-size", "2",
			"--max-model-len", "8192", "--gpu-memory-utilization", "0.8"}, true, false},
		{"vllm one request", []string{"--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM", "--tensor-parallel-size", "2",
			"--max-model-len", "8192", "--gpu-memory-utilization", "0.91"}, true, false},
		{"vllm sliding window", []string{"--model", "openai/gpt-oss-120b", "--gpu", "H100-SXM", "--tensor-parallel-size", "1",
			"--max-model-len", "4096", "--gpu-memory-utilization", "0.3"}, false, false},
		{"sglang state pool", []string{"--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "A100-40G", "--tp", "4",
			"--context-length", "4096", "--mem-fraction-static", "0.5"}, false, false},
		{"sglang graphs", []string{"--model", "deepseek-ai/DeepSeek-V3.2", "--gpu", "H100-SXM", "--tp", "8", "--mem-fraction-static", "0.5"}, false, true},
	} {
		estimate := func(frac string) (int, string) {
			args := append([]string{"sim", "estimate"}, tc.args[:len(tc.args)-1]...)
			code, stdout, _ := runCLI(t, append(args, frac)...)
			return code, stdout
		}
		code, stdout := estimate(tc.args[len(tc.args)-1])
		if code != exitFailed || !strings.Contains(stdout, "to start") {
			t.Errorf("%s: sim estimate exit %d, want %d with a to-start row:\n%s", tc.name, code, exitFailed, stdout)
			continue
		}
		if tc.none {
			if !strings.Contains(stdout, "up to 1 starts it") {
				t.Errorf("%s: want no fraction named:\n%s", tc.name, stdout)
			}
			if code, _ := estimate("1"); code != exitFailed {
				t.Errorf("%s: said to start at no fraction, yet starts at 1 (exit %d)", tc.name, code)
			}
			continue
		}
		m := hint.FindStringSubmatch(stdout)
		if m == nil {
			t.Errorf("%s: no fraction named:\n%s", tc.name, stdout)
			continue
		}
		frac, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		if code, out := estimate(m[2]); code != 0 {
			t.Errorf("%s: at the named %s %s sim estimate exits %d, want 0:\n%s", tc.name, m[1], m[2], code, out)
		}
		if code, _ := estimate(strconv.FormatFloat(frac-0.01, 'f', 2, 64)); code != exitFailed {
			t.Errorf("%s: a hundredth below the named %s sim estimate exits %d, want %d: the named fraction is not the least", tc.name, m[2], code, exitFailed)
		}
		if tc.run {
			code, _, stderr := runCLI(t, append([]string{"sim", "run", "--num-requests", "4"}, tc.args...)...)
			if code != exitFailed || !strings.Contains(stderr, "to start: "+m[0]) {
				t.Errorf("%s: sim run exit %d, want %d naming %q; stderr %q", tc.name, code, exitFailed, m[0], stderr)
			}
		}
	}
}

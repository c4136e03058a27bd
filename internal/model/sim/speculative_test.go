package sim

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// specRun runs n requests of in/out tokens at concurrency conc and
// returns the mean per-token decode time (TPOT) in seconds and the mean
// tokens per stream chunk.
func specRun(t *testing.T, cfg Config, n, conc, in, out int) (tpot, perChunk float64) {
	t.Helper()
	reqs := fixedReqs(n, in, out)
	recs, err := RunVirtualSchedule(cfg, reqs, make([]time.Duration, n), conc)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	var chunks, tokens int
	for i, r := range recs {
		if r.Error != "" || r.OutputTokens != out {
			t.Fatalf("record %d: %+v", i, r)
		}
		got := 0
		for _, c := range r.Chunks {
			got += c.Tokens
		}
		if got != out {
			t.Fatalf("record %d: chunks carry %d tokens, want %d", i, got, out)
		}
		chunks += len(r.Chunks) - 1
		tokens += out - 1
		sum += (r.Last - r.First).Seconds() / float64(out-1)
	}
	return sum / float64(n), float64(tokens) / float64(chunks)
}

// TestSpeculativeDecodingBatchDirection: EAGLE with 3 draft tokens at
// acceptance 0.7 cuts the per-token decode time at batch 1 by well over
// a third (the memory-bound verify costs about one step, and ~2.5 tokens
// come out of it), and gains much less, or loses, at batch 256, where
// the verify's 4x GEMM work is compute-bound (docs/reference.md,
// "Speculative decoding").
func TestSpeculativeDecodingBatchDirection(t *testing.T) {
	base := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096")
	spec := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096",
		"--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`, "--spec-acceptance", "0.7")
	gain := map[int]float64{}
	for _, bs := range []int{1, 256} {
		n := max(4, 2*bs)
		b, _ := specRun(t, base, n, bs, 512, 256)
		s, per := specRun(t, spec, n, bs, 512, 256)
		gain[bs] = b / s
		t.Logf("batch %d: TPOT %.2f ms -> %.2f ms (%.2fx), %.2f tokens per chunk (expected %.2f)",
			bs, 1e3*b, 1e3*s, b/s, per, SpecExpectedTokens(3, 0.7))
		if want := SpecExpectedTokens(3, 0.7); math.Abs(per-want) > 0.15 {
			t.Errorf("batch %d: %.2f tokens per step, want about %.2f", bs, per, want)
		}
	}
	if gain[1] < 1.5 || gain[1] > 2.6 {
		t.Errorf("batch 1: speed-up %.2fx, want 1.5-2.5x (EAGLE at acceptance 0.7)", gain[1])
	}
	if gain[256] > gain[1]-0.3 {
		t.Errorf("batch 256: speed-up %.2fx, want well below batch 1's %.2fx", gain[256], gain[1])
	}
}

// TestSpeculativeAcceptanceDraws: the drawn accepted lengths match the
// i.i.d. model, E[1 + j] = (1 - a^(k+1)) / (1 - a), and a = 0 gives one
// token a step, a = 1 k+1.
func TestSpeculativeAcceptanceDraws(t *testing.T) {
	for _, a := range []float64{0, 0.3, 0.7, 0.9, 1} {
		for _, k := range []int{1, 3, 5} {
			var sum float64
			const n = 20000
			for i := range n {
				s := &seq{uid: uint64(i/50 + 1), generated: i % 50}
				sum += float64(1 + specAccepted(s, k, a))
			}
			got, want := sum/n, SpecExpectedTokens(k, a)
			if math.Abs(got-want) > 0.03*want {
				t.Errorf("a %.1f k %d: %.3f tokens a step, want %.3f", a, k, got, want)
			}
		}
	}
}

// TestSpeculativeCostsByMethod: an n-gram draft costs the GPU nothing, an
// EAGLE head about a layer per draft, a draft model more; the verify of
// k+1 tokens costs about one step at batch 1; the drafts' weights and KV
// come out of the KV cache.
func TestSpeculativeCostsByMethod(t *testing.T) {
	step := func(c Config, bs int) float64 {
		t.Helper()
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		co := newCore(c, MemoryEstimate{KVBlocks: 1 << 20, MaxRunningRequests: 1024})
		var b batchShape
		for i := range bs {
			s := &seq{id: i, prompt: 1024, generated: 1, computed: 1024, maxOut: 100}
			co.addToShape(&b, s, 1)
		}
		return co.sm.stepSeconds(b)
	}
	args := func(extra ...string) Config {
		return mustParse(t, append([]string{"llama-3.1-8b", "--max-model-len", "4096", "--spec-acceptance", "0.7"}, extra...)...)
	}
	plain := step(args(), 1)
	ngram := step(args("--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`), 1)
	eagle := step(args("--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`), 1)
	big := func(extra ...string) Config {
		return mustParse(t, append([]string{"llama-3.1-70b", "--max-model-len", "4096", "--spec-acceptance", "0.7", "--tensor-parallel-size", "4"}, extra...)...)
	}
	eagle70 := step(big("--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`), 1)
	draft := step(big("--speculative-config", `{"model":"meta-llama/Llama-3.1-8B-Instruct","num_speculative_tokens":3}`), 1)
	t.Logf("batch 1 step: plain %.2f ms, ngram verify %.2f, eagle %.2f; 70B TP 4: eagle %.2f, 8B draft model %.2f",
		1e3*plain, 1e3*ngram, 1e3*eagle, 1e3*eagle70, 1e3*draft)
	if ngram > 1.1*plain {
		t.Errorf("verifying 4 tokens at batch 1 costs %.2f ms, a step %.2f ms: want about the same (memory-bound)", 1e3*ngram, 1e3*plain)
	}
	if !(eagle > ngram && eagle < 1.6*ngram) {
		t.Errorf("EAGLE head %.2f ms beside the verify's %.2f ms", 1e3*eagle, 1e3*ngram)
	}
	if !(draft > eagle70) {
		t.Errorf("an 8B draft model (%.2f ms) costs less than an EAGLE head (%.2f ms)", 1e3*draft, 1e3*eagle70)
	}
	plain256 := step(args(), 256)
	ngram256 := step(args("--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`), 256)
	t.Logf("batch 256 step: plain %.2f ms, verify of 4 tokens %.2f ms", 1e3*plain256, 1e3*ngram256)
	if ngram256 < 1.5*plain256 {
		t.Errorf("batch 256: verifying 4 tokens each costs %.2f ms, a step %.2f ms: want the GEMMs' compute to show", 1e3*ngram256, 1e3*plain256)
	}
	e0, err := Estimate(args())
	if err != nil {
		t.Fatal(err)
	}
	e1, err := Estimate(args("--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if !(e1.WeightsGiB > e0.WeightsGiB && e1.KVCacheTokens < e0.KVCacheTokens) {
		t.Errorf("EAGLE head: weights %.2f -> %.2f GiB, KV tokens %d -> %d", e0.WeightsGiB, e1.WeightsGiB, e0.KVCacheTokens, e1.KVCacheTokens)
	}
}

func TestSpeculativeConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`}, "needs the draft tokens' acceptance rate"},
		{[]string{"--speculative-config", `{"method":"eagle"}`, "--spec-acceptance", "0.7"}, "give the draft tokens per step"},
		{[]string{"--speculative-config", `{"method":"eagle","num_speculative_tokens":2}`, "--spec-acceptance", "1.5"}, "must be in [0, 1]"},
		{[]string{"--speculative-config", `{"model":"no/such-draft","num_speculative_tokens":2}`, "--spec-acceptance", "0.5"}, "draft model"},
		{[]string{"--speculative-config", `{"method":"eagle","num_speculative_tokens":2}`, "--spec-acceptance", "0.5", "--pipeline-parallel-size", "2", "--num-gpus", "2"}, "pipeline parallelism"},
	} {
		_, err := ParseArgs(append([]string{"llama-3.1-8b"}, tt.args...), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
	// The settings read back: FromSettings on them builds the same engine.
	cfg := mustParse(t, "llama-3.1-8b", "--speculative-config", `{"method":"mtp"}`, "--spec-acceptance", "0.8")
	if cfg.SpecTokens != 1 || cfg.SpecVerify != 2 {
		t.Errorf("mtp defaults: %d tokens, %d verified", cfg.SpecTokens, cfg.SpecVerify)
	}
	s := cfg.Settings()
	if s["spec_method"] != "mtp" || s["spec_tokens"] != 1 {
		t.Errorf("settings %v", s)
	}
	if _, ok := s["sim_spec_acceptance"]; ok {
		t.Errorf("settings carry the simulator's own acceptance: %v", s)
	}
}

// TestServerSpeculativeMetrics: sim serve under speculative decoding
// streams several tokens per message, the text whole, and counts vLLM's
// spec_decode families, whose ratio is the acceptance rate it was given.
func TestServerSpeculativeMetrics(t *testing.T) {
	_, url := startServer(t, "llama-3.1-8b", "--max-model-len", "4096", "--time-scale", "20", "--sim-load-time", "0",
		"--speculative-config", `{"method":"eagle3","num_speculative_tokens":3}`, "--spec-acceptance", "0.7")
	var text strings.Builder
	messages := 0
	for range 4 {
		resp, body := post(t, url+"/v1/completions", `{"prompt":"hello there","max_tokens":200,"stream":true}`)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		text.Reset()
		for _, d := range sseData(t, body) {
			if d == "[DONE]" {
				continue
			}
			var m struct {
				Choices []struct{ Text string } `json:"choices"`
			}
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			if len(m.Choices) > 0 {
				text.WriteString(m.Choices[0].Text)
				messages++
			}
		}
		want := ""
		for i := range 200 {
			want += outputText(i)
		}
		if text.String() != want {
			t.Fatalf("streamed text differs from the tokens' words")
		}
	}
	if per := 800.0 / float64(messages); per < 2 {
		t.Errorf("%d messages for 800 tokens: %.2f tokens per message, want about %.2f", messages, per, SpecExpectedTokens(3, 0.7))
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	counter := func(name string) float64 {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, name+"{") {
				f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				return f
			}
		}
		t.Fatalf("no %s in %s", name, b)
		return 0
	}
	drafts, drafted, accepted := counter("vllm:spec_decode_num_drafts_total"), counter("vllm:spec_decode_num_draft_tokens_total"), counter("vllm:spec_decode_num_accepted_tokens_total")
	// vLLM's acceptance rate, accepted over drafted, is E[j]/k: lower
	// than a, as a chain stops at its first rejection; the first
	// position's share of the drafts is a itself.
	if want := (SpecExpectedTokens(3, 0.7) - 1) / 3; drafted != 3*drafts || math.Abs(accepted/drafted-want) > 0.08 {
		t.Errorf("drafts %v, draft tokens %v, accepted %v: acceptance %.2f, want about %.2f", drafts, drafted, accepted, accepted/drafted, want)
	}
	var first float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="llama-3.1-8b",position="0"}`) {
			first, _ = strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		}
	}
	if math.Abs(first/drafts-0.7) > 0.08 {
		t.Errorf("position 0 accepted %v of %v drafts, want about 0.7: %s", first, drafts, grepLines(string(b), "spec_decode"))
	}
}

// TestSGLangSpeculativeTreeRunsWithoutOverlap: SGLang drafting a tree
// (top-k above 1) runs without its overlap scheduler whatever its flags
// say (speculative.go, specTreeStopsOverlap): a decode step waits for the
// host's work, sglangNoOverlapSlowdown times the overlapped step's GPU
// and host time, and the next batch is not planned while one runs. A
// chain keeps the overlap scheduler unless --disable-overlap-schedule
// turns it off, and vLLM is unaffected by top-k.
func TestSGLangSpeculativeTreeRunsWithoutOverlap(t *testing.T) {
	sglang := func(extra ...string) Config {
		t.Helper()
		c := mustParse(t, append([]string{"--model-path", "llama-3.1-8b", "--context-length", "4096",
			"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
			"--spec-acceptance", "0.7"}, extra...)...)
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	tree := sglang("--speculative-num-steps", "5", "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32")
	chain := sglang("--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
	chainOff := sglang("--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
		"--disable-overlap-schedule")
	if tree.Engine != engine.SGLang || tree.SpecTopK != 8 || !tree.AsyncScheduling {
		t.Fatalf("tree config: engine %s, top-k %d, sync %v", tree.Engine, tree.SpecTopK, !tree.AsyncScheduling)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		overlap bool
	}{{"tree", tree, false}, {"chain", chain, true}, {"chain, overlap off", chainOff, false}} {
		sm := newStepModel(tc.cfg)
		if sm.overlap != tc.overlap || sm.noOverlap == tc.overlap {
			t.Errorf("%s: overlap %v, noOverlap %v; want overlap %v", tc.name, sm.overlap, sm.noOverlap, tc.overlap)
		}
		co := newCore(tc.cfg, MemoryEstimate{KVBlocks: 1 << 20, MaxRunningRequests: 64})
		var b batchShape
		co.addToShape(&b, &seq{id: 0, prompt: 512, generated: 10, computed: 521, maxOut: 100}, 1)
		overlapped := sm.gpuSeconds(b) + sm.spec.seconds(b) + sm.cpuBase + float64(b.seqs)*sm.perSeq
		want := overlapped
		if !tc.overlap {
			want *= sglangNoOverlapSlowdown
		}
		if got := sm.stepSeconds(b); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: step %.4f ms, want %.4f ms", tc.name, 1e3*got, 1e3*want)
		}
	}
	v := mustParse(t, "llama-3.1-8b", "--max-model-len", "4096",
		"--speculative-config", `{"method":"eagle","num_speculative_tokens":3}`, "--spec-acceptance", "0.7")
	v.SpecTopK = 8
	if err := v.Normalize(); err != nil {
		t.Fatal(err)
	}
	if sm := newStepModel(v); !sm.async || sm.noOverlap || sm.overlap {
		t.Errorf("vLLM with top-k 8: async %v, noOverlap %v, overlap %v", sm.async, sm.noOverlap, sm.overlap)
	}
}

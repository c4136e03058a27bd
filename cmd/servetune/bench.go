package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/present/report"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/term"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// benchFlags are the raw flag values of `servetune bench`.
type benchFlags struct {
	baseURL, model, endpoint, apiKeyEnv string
	headers                             []string
	dataset, datasetPath                string
	inputLen, outputLen                 int
	rangeRatio                          float64
	inputDist, outputDist               string
	prefixGroups, prefixLen             int
	keepEOS, noAlign                    bool
	temperature, topP                   float64
	topK                                int
	rate                                string
	burstiness                          float64
	maxConc, numRequests, warmup        int
	duration, timeout                   time.Duration
	sweep, goodput                      string
	seed                                uint64
	bootstrap                           int
	jsonOut, csvOut, requestsOut        string
	htmlOut                             string
	noProgress                          bool
	scrapeMetrics                       bool
	scrapeInterval                      time.Duration
	gpus                                string
	keepPrefixCache                     bool
	// --dataset trace (datasetFlags); fs is the flag set they were
	// registered in, to tell a flag given from its default.
	trace traceWindow
	fs    *pflag.FlagSet
	// --dataset conversation
	sessions         int
	turns, thinkTime string
	// vLLM's bench spellings taken as they are (vllmAliases).
	percentileMetrics, tokenizer string
}

// vllmFlagNames are vLLM's `vllm bench serve` names for flags servetune
// spells its own way: either name works.
var vllmFlagNames = map[string]string{"num-prompts": "num-requests", "dataset-name": "dataset"}

// vllmAliases lets a `vllm bench serve` command line run as it is: its
// names for servetune's flags (vllmFlagNames), and the flags that change
// nothing here, checked and recorded: --percentile-metrics (every
// latency's percentiles are reported) and --tokenizer (token counts are
// the server's own usage figures).
func vllmAliases(fl *pflag.FlagSet, f *benchFlags) {
	prev := fl.GetNormalizeFunc()
	fl.SetNormalizeFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := vllmFlagNames[name]; ok {
			name = to
		}
		return prev(fs, name)
	})
	fl.StringVar(&f.percentileMetrics, "percentile-metrics", "", "vLLM's flag, taken for compatibility: ttft,tpot,itl,e2el (servetune reports every one's percentiles)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "vLLM's flag, taken for compatibility: token counts are the server's usage figures, so no tokenizer is loaded")
}

// checkLatencyNames refuses a --percentile-metrics name servetune has no
// latency series for.
func checkLatencyNames(s string) error {
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" && !measure.IsLatencySeries(m) {
			return fmt.Errorf("--percentile-metrics %q: unknown metric %q (ttft, tpot, itl, e2el)", s, m)
		}
	}
	return nil
}

// joinGoodput rewrites vLLM's space-separated --goodput (`--goodput
// ttft:500 tpot:50`) as servetune's one comma-separated value: the
// words after --goodput that are limits join its value.
func joinGoodput(args []string) []string {
	out := make([]string, 0, len(args))
	limit := func(a string) bool {
		k, _, ok := strings.Cut(a, ":")
		if !ok {
			k, _, ok = strings.Cut(a, "=")
		}
		return ok && (&measure.SLO{}).Limit(strings.ToLower(k)) != nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--goodput" && i+1 < len(args)) || strings.HasPrefix(a, "--goodput=") {
			v := strings.TrimPrefix(a, "--goodput=")
			if a == "--goodput" {
				i++
				v = args[i]
			}
			for i+1 < len(args) && limit(args[i+1]) {
				i++
				v += "," + args[i]
			}
			out = append(out, "--goodput="+v)
			continue
		}
		out = append(out, a)
	}
	return out
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench --base-url URL --model NAME [flags]",
		Short: "Benchmark an OpenAI-compatible streaming endpoint",
		Long: `Benchmark an OpenAI-compatible endpoint (vLLM, SGLang, TensorRT-LLM, TGI, hosted
APIs) with streamed completions: open-loop arrivals (Poisson or gamma), a
concurrency cap, or both; TTFT, TPOT, ITL, E2EL, throughputs and goodput with
vLLM's result key names.`,
		Example: `  servetune bench --base-url http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B-Instruct \
    --input-len 1024 --output-len 128 --request-rate 8 --num-requests 400 --json result.json
  servetune bench --base-url http://127.0.0.1:8000 --model m --sweep concurrency=1,4,16,64 --csv sweep.csv
  servetune bench compare base.json new.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "server base URL, e.g. http://127.0.0.1:8000 (required)")
	fl.StringVar(&f.model, "model", "", "model name sent in requests (required)")
	fl.StringVar(&f.endpoint, "endpoint-type", "completions", "completions (/v1/completions) or chat (/v1/chat/completions)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (sent as Bearer; never written anywhere)")
	fl.StringArrayVar(&f.headers, "header", nil, "extra request header K:V (repeatable)")
	workloadFlags(fl, &f)
	fl.BoolVar(&f.keepEOS, "no-ignore-eos", false, "let the model stop at EOS (default sends ignore_eos so output length is what was asked)")
	fl.Float64Var(&f.temperature, "temperature", 0, "sampling temperature each request asks for, 0 to 2 (0: greedy, as vLLM's benchmark)")
	fl.Float64Var(&f.topP, "top-p", 1, "nucleus sampling: top_p each request asks for, in (0, 1] (sent only when given)")
	fl.IntVar(&f.topK, "top-k", -1, "top_k each request asks for, -1 (all) or at least 1 (sent only when given)")
	fl.BoolVar(&f.noAlign, "no-tokenize", false, "do not align prompt lengths with the server's /tokenize")
	fl.DurationVar(&f.timeout, "timeout", bench.DefaultTimeout, "per-request timeout")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr")
	fl.BoolVar(&f.scrapeMetrics, "scrape-metrics", false, "read the engine's Prometheus /metrics during each level: running/waiting requests, KV usage, preemptions, prefix hits, server-side latencies (vLLM; SGLang with "+engine.Flag(engine.SGLang, "enable_metrics")+")")
	fl.DurationVar(&f.scrapeInterval, "scrape-interval", 500*time.Millisecond, "with --scrape-metrics: how often /metrics is read")
	fl.BoolVar(&f.keepPrefixCache, "keep-prefix-cache", false, "do not empty the server's prefix cache before each level (vLLM's POST /reset_prefix_cache, SGLang's POST /flush_cache)")
	fl.StringVar(&f.gpus, "gpus", "auto", "GPUs to sample with NVML during each level: auto (every GPU, when the server is on this machine), none, or indices 0,1")
	cmd.AddCommand(newBenchCompareCmd())
	return cmd
}

// workloadFlags registers the workload, load and output flags that
// `servetune bench` and `servetune sim run` share (same names, same meaning).
func workloadFlags(fl *pflag.FlagSet, f *benchFlags) {
	datasetFlags(fl, f)
	vllmAliases(fl, f)
	fl.StringVar(&f.rate, "request-rate", "inf", "requests per second (Poisson) or inf (all at once)")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape of arrivals: 1 Poisson, <1 burstier, >1 more regular")
	fl.IntVar(&f.maxConc, "max-concurrency", 0, "cap on requests in flight (0 = none)")
	fl.IntVar(&f.numRequests, "num-requests", 1000, "requests per run (per sweep level)")
	fl.DurationVar(&f.duration, "duration", 0, "run for this long instead of a request count")
	fl.IntVar(&f.warmup, "warmup", 0, "warm-up requests at the run's concurrency, excluded from metrics")
	fl.StringVar(&f.sweep, "sweep", "", "load ladder: concurrency=1,4,16 or rate=1,2,inf")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed of workload and arrivals (bench: a fresh one each run unless given; each level draws its own prompts from it; meta records it)")
	fl.StringVar(&f.goodput, "goodput", "", "SLOs for goodput, ms: ttft:MS,tpot:MS,e2el:MS")
	fl.IntVar(&f.bootstrap, "bootstrap", measure.DefaultBootstrap, "bootstrap resamples for confidence intervals")
	addJSONFlag(fl, &f.jsonOut, "the summary (with per-request samples)")
	addOutputFlag(fl, &f.csvOut, "csv", "", "write the summary as CSV to this file")
	addOutputFlag(fl, &f.requestsOut, "requests-out", "", "write one JSON line per request with all timestamps to this file")
	addOutputFlag(fl, &f.htmlOut, "html", "", "write a self-contained HTML report (latency distributions, levels, failures, meta) to this file")
}

// datasetFlags registers the workload's request shape (what a request
// asks for), shared by bench, sim run and whatif.
func datasetFlags(fl *pflag.FlagSet, f *benchFlags) {
	fl.StringVar(&f.dataset, "dataset", "random", "random, sharegpt, jsonl, prefix, trace or conversation")
	fl.StringVar(&f.datasetPath, "dataset-path", "", "dataset file for sharegpt (JSON), jsonl or trace; for conversation, a ShareGPT file whose conversations are the sessions")
	fl.IntVar(&f.inputLen, "input-len", 1024, "prompt tokens (random, prefix suffix)")
	fl.IntVar(&f.outputLen, "output-len", 128, "output tokens asked for")
	fl.Float64Var(&f.rangeRatio, "range-ratio", 0, "lengths uniform on [len(1-r), len(1+r)]")
	fl.StringVar(&f.inputDist, "input-dist", "", "prompt length distribution: N, uniform:A,B, lognormal:median=M,sigma=S, normal:mean=M,sigma=S (overrides --input-len)")
	fl.StringVar(&f.outputDist, "output-dist", "", "output length distribution (overrides --output-len)")
	fl.IntVar(&f.prefixGroups, "prefix-groups", 8, "prefix: number of shared prefixes")
	fl.IntVar(&f.prefixLen, "prefix-len", 512, "prefix: tokens per shared prefix")
	// --dataset trace: each request at its time in the file.
	f.fs = fl
	f.trace.addFlags(fl, "replay")
	fl.IntVar(&f.sessions, "sessions", 0, "conversation: sessions, arriving at --request-rate per second or --max-concurrency at once")
	fl.StringVar(&f.turns, "turns", "", "conversation: turns per session, N or a distribution as --input-dist")
	fl.StringVar(&f.thinkTime, "think-time", "", "conversation: wait after an answer before the next turn: 2s, uniform:1s,5s, exponential:mean=3s, lognormal:median=2s,sigma=0.5 (default 0)")
}

// level is one load level of a run or sweep.
type level struct {
	load measure.Load
	name string
}

// buildBenchConfig turns flags into a config and load levels; every error is
// a one-line usage error.
func buildBenchConfig(f *benchFlags) (bench.Config, []level, error) {
	var cfg bench.Config
	var err error
	if cfg.Target, err = benchTarget(f); err != nil {
		return cfg, nil, err
	}
	if cfg.Dataset, err = benchDataset(f); err != nil {
		return cfg, nil, err
	}
	rate, err := parseRate(f.rate)
	if err != nil {
		return cfg, nil, fmt.Errorf("--request-rate: %w", err)
	}
	if f.burstiness <= 0 || math.IsNaN(f.burstiness) || math.IsInf(f.burstiness, 0) {
		return cfg, nil, fmt.Errorf("--burstiness %g: must be > 0", f.burstiness)
	}
	if f.maxConc < 0 {
		return cfg, nil, fmt.Errorf("--max-concurrency %d: must be >= 0", f.maxConc)
	}
	if f.numRequests < 1 && f.duration == 0 {
		return cfg, nil, fmt.Errorf("--num-requests %d: must be >= 1", f.numRequests)
	}
	if f.duration < 0 {
		return cfg, nil, fmt.Errorf("--duration %v: must be > 0", f.duration)
	}
	if f.warmup < 0 {
		return cfg, nil, fmt.Errorf("--warmup %d: must be >= 0", f.warmup)
	}
	if f.timeout <= 0 {
		return cfg, nil, fmt.Errorf("--timeout %v: must be > 0", f.timeout)
	}
	if f.bootstrap < 1 {
		return cfg, nil, fmt.Errorf("--bootstrap %d: must be >= 1", f.bootstrap)
	}
	if err := checkLatencyNames(f.percentileMetrics); err != nil {
		return cfg, nil, err
	}
	slo, err := parseGoodput(f.goodput)
	if err != nil {
		return cfg, nil, fmt.Errorf("--goodput: %w", err)
	}
	cfg.Load = measure.Load{Rate: rate, Burstiness: f.burstiness, MaxConcurrency: f.maxConc}
	cfg.NumRequests, cfg.Duration, cfg.Warmup, cfg.Timeout, cfg.Seed = f.numRequests, f.duration, f.warmup, f.timeout, f.seed
	if f.duration > 0 {
		cfg.NumRequests = 0
	}
	cfg.KeepEOS, cfg.NoAlign = f.keepEOS, f.noAlign
	if !(f.temperature >= 0 && f.temperature <= 2) {
		return cfg, nil, fmt.Errorf("--temperature %g: want 0 to 2 (0 is greedy)", f.temperature)
	}
	cfg.Sampling.Temperature = f.temperature
	if f.fs != nil && f.fs.Changed("top-p") {
		if !(f.topP > 0 && f.topP <= 1) {
			return cfg, nil, fmt.Errorf("--top-p %g: want more than 0 and at most 1", f.topP)
		}
		p := f.topP
		cfg.Sampling.TopP = &p
	}
	if f.fs != nil && f.fs.Changed("top-k") {
		if f.topK != -1 && f.topK < 1 {
			return cfg, nil, fmt.Errorf("--top-k %d: want -1 (all) or at least 1", f.topK)
		}
		k := f.topK
		cfg.Sampling.TopK = &k
	}
	cfg.KeepChunks = f.requestsOut != "" // written there; otherwise folded as requests end
	cfg.Summary = measure.SummaryOptions{Goodput: slo, Bootstrap: f.bootstrap, Seed: f.seed, KeepSamples: f.jsonOut != "" || f.htmlOut != ""}

	levels := []level{{load: cfg.Load, name: loadName(cfg.Load)}}
	if f.sweep != "" {
		if levels, err = parseSweep(f.sweep, cfg.Load); err != nil {
			return cfg, nil, fmt.Errorf("--sweep: %w", err)
		}
	}
	if f.dataset == bench.DatasetTrace {
		if err := traceLoad(f, &cfg, levels); err != nil {
			return cfg, nil, err
		}
	}
	for _, l := range levels {
		c := cfg
		c.Load = l.load
		if err := c.Validate(); err != nil {
			return cfg, nil, err
		}
	}
	return cfg, levels, nil
}

// benchTarget reads the endpoint flags.
func benchTarget(f *benchFlags) (openai.Target, error) {
	if f.baseURL == "" {
		return openai.Target{}, errors.New("--base-url is required")
	}
	if f.model == "" {
		return openai.Target{}, errors.New("--model is required")
	}
	t := openai.Target{BaseURL: f.baseURL, Model: f.model, Endpoint: f.endpoint, Headers: http.Header{}}
	if f.endpoint != openai.EndpointCompletions && f.endpoint != openai.EndpointChat {
		return openai.Target{}, fmt.Errorf("--endpoint-type %q: want completions or chat", f.endpoint)
	}
	if f.apiKeyEnv != "" {
		key := os.Getenv(f.apiKeyEnv)
		if key == "" {
			return openai.Target{}, fmt.Errorf("--api-key-env: environment variable %s is empty or unset", f.apiKeyEnv)
		}
		t.APIKey = key
	}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") || strings.ContainsAny(v, "\r\n") {
			return openai.Target{}, fmt.Errorf("--header %q: want NAME:VALUE", redact.Header(h))
		}
		t.Headers.Add(k, strings.TrimSpace(v))
	}
	if err := t.Validate(); err != nil {
		return openai.Target{}, fmt.Errorf("--base-url: %w: %v", bench.ErrBadConfig, err)
	}
	return t, nil
}

// benchDataset reads the workload flags.
func benchDataset(f *benchFlags) (bench.DatasetSpec, error) {
	in, err := lengthDist("--input", f.inputDist, f.inputLen, f.rangeRatio)
	if err != nil {
		return bench.DatasetSpec{}, err
	}
	out, err := lengthDist("--output", f.outputDist, f.outputLen, f.rangeRatio)
	if err != nil {
		return bench.DatasetSpec{}, err
	}
	ds := bench.DatasetSpec{Kind: f.dataset, Path: f.datasetPath, Input: in, Output: out}
	if f.dataset != bench.DatasetTrace {
		for _, name := range traceFlags {
			if f.fs != nil && f.fs.Changed(name) {
				return bench.DatasetSpec{}, fmt.Errorf("--%s needs --dataset trace", name)
			}
		}
	}
	if f.dataset != bench.DatasetConversation && (f.sessions != 0 || f.turns != "" || f.thinkTime != "") {
		return bench.DatasetSpec{}, fmt.Errorf("--sessions, --turns and --think-time need --dataset conversation")
	}
	switch f.dataset {
	case bench.DatasetConversation:
		if err := conversationFlags(f, &ds); err != nil {
			return bench.DatasetSpec{}, err
		}
	case bench.DatasetRandom:
	case bench.DatasetPrefix:
		ds.PrefixGroups, ds.PrefixLen = f.prefixGroups, f.prefixLen
	case bench.DatasetShareGPT, bench.DatasetJSONL:
		if f.datasetPath == "" {
			return bench.DatasetSpec{}, fmt.Errorf("--dataset %s needs --dataset-path", f.dataset)
		}
		if _, err := os.Stat(f.datasetPath); err != nil {
			return bench.DatasetSpec{}, fmt.Errorf("--dataset-path: %w", err)
		}
		if f.dataset == bench.DatasetShareGPT && f.outputDist == "" {
			ds.Output = bench.Dist{} // lengths from the conversations, as vLLM
		}
	case bench.DatasetTrace:
		if err := traceDataset(f, &ds); err != nil {
			return bench.DatasetSpec{}, err
		}
	default:
		return bench.DatasetSpec{}, fmt.Errorf("--dataset %q: want random, sharegpt, jsonl, prefix, trace or conversation", f.dataset)
	}
	if err := ds.Validate(); err != nil {
		return bench.DatasetSpec{}, fmt.Errorf("--dataset: %w", err)
	}
	return ds, nil
}

// conversationFlags reads --sessions, --turns and --think-time into ds.
func conversationFlags(f *benchFlags, ds *bench.DatasetSpec) error {
	if f.sessions < 1 {
		return fmt.Errorf("--sessions %d: a conversation needs at least 1 session", f.sessions)
	}
	ds.Sessions = f.sessions
	if f.datasetPath != "" {
		// A ShareGPT file's conversations: their own turns, messages and
		// (unless --output-len or --output-dist says) answer lengths.
		if f.turns != "" {
			return errors.New("--turns: a conversation from --dataset-path has each file conversation's own turns")
		}
		if _, err := os.Stat(f.datasetPath); err != nil {
			return fmt.Errorf("--dataset-path: %w", err)
		}
		if f.outputDist == "" && (f.fs == nil || !f.fs.Changed("output-len")) {
			ds.Output = bench.Dist{}
		}
		ds.Input = bench.Dist{}
		return thinkFlag(f, ds)
	}
	if f.turns == "" {
		return errors.New("--dataset conversation needs --turns N (or a distribution)")
	}
	turns, err := bench.ParseDist(f.turns)
	if err != nil {
		return fmt.Errorf("--turns: %w", err)
	}
	ds.Turns = &turns
	return thinkFlag(f, ds)
}

// thinkFlag reads --think-time into ds.
func thinkFlag(f *benchFlags, ds *bench.DatasetSpec) error {
	if f.thinkTime != "" {
		think, err := bench.ParseThinkTime(f.thinkTime)
		if err != nil {
			return fmt.Errorf("--think-time: %w", err)
		}
		ds.Think = &think
	}
	return nil
}

func lengthDist(flag, dist string, n int, ratio float64) (bench.Dist, error) {
	if dist != "" {
		d, err := bench.ParseDist(dist)
		if err != nil {
			return d, fmt.Errorf("%s-dist: %w", flag, err)
		}
		return d, nil
	}
	d, err := bench.RangeDist(n, ratio)
	if err != nil {
		return d, fmt.Errorf("%s-len/--range-ratio: %w", flag, err)
	}
	return d, nil
}

// parseRate reads a positive rate or "inf" (returned as 0, all at once).
func parseRate(s string) (float64, error) {
	if strings.EqualFold(s, "inf") {
		return 0, nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r <= 0 || math.IsNaN(r) {
		return 0, fmt.Errorf("%q: want a number > 0 or inf", s)
	}
	if math.IsInf(r, 1) {
		return 0, nil
	}
	return r, nil
}

// parseGoodput reads "ttft:MS,tpot:MS,e2el:MS" (any subset; '=' also works).
func parseGoodput(s string) (measure.SLO, error) {
	var slo measure.SLO
	if s == "" {
		return slo, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			k, v, ok = strings.Cut(strings.TrimSpace(part), "=")
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || ms <= 0 || math.IsInf(ms, 0) || math.IsNaN(ms) {
			return slo, fmt.Errorf("%q: want ttft:MS, tpot:MS or e2el:MS with MS > 0", part)
		}
		limit := slo.Limit(strings.ToLower(strings.TrimSpace(k)))
		if limit == nil {
			return slo, fmt.Errorf("%q: unknown metric %q (ttft, tpot, e2el)", part, k)
		}
		*limit = ms
	}
	return slo, nil
}

// maxSweepLevels bounds a --sweep: ten hours of one-minute levels.
const maxSweepLevels = 600

// parseSweep reads "concurrency=1,4,16" or "rate=1,2,inf".
func parseSweep(s string, base measure.Load) ([]level, error) {
	kind, list, ok := strings.Cut(s, "=")
	if !ok || list == "" {
		return nil, fmt.Errorf("%q: want concurrency=N,N,... or rate=R,R,...", s)
	}
	parts := strings.Split(list, ",")
	if len(parts) > maxSweepLevels {
		return nil, fmt.Errorf("%d levels: at most %d", len(parts), maxSweepLevels)
	}
	var out []level
	for _, v := range parts {
		v = strings.TrimSpace(v)
		l := base
		switch kind {
		case "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("concurrency %q: want an integer >= 1", v)
			}
			l.MaxConcurrency = n
		case "rate":
			r, err := parseRate(v)
			if err != nil {
				return nil, fmt.Errorf("rate %w", err)
			}
			l.Rate = r
		default:
			return nil, fmt.Errorf("%q: sweep concurrency or rate", kind)
		}
		out = append(out, level{load: l, name: loadName(l)})
	}
	return out, nil
}

// loadName names a level as every level name reads: concurrency=8,
// rate=14, rate=inf (measure.Load.Name).
func loadName(l measure.Load) string { return l.Name() }

// foldedHeapLimit is the Go runtime's soft memory limit while bench runs
// levels that fold their requests as they end: their live heap is what
// is in flight plus a record a request (about 125 MB at 1,024 sessions of
// a 200,000-turn conversation), and without a limit the collector lets
// the heap grow to twice that (387 MB peak RSS; 263 MB with this limit,
// docs/reliability.md).
const foldedHeapLimit = 200 << 20

// boundHeap sets foldedHeapLimit for a run whose levels fold their
// requests, unless GOMEMLIMIT sets a limit of its own, and returns what
// restores the limit before it. A run that keeps every request's chunks
// or samples (--requests-out, --json, --html) holds them all, so it is
// left to the collector's default pacing rather than made to collect
// without end against a limit its heap must pass.
func boundHeap(cfg bench.Config) func() {
	if cfg.KeepChunks || cfg.Summary.KeepSamples || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	before := debug.SetMemoryLimit(foldedHeapLimit)
	return func() { debug.SetMemoryLimit(before) }
}

func runBench(ctx context.Context, cmd *cobra.Command, f *benchFlags) error {
	cfg, levels, err := buildBenchConfig(f)
	if err != nil {
		return usageError(err)
	}
	defer boundHeap(cfg)()
	if f.scrapeInterval <= 0 {
		return usageErrorf("--scrape-interval %v: must be > 0", f.scrapeInterval)
	}
	// Open output files first so a bad path fails before the run.
	out, err := openBenchOutputs(f, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	defer out.close()
	stdout, stderr := tableOut(cmd, f.jsonOut), cmd.ErrOrStderr()
	cfg.ScrapeMetrics, cfg.MetricsInterval = f.scrapeMetrics, f.scrapeInterval
	reader, ids, closeGPUs, note, err := benchGPUs(f.gpus, cfg.Target.BaseURL)
	if err != nil {
		return usageError(err)
	}
	defer closeGPUs()
	if note != "" {
		fmt.Fprintln(stderr, term.Clean(note))
	}
	if reader != nil {
		cfg.GPU = &bench.GPUWatch{Reader: reader, GPUs: ids}
	}
	// Fresh prompts each run unless a seed is asked for, and each level its
	// own: a server keeps its prefix cache, and prompts it has seen come
	// back with a TTFT no cold request gets.
	runSeed, seedGiven := cfg.Seed, cmd.Flags().Changed("seed")
	if !seedGiven {
		runSeed = rand.Uint64() >> 11 // 53 bits: exact in any JSON reader's float
	}
	var sums []measure.Summary
	var runErr error
	resetNoted := false
	for li, l := range levels {
		c := cfg
		c.Load = l.load
		c.Seed = levelSeed(runSeed, li)
		c.Summary.Seed = c.Seed
		c.ResetPrefixCache = !f.keepPrefixCache
		var bar *progressBar
		if !f.noProgress {
			total := c.NumRequests
			bar = newProgress(stderr, fmt.Sprintf("bench %d/%d", li+1, len(levels)), total, c.Duration)
			c.Progress = bar.Update
			c.Waiting = bar.Waiting
		}
		res, err := bench.Run(ctx, c)
		bar.Done()
		if res == nil {
			if errors.Is(err, bench.ErrBadConfig) || errors.Is(err, bench.ErrBadDist) || errors.Is(err, bench.ErrBadDataset) {
				return usageError(err)
			}
			return failedError(err)
		}
		findings := annotateLevel(&res.Summary, f, l.load, li, runSeed, seedGiven)
		if how, _ := res.Summary.Meta["prefix_cache_reset"].(string); !f.keepPrefixCache && strings.HasPrefix(how, "not offered") && !resetNoted {
			resetNoted = true
			fmt.Fprintf(stderr, "note: the server's prefix cache was not emptied, %s; each level sends prompts of its own\n", how)
		}
		sums = append(sums, res.Summary)
		printSummary(stdout, l.name, res.Summary)
		printConversation(stdout, res.Summary.Conversation)
		printEngine(stdout, res.Summary)
		printGPU(stdout, res.Summary.GPU)
		printFindings(stdout, findings)
		if werr := out.records(li, res.Records); werr != nil {
			return werr
		}
		if err != nil {
			runErr = err
			break
		}
	}
	if err := out.finish(sums); err != nil {
		return err
	}
	return benchOutcome(runErr, sums)
}

// annotateLevel writes what servetune adds to a level's meta (the tool,
// the level, the seeds, a kept prefix cache, the findings) and returns
// the findings.
func annotateLevel(sum *measure.Summary, f *benchFlags, l measure.Load, li int, runSeed uint64, seedGiven bool) []diagnose.Finding {
	if sum.Meta == nil {
		sum.Meta = map[string]any{}
	}
	sum.Meta["tool"] = "servetune " + version
	sum.Meta["level"] = li
	sum.Meta["run_seed"] = runSeed // --seed reproduces every level
	sum.Meta["seed_given"] = seedGiven
	if f.keepPrefixCache {
		sum.Meta["prefix_cache_reset"] = "kept (--keep-prefix-cache)"
	}
	findings := benchFindings(l, *sum, "", nil)
	if len(findings) > 0 {
		sum.Meta["findings"] = findings
	}
	return findings
}

// benchOutcome is a finished run's exit: an interruption or a level's
// error, a level where no request completed, or nil.
func benchOutcome(runErr error, sums []measure.Summary) error {
	switch {
	case errors.Is(runErr, context.Canceled):
		done, cancelled := 0, 0
		for _, s := range sums {
			done += s.Completed
			cancelled += s.Errors[string(measure.ErrCancelled)]
		}
		return failedError(fmt.Errorf("interrupted: %d requests completed, %d cancelled in flight; the output files hold what was measured", done, cancelled))
	case runErr != nil:
		return failedError(runErr)
	}
	for _, s := range sums {
		if s.Completed == 0 {
			return failedError(fmt.Errorf("no request completed: %s", failureLine(s)))
		}
		if c := s.Conversation; c != nil && c.SessionsCompleted == 0 {
			// Turns may have completed, but no conversation did: there is
			// no session latency to report.
			return failedError(fmt.Errorf("no session completed: %d of %d failed at a turn (%s)", c.SessionsFailed, c.Sessions, failureLine(s)))
		}
	}
	return nil
}

// cacheCold says whether a level's workload (meta's dataset) sends
// prompts that share no prefix: random or ShareGPT prompts, not prefix
// groups, a JSONL file (whose prompts may share a system prompt) nor a
// mix that holds them.
func cacheCold(meta map[string]any) bool {
	ds, ok := meta["dataset"].(bench.DatasetSpec)
	if !ok {
		return false // pre-generated requests, or unknown
	}
	var cold func(d bench.DatasetSpec) bool
	cold = func(d bench.DatasetSpec) bool {
		switch d.Kind {
		case bench.DatasetRandom, bench.DatasetShareGPT:
			return true
		case bench.DatasetMix:
			for _, p := range d.Mix {
				if !cold(p.Spec) {
					return false
				}
			}
			return len(d.Mix) > 0
		}
		return false
	}
	return cold(ds)
}

// levelSeed is the seed of level i of a run seeded with run: the run's
// own for the first level (a one-level run with --seed N is seeded N),
// a distinct one, by a splitmix64 step cut to 53 bits (exact in any JSON
// reader's float), for each later level.
func levelSeed(run uint64, i int) uint64 {
	if i == 0 {
		return run
	}
	z := run + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return (z ^ (z >> 31)) >> 11
}

// failureLine is the failures of a summary by class, each with its first
// message: "http_4xx 64 (HTTP 404: The model `m` does not exist.)".
func failureLine(s measure.Summary) string {
	var parts []string
	for _, c := range measure.ErrorClasses {
		if n := s.Errors[string(c)]; n > 0 {
			part := fmt.Sprintf("%s %d", c, n)
			if msg := s.ErrorMessages[string(c)]; msg != "" {
				part += " (" + term.Line(msg) + ")"
			}
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}

// benchOutputs are the --json, --csv, --requests-out and --html outputs of
// a bench or sim run, opened before the run (openOutput) so that a bad
// path fails before any load; each is renamed over the file it names when
// the run ends. --json - writes the summary to standard output.
type benchOutputs struct {
	f     *benchFlags
	files map[string]*output // by flag path
}

func openBenchOutputs(f *benchFlags, stdout io.Writer) (*benchOutputs, error) {
	o := &benchOutputs{f: f, files: map[string]*output{}}
	seen := map[string]string{}
	var infos []struct {
		flag string
		fi   os.FileInfo
	}
	for _, fl := range []struct{ flag, path string }{{"--json", f.jsonOut}, {"--csv", f.csvOut}, {"--requests-out", f.requestsOut}, {"--html", f.htmlOut}} {
		if fl.path == "" || fl.path == stdoutPath {
			continue
		}
		// The file a path names: a symlink (or a hard link, by SameFile)
		// to another output is the same file.
		target := resolvePath(fl.path)
		if other, dup := seen[target]; dup {
			return nil, usageErrorf("%s and %s name the same file %s", other, fl.flag, fl.path)
		}
		if fi, err := os.Stat(target); err == nil {
			for _, in := range infos {
				if os.SameFile(in.fi, fi) {
					return nil, usageErrorf("%s and %s name the same file %s", in.flag, fl.flag, fl.path)
				}
			}
			infos = append(infos, struct {
				flag string
				fi   os.FileInfo
			}{fl.flag, fi})
		}
		seen[target] = fl.flag
	}
	for _, p := range []string{f.jsonOut, f.csvOut, f.requestsOut, f.htmlOut} {
		if p == "" {
			continue
		}
		out, err := openOutput(stdout, p)
		if err != nil {
			o.discard()
			return nil, err
		}
		o.files[p] = out
	}
	return o, nil
}

// records appends one level's per-request records to --requests-out.
func (o *benchOutputs) records(level int, recs []measure.Record) error {
	if w := o.files[o.f.requestsOut]; w != nil {
		if err := measure.WriteRecordsJSONL(w, level, recs); err != nil {
			return failedError(fmt.Errorf("--requests-out: %w", err))
		}
	}
	return nil
}

// finish writes the summaries (one object, or an array for a sweep) to
// --json and --csv and closes every file, reporting the first error.
func (o *benchOutputs) finish(sums []measure.Summary) error {
	if w := o.files[o.f.jsonOut]; w != nil && len(sums) > 0 {
		var v any = sums[0]
		if o.f.sweep != "" {
			v = sums
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ") // one space: a sample a line, thousands of them
		if err := enc.Encode(v); err != nil {
			return failedError(fmt.Errorf("--json: %w", err))
		}
	}
	if w := o.files[o.f.csvOut]; w != nil {
		if err := measure.WriteCSV(w, sums); err != nil {
			return failedError(fmt.Errorf("--csv: %w", err))
		}
	}
	if w := o.files[o.f.htmlOut]; w != nil && len(sums) > 0 {
		if err := report.WriteBenchHTML(w, benchRun(sums), "servetune "+version); err != nil {
			return failedError(fmt.Errorf("--html: %w", err))
		}
	}
	return o.commit()
}

// commit renames each output over the file it stands for, reporting the
// first error.
func (o *benchOutputs) commit() error {
	var first error
	for p, w := range o.files {
		delete(o.files, p)
		if err := w.commit(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// discard removes the temporary files of outputs never written.
func (o *benchOutputs) discard() {
	for p, w := range o.files {
		delete(o.files, p)
		w.discard()
	}
}

// benchRun names a run's levels for its report, titled by its model and
// endpoint.
func benchRun(sums []measure.Summary) report.BenchRun {
	run := report.BenchRun{Title: "run"}
	if m := sums[0].Meta; m != nil {
		run.Title = fmt.Sprintf("%v", m["model"])
		if u, ok := m["base_url"].(string); ok && u != "" {
			run.Title += " at " + u
		}
	}
	for _, s := range sums {
		run.Levels = append(run.Levels, report.BenchLevel{Name: loadName(measure.Load{Rate: s.RequestRate, MaxConcurrency: s.MaxConcurrency}), Summary: s})
	}
	return run
}

// close keeps whatever finish did not: what was measured until a failure
// stays readable in the named files.
func (o *benchOutputs) close() { _ = o.commit() }

func errorList(m map[string]int) string {
	var parts []string
	for _, c := range measure.ErrorClasses {
		if n := m[string(c)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}

// printSummary writes the human-readable table of one level.
func printSummary(w io.Writer, name string, s measure.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "============ Serving Benchmark Result (%s) ============\n", name)
	// Values hold the server's words (its error messages).
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%s\n", k, term.Line(fmt.Sprint(v))) }
	row("Successful requests:", s.Completed)
	row("Failed requests:", s.Failed)
	if why, ok := s.Meta["stopped"].(string); ok {
		row("Stopped early:", why)
	}
	if s.Failed > 0 {
		row("Failures by class:", errorList(s.Errors))
		for _, c := range measure.ErrorClasses {
			if msg := s.ErrorMessages[string(c)]; msg != "" {
				row("  first "+string(c)+":", msg)
			}
		}
	}
	if s.Completed == 0 {
		// Tables of zeros would bury the server's own words above.
		tw.Flush()
		fmt.Fprintln(w, strings.Repeat("=", 60))
		return
	}
	row("Benchmark duration (s):", fmt.Sprintf("%.2f", s.Duration))
	row("Total input tokens:", s.TotalInputTokens)
	row("Total generated tokens:", s.TotalOutputTokens)
	row("Request throughput (req/s):", fmt.Sprintf("%.2f", s.RequestThroughput))
	if s.RequestGoodput > 0 {
		row("Request goodput (req/s):", fmt.Sprintf("%.2f", s.RequestGoodput))
	}
	row("Output token throughput (tok/s):", fmt.Sprintf("%.2f", s.OutputThroughput))
	row("Peak output token throughput (tok/s):", fmt.Sprintf("%.2f", s.PeakOutputThroughput))
	row("Total token throughput (tok/s):", fmt.Sprintf("%.2f", s.TotalTokenThroughput))
	tw.Flush()
	fmt.Fprintf(w, "%-16s %9s %9s %19s %9s %19s %9s\n", "metric (ms)", "mean", "median", "median 95% CI", "p99", "p99 95% CI", "std")
	type metric struct {
		name string
		st   measure.Stats
	}
	metrics := []metric{
		{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}, {"ITL per token", s.ITLPerToken}, {"E2EL", s.E2EL},
	}
	// Lateness against the arrival schedule means something only for an
	// open-loop run; with every request due at once (rate inf) it is just
	// the wait for a concurrency slot, which stays in the JSON.
	if s.RequestRate > 0 {
		metrics = append(metrics, metric{"queue", s.Queue}, metric{"TTFT from sched", s.TTFTSched})
	}
	for _, m := range metrics {
		st := m.st
		fmt.Fprintf(w, "%-16s %9.2f %9.2f %19s %9.2f %19s %9.2f\n", m.name, st.Mean, st.Median,
			fmt.Sprintf("[%.2f, %.2f]", st.MedianCI[0], st.MedianCI[1]), st.P99,
			fmt.Sprintf("[%.2f, %.2f]", st.P99CI[0], st.P99CI[1]), st.Std)
	}
	fmt.Fprintln(w, strings.Repeat("=", 60))
}

func newBenchCompareCmd() *cobra.Command {
	var (
		seed      uint64
		bootstrap int
		jsonOut   string
		htmlOut   string
		allowDiff bool
	)
	cmd := &cobra.Command{
		Use:   "compare BASE.json NEW.json",
		Short: "Compare two bench results: change of each metric with a bootstrap 95% CI",
		Long: `Compare two result files written by 'servetune bench --json'. For TTFT, TPOT,
ITL and E2EL it reports the change of the median and of the p99 with a
bootstrap 95% confidence interval of the difference, computed from the
per-request samples stored in the files under "samples", and whether the
change is significant (the interval excludes zero). Sweep files are compared
level by level. Runs of different workloads (request rate, concurrency cap,
burstiness, dataset, request count) are refused: their difference is the
workload's, not the server's; --allow-different-workloads compares them
anyway, with a warning.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("compare takes BASE.json NEW.json, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := readSummaries(args[0])
			if err != nil {
				return usageError(err)
			}
			cur, err := readSummaries(args[1])
			if err != nil {
				return usageError(err)
			}
			if len(base) != len(cur) {
				return usageErrorf("%s has %d levels, %s has %d", args[0], len(base), args[1], len(cur))
			}
			if bootstrap < 1 {
				return usageErrorf("--bootstrap %d: must be >= 1", bootstrap)
			}
			var warnings []string
			for i := range base {
				if d := workloadDiffs(base[i], cur[i]); len(d) > 0 {
					// Base first everywhere in the line, as the
					// differences ("name base vs new") are.
					w := fmt.Sprintf("%s and %s ran different workloads at level %d (%s vs %s): %s", args[0], args[1], i+1,
						summaryLoad(base[i]).Name(), summaryLoad(cur[i]).Name(), strings.Join(d, "; "))
					if !allowDiff {
						return usageErrorf("%s; their difference is not the server's (--allow-different-workloads compares them anyway)", w)
					}
					warnings = append(warnings, w+"; a difference may be the workload's, not the server's")
				}
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+w)
			}
			rng := rand.New(rand.NewPCG(seed, 0xc0))
			var all [][]measure.Diff
			for i := range base {
				d, err := measure.Compare(base[i], cur[i], rng, bootstrap)
				if err != nil {
					return usageError(err)
				}
				all = append(all, d)
			}
			if htmlOut != "" {
				err := writeOutput(cmd.OutOrStdout(), htmlOut, func(f io.Writer) error {
					return report.WriteCompareHTML(f, args[0], args[1], base, cur, all, warnings, "servetune "+version)
				})
				if err != nil {
					return err
				}
			}
			if jsonOut != "" {
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, all); err != nil {
					return err
				}
			}
			w := tableOut(cmd, jsonOut)
			for _, warn := range warnings {
				fmt.Fprintln(w, "WARNING: "+warn)
			}
			for i, ds := range all {
				if len(all) > 1 || len(warnings) > 0 {
					fmt.Fprintf(w, "level %s\n", levelPair(base[i], cur[i]))
				}
				printDiffs(w, base[i], cur[i], ds)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "seed of the bootstrap")
	cmd.Flags().IntVar(&bootstrap, "bootstrap", measure.DefaultBootstrap, "bootstrap resamples")
	addJSONFlag(cmd.Flags(), &jsonOut, "the comparison (each level's differences)")
	cmd.Flags().BoolVar(&allowDiff, "allow-different-workloads", false, "compare runs whose workloads differ (rate, concurrency, burstiness, dataset, request count), with a warning")
	addOutputFlag(cmd.Flags(), &htmlOut, "html", "", "also write the comparison as a self-contained HTML report (distributions overlaid) to this file")
	return cmd
}

// summaryLoad is the load a summary was measured at.
func summaryLoad(s measure.Summary) measure.Load {
	return measure.Load{Rate: s.RequestRate, MaxConcurrency: s.MaxConcurrency, Burstiness: s.Burstiness}
}

// levelPair names a compared pair of levels: "concurrency=8", or
// "rate=14 against rate=8" (new against base, as the report's title)
// when their loads differ.
func levelPair(base, cur measure.Summary) string {
	b, n := summaryLoad(base).Name(), summaryLoad(cur).Name()
	if b == n {
		return b
	}
	return n + " against " + b
}

// workloadDiffs lists how two measured levels' workloads differ, "name
// base vs new" each: the load, and what meta says of the requests (the
// dataset, the request count or duration, ignore_eos, the API). The seed
// is not compared: each run draws fresh prompts of the same workload.
// Files without meta (vLLM's, servetune's earliest) compare on the load.
func workloadDiffs(base, cur measure.Summary) []string {
	var out []string
	add := func(name, b, n string) {
		if b != n {
			out = append(out, fmt.Sprintf("%s %s vs %s", name, b, n))
		}
	}
	add("request_rate", measure.FormatRate(base.RequestRate), measure.FormatRate(cur.RequestRate))
	conc := func(n int) string {
		if n <= 0 {
			return "none"
		}
		return strconv.Itoa(n)
	}
	add("max_concurrency", conc(base.MaxConcurrency), conc(cur.MaxConcurrency))
	if base.Burstiness > 0 && cur.Burstiness > 0 && base.RequestRate > 0 {
		add("burstiness", strconv.FormatFloat(base.Burstiness, 'g', -1, 64), strconv.FormatFloat(cur.Burstiness, 'g', -1, 64))
	}
	for _, k := range []string{"dataset", "num_requests", "duration_s", "ignore_eos", "endpoint"} {
		b, okB := base.Meta[k]
		n, okN := cur.Meta[k]
		if !okB || !okN {
			continue
		}
		bj, _ := json.Marshal(b)
		nj, _ := json.Marshal(n)
		add(k, string(bj), string(nj))
	}
	return out
}

// readSummaries reads one summary or a sweep's array of them.
func readSummaries(path string) ([]measure.Summary, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := strings.TrimSpace(string(raw))
	if strings.HasPrefix(trimmed, "[") {
		var ss []measure.Summary
		if err := json.Unmarshal(raw, &ss); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(ss) == 0 {
			return nil, fmt.Errorf("%s: no summaries", path)
		}
		return ss, nil
	}
	// One object, or several one after another: vLLM's --append-result
	// adds one line per run.
	var ss []measure.Summary
	dec := json.NewDecoder(strings.NewReader(trimmed))
	for dec.More() {
		var s measure.Summary
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: not a bench result: %w", path, err)
		}
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("%s: not a bench result: empty", path)
	}
	return ss, nil
}

func printDiffs(w io.Writer, base, cur measure.Summary, ds []measure.Diff) {
	fmt.Fprintf(w, "%-12s %11s %11s %11s %8s %25s  %s\n", "metric (ms)", "base", "new", "change", "%", "95% CI of change", "significant")
	for _, d := range ds {
		sig := "no"
		if d.Significant {
			sig = "yes"
		}
		fmt.Fprintf(w, "%-12s %11.3f %11.3f %+11.3f %+7.1f%% %25s  %s\n", d.Stat+" "+d.Metric, d.Base, d.New, d.Delta, d.RelPct,
			fmt.Sprintf("[%+.3f, %+.3f]", d.CI[0], d.CI[1]), sig)
	}
	rows := []struct {
		name      string
		base, new float64
	}{
		{"output tok/s", base.OutputThroughput, cur.OutputThroughput},
		{"request/s", base.RequestThroughput, cur.RequestThroughput},
	}
	if base.GoodputSLO != nil && cur.GoodputSLO != nil {
		// Goodput counts against each run's own limits: said when they
		// differ, as the figure then compares two questions.
		name := "goodput/s"
		if *base.GoodputSLO != *cur.GoodputSLO {
			name = "goodput/s*"
			defer fmt.Fprintf(w, "* goodput under different limits: base %+v, new %+v\n", *base.GoodputSLO, *cur.GoodputSLO)
		}
		rows = append(rows, struct {
			name      string
			base, new float64
		}{name, base.RequestGoodput, cur.RequestGoodput})
	}
	for _, t := range rows {
		rel := 0.0
		if t.base != 0 {
			rel = 100 * (t.new - t.base) / t.base
		}
		fmt.Fprintf(w, "%-12s %11.3f %11.3f %+11.3f %+7.1f%% %25s  %s\n", t.name, t.base, t.new, t.new-t.base, rel, "(no per-request CI)", "-")
	}
}

// printConversation prints a conversation level's sessions and its table
// by turn index (nothing for other workloads).
func printConversation(w io.Writer, c *measure.Conversation) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "---------- Conversation ----------\n")
	fmt.Fprintf(w, "Sessions: %d completed, %d failed of %d", c.SessionsCompleted, c.SessionsFailed, c.Sessions)
	if c.TurnsNotSent > 0 {
		fmt.Fprintf(w, "; %d turns not sent (their session ended at a failed turn)", c.TurnsNotSent)
	}
	fmt.Fprintln(w)
	if c.SessionsCompleted > 0 {
		fmt.Fprintf(w, "Session latency (ms): mean %.1f, median %.1f, p99 %.1f\n", c.MeanSessionMS, c.MedianSessionMS, c.P99SessionMS)
	} else {
		fmt.Fprintf(w, "Session latency: none (no session completed)\n")
	}
	fmt.Fprintf(w, "Input tokens: %d new, %d reused from history (%.1f%%)\n", c.NewInputTokens, c.ReusedInputTokens, 100*c.ReusedShare)
	if c.PrefixCacheHitRate != nil {
		fmt.Fprintf(w, "Engine prefix-cache hit rate: %.1f%%\n", 100**c.PrefixCacheHitRate)
	}
	fmt.Fprintf(w, "%4s %5s %6s %9s %9s %11s %9s %11s %9s\n", "turn", "ok", "failed", "input", "reused", "TTFT med", "p99", "E2E med", "p99")
	for _, t := range c.Turns {
		if t.Completed == 0 {
			// No figures, not zeros.
			fmt.Fprintf(w, "%4d %5d %6d %9s %9s %11s %9s %11s %9s\n", t.Turn, t.Completed, t.Failed, "-", "-", "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(w, "%4d %5d %6d %9.0f %9.0f %11.1f %9.1f %11.1f %9.1f\n", t.Turn, t.Completed, t.Failed, t.MeanInputTokens, t.MeanReusedTokens,
			t.MedianTTFTMS, t.P99TTFTMS, t.MedianE2ELMS, t.P99E2ELMS)
	}
}

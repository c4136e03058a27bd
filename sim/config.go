package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/catalog"
)

// Engine is the engine whose command line, memory accounting, scheduler and
// metric names the simulator reproduces.
type Engine string

// Simulated engines.
const (
	VLLM   Engine = "vllm"
	SGLang Engine = "sglang"
)

// Environment variables with the sim-only facts; the flags of the same name
// (--gpu, --num-gpus, --time-scale, --sim-load-time, --engine,
// --model-config) take precedence.
const (
	EnvGPU         = "SERVETUNE_SIM_GPU"
	EnvNumGPUs     = "SERVETUNE_SIM_NUM_GPUS"
	EnvTimeScale   = "SERVETUNE_SIM_TIME_SCALE"
	EnvLoadTime    = "SERVETUNE_SIM_LOAD_TIME"
	EnvEngine      = "SERVETUNE_SIM_ENGINE"
	EnvModelConfig = "SERVETUNE_SIM_MODEL_CONFIG"
)

// ErrBadArgs is wrapped by every command-line error of ParseArgs.
var ErrBadArgs = errors.New("bad engine arguments")

// Config is one simulated engine: the model, the hardware and the launch
// settings, with the engine's defaults filled in. Build it with ParseArgs
// (the engine's own command line) or fill it by hand and call Normalize.
type Config struct {
	Engine Engine
	// ModelID is the id the server answers to (--served-model-name, else the
	// model argument).
	ModelID string
	Model   catalog.Model
	GPU     catalog.GPU
	NumGPUs int

	TP, PP, DP int

	MaxNumSeqs       int // vLLM --max-num-seqs; SGLang --max-running-requests
	MaxBatchedTokens int // vLLM --max-num-batched-tokens; SGLang --chunked-prefill-size
	MaxPrefillTokens int // SGLang --max-prefill-tokens (0 for vLLM)
	// MemFraction is vLLM's --gpu-memory-utilization (share of total memory
	// for everything) or SGLang's --mem-fraction-static (share for weights
	// and the KV pool): not the same quantity.
	MemFraction    float64
	MaxModelLen    int
	Quantization   string // "", fp8, awq, gptq
	KVCacheDType   string // auto, fp8, fp8_e4m3, fp8_e5m2
	PrefixCaching  bool
	ChunkedPrefill bool
	MixedChunk     bool // SGLang --enable-mixed-chunk: prefill and decode in one batch
	BlockSize      int  // vLLM --block-size; SGLang --page-size
	EnforceEager   bool // vLLM --enforce-eager; SGLang --disable-cuda-graph
	CUDAGraphMaxBS int

	// Sim-only.
	TimeScale float64       // the server runs TimeScale times faster than simulated time
	LoadTime  time.Duration // simulated start-up before /health turns ready
	Host      string
	Port      int
	APIKey    string `json:"-"` // --api-key; never logged
}

// flagSpec describes one accepted flag: its canonical name and whether it
// takes a value.
type flagSpec struct {
	name    string
	value   bool
	engines string // "v", "s" or "vs": whose command line has it
}

// flagTable holds every flag the simulator accepts, spelled exactly as the
// engines spell them (reference/engines.md), plus harmless flags it accepts
// and ignores so that launch commands written for the real engines work.
var flagTable = func() map[string]flagSpec {
	m := map[string]flagSpec{}
	add := func(engines string, value bool, names ...string) {
		for _, n := range names {
			m[n] = flagSpec{name: names[0], value: value, engines: engines}
		}
	}
	// Modelled, both engines.
	add("vs", true, "--model", "--model-path")
	add("vs", true, "--served-model-name")
	add("vs", true, "--host")
	add("vs", true, "--port")
	add("vs", true, "--quantization", "-q")
	add("vs", true, "--kv-cache-dtype")
	add("vs", true, "--api-key")
	// vLLM.
	add("v", true, "--tensor-parallel-size", "-tp")
	add("v", true, "--pipeline-parallel-size", "-pp")
	add("v", true, "--data-parallel-size", "-dp")
	add("v", true, "--max-num-seqs")
	add("v", true, "--max-num-batched-tokens")
	add("v", true, "--gpu-memory-utilization")
	add("v", true, "--max-model-len")
	add("v", false, "--enable-prefix-caching")
	add("v", false, "--no-enable-prefix-caching")
	add("v", false, "--enable-chunked-prefill")
	add("v", false, "--no-enable-chunked-prefill")
	add("v", true, "--block-size")
	add("v", false, "--enforce-eager")
	// SGLang.
	add("s", true, "--tp-size", "--tp")
	add("s", true, "--pp-size")
	add("s", true, "--dp-size")
	add("s", true, "--max-running-requests")
	add("s", true, "--chunked-prefill-size")
	add("s", true, "--max-prefill-tokens")
	add("s", true, "--mem-fraction-static")
	add("s", true, "--context-length")
	add("s", false, "--disable-radix-cache")
	add("s", true, "--page-size")
	add("s", false, "--disable-cuda-graph")
	add("s", true, "--cuda-graph-max-bs")
	add("s", false, "--enable-mixed-chunk")
	add("s", false, "--enable-metrics")
	// Accepted and ignored: they change nothing the simulator models.
	for _, n := range []string{"--disable-log-requests", "--disable-log-stats", "--trust-remote-code",
		"--enable-log-requests", "--disable-custom-all-reduce", "--async-scheduling", "--no-async-scheduling",
		"--disable-frontend-multiprocessing", "--skip-tokenizer-init", "--disable-fastapi-docs"} {
		add("vs", false, n)
	}
	for _, n := range []string{"--dtype", "--seed", "--download-dir", "--tokenizer", "--revision",
		"--swap-space", "--uvicorn-log-level", "--load-format", "--distributed-executor-backend",
		"--max-log-len", "--tokenizer-mode", "--generation-config", "--compilation-config", "-O",
		"--random-seed", "--log-level", "--attention-backend", "--schedule-policy", "--tool-call-parser",
		"--reasoning-parser", "--chat-template", "--max-num-partial-prefills", "--limit-mm-per-prompt",
		"--kv-transfer-config", "--cuda-graph-bs"} {
		add("vs", true, n)
	}
	// Sim-only.
	add("vs", true, "--gpu")
	add("vs", true, "--num-gpus")
	add("vs", true, "--time-scale")
	add("vs", true, "--sim-load-time")
	add("vs", true, "--engine")
	add("vs", true, "--model-config")
	return m
}()

// ParseArgs parses an engine command line: vLLM's (`[serve] MODEL [flags]` or
// `--model MODEL [flags]`) or SGLang's (`--model-path MODEL [flags]`), plus
// the sim-only flags. env looks up SERVETUNE_SIM_* variables (os.Getenv, or
// nil for none). The engine is --engine, else SERVETUNE_SIM_ENGINE, else
// SGLang when any SGLang-only flag is present, else vLLM. Unknown flags are
// rejected, as the engines' own argument parsers do.
func ParseArgs(args []string, env func(string) string) (Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	vals := map[string]string{} // canonical name -> value ("" for booleans)
	var positional []string
	sawV, sawS := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		spec, ok := flagTable[name]
		if !ok {
			return Config{}, fmt.Errorf("%w: unrecognized arguments: %s", ErrBadArgs, name)
		}
		if spec.value && !hasVal {
			if i+1 >= len(args) {
				return Config{}, fmt.Errorf("%w: argument %s: expected one argument", ErrBadArgs, name)
			}
			i++
			val = args[i]
		} else if !spec.value && hasVal {
			return Config{}, fmt.Errorf("%w: argument %s: ignored explicit argument %q", ErrBadArgs, name, val)
		}
		switch spec.engines {
		case "v":
			sawV = true
		case "s":
			sawS = true
		}
		vals[spec.name] = val
	}
	// `vllm serve MODEL`: drop a leading "serve".
	if len(positional) > 0 && positional[0] == "serve" {
		positional = positional[1:]
	}
	if len(positional) > 1 {
		return Config{}, fmt.Errorf("%w: unrecognized arguments: %s", ErrBadArgs, strings.Join(positional[1:], " "))
	}

	cfg := Config{}
	engine := firstNonEmpty(vals["--engine"], env(EnvEngine))
	switch strings.ToLower(engine) {
	case "":
		cfg.Engine = VLLM
		if sawS {
			cfg.Engine = SGLang
		}
	case "vllm":
		cfg.Engine = VLLM
	case "sglang":
		cfg.Engine = SGLang
	default:
		return Config{}, fmt.Errorf("%w: --engine %q: want vllm or sglang", ErrBadArgs, engine)
	}
	if cfg.Engine == VLLM && sawS || cfg.Engine == SGLang && sawV {
		return Config{}, fmt.Errorf("%w: vLLM and SGLang flags mixed on one command line", ErrBadArgs)
	}

	model := vals["--model"]
	if len(positional) == 1 {
		if model != "" && model != positional[0] {
			return Config{}, fmt.Errorf("%w: model given twice (%q and %q)", ErrBadArgs, positional[0], model)
		}
		model = positional[0]
	}
	if model == "" {
		return Config{}, fmt.Errorf("%w: no model (give MODEL, --model or --model-path)", ErrBadArgs)
	}
	var err error
	if path := firstNonEmpty(vals["--model-config"], env(EnvModelConfig)); path != "" {
		cfg.Model, err = catalog.LoadHFConfig(path, model)
	} else {
		cfg.Model, err = catalog.LookupModel(model)
	}
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
	}
	cfg.ModelID = firstNonEmpty(vals["--served-model-name"], model)

	gpuName := firstNonEmpty(vals["--gpu"], env(EnvGPU), defaultGPU)
	if cfg.GPU, err = catalog.LookupGPU(gpuName); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
	}

	p := parser{vals: vals}
	cfg.TP = p.intFlag(1, "--tensor-parallel-size", "--tp-size")
	cfg.PP = p.intFlag(1, "--pipeline-parallel-size", "--pp-size")
	cfg.DP = p.intFlag(1, "--data-parallel-size", "--dp-size")
	cfg.MaxNumSeqs = p.intFlag(0, "--max-num-seqs", "--max-running-requests")
	cfg.MaxBatchedTokens = p.intFlag(0, "--max-num-batched-tokens", "--chunked-prefill-size")
	cfg.MaxPrefillTokens = p.intFlag(0, "--max-prefill-tokens")
	cfg.MemFraction = p.floatFlag(0, "--gpu-memory-utilization", "--mem-fraction-static")
	cfg.MaxModelLen = p.intFlag(0, "--max-model-len", "--context-length")
	cfg.BlockSize = p.intFlag(0, "--block-size", "--page-size")
	cfg.CUDAGraphMaxBS = p.intFlag(0, "--cuda-graph-max-bs")
	cfg.Quantization = strings.ToLower(vals["--quantization"])
	cfg.KVCacheDType = strings.ToLower(firstNonEmpty(vals["--kv-cache-dtype"], "auto"))
	_, noPrefix := vals["--no-enable-prefix-caching"]
	_, noRadix := vals["--disable-radix-cache"]
	cfg.PrefixCaching = !noPrefix && !noRadix
	_, noChunk := vals["--no-enable-chunked-prefill"]
	cfg.ChunkedPrefill = !noChunk
	_, eager := vals["--enforce-eager"]
	_, noGraph := vals["--disable-cuda-graph"]
	cfg.EnforceEager = eager || noGraph
	_, cfg.MixedChunk = vals["--enable-mixed-chunk"]
	cfg.Host = firstNonEmpty(vals["--host"], defaultHost)
	cfg.Port = p.intFlag(defaultPort, "--port")
	cfg.APIKey = vals["--api-key"]
	if s := firstNonEmpty(vals["--num-gpus"], env(EnvNumGPUs)); s != "" {
		cfg.NumGPUs = p.parseInt("--num-gpus", s)
	}
	cfg.TimeScale = 1
	if s := firstNonEmpty(vals["--time-scale"], env(EnvTimeScale)); s != "" {
		cfg.TimeScale = p.parseFloat("--time-scale", s)
		if p.err == nil && !(cfg.TimeScale > 0) {
			p.err = fmt.Errorf("%w: --time-scale %v: must be a positive number", ErrBadArgs, cfg.TimeScale)
		}
	}
	cfg.LoadTime = -1
	if s := firstNonEmpty(vals["--sim-load-time"], env(EnvLoadTime)); s != "" {
		cfg.LoadTime = p.parseDuration("--sim-load-time", s)
	}
	if p.err != nil {
		return Config{}, p.err
	}
	// SGLang disables chunked prefill with --chunked-prefill-size -1.
	if cfg.Engine == SGLang && cfg.MaxBatchedTokens == -1 {
		cfg.ChunkedPrefill = false
		cfg.MaxBatchedTokens = 0
	}
	if err := cfg.Normalize(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Normalize fills the engine's defaults into unset (zero) fields and
// validates the result; errors wrap ErrBadArgs and name the bad setting.
func (c *Config) Normalize() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadArgs, fmt.Sprintf(format, a...))
	}
	if c.Engine == "" {
		c.Engine = VLLM
	}
	if c.Engine != VLLM && c.Engine != SGLang {
		return bad("engine %q: want vllm or sglang", c.Engine)
	}
	if err := c.Model.Validate(); err != nil {
		return bad("%v", err)
	}
	if c.GPU.ID == "" {
		g, err := catalog.LookupGPU(defaultGPU)
		if err != nil {
			return err
		}
		c.GPU = g
	}
	if c.GPU.MemoryGiB <= 0 || c.GPU.HBMTBps <= 0 || c.GPU.BF16TFLOPS <= 0 {
		return bad("GPU %q: memory, bandwidth and BF16 rate must be positive", c.GPU.ID)
	}
	if c.ModelID == "" {
		c.ModelID = c.Model.ID
	}
	for _, v := range []struct {
		name string
		p    *int
	}{{"tensor parallel size", &c.TP}, {"pipeline parallel size", &c.PP}, {"data parallel size", &c.DP}} {
		if *v.p == 0 {
			*v.p = 1
		}
		if *v.p < 0 {
			return bad("%s must be positive, got %d", v.name, *v.p)
		}
	}
	if c.Model.Heads%c.TP != 0 {
		return bad("Total number of attention heads (%d) must be divisible by tensor parallel size (%d).", c.Model.Heads, c.TP)
	}
	if c.Model.KVHeads < c.TP && c.TP%c.Model.KVHeads != 0 || c.Model.KVHeads >= c.TP && c.Model.KVHeads%c.TP != 0 {
		return bad("number of KV heads (%d) and tensor parallel size (%d) do not divide one another", c.Model.KVHeads, c.TP)
	}
	if c.Model.Layers%c.PP != 0 && c.PP > c.Model.Layers {
		return bad("pipeline parallel size %d exceeds the %d layers", c.PP, c.Model.Layers)
	}
	world := c.TP * c.PP * c.DP
	if c.NumGPUs == 0 {
		c.NumGPUs = world
	}
	if c.NumGPUs < 0 {
		return bad("--num-gpus must be positive, got %d", c.NumGPUs)
	}
	if world > c.NumGPUs {
		return bad("World size (%d) is larger than the number of available GPUs (%d) in this node.", world, c.NumGPUs)
	}

	large := c.GPU.MemoryGiB >= vllmLargeGPUThresholdGiB && !strings.HasPrefix(c.GPU.ID, "A100")
	switch c.Engine {
	case VLLM:
		if c.MaxNumSeqs == 0 {
			c.MaxNumSeqs = vllmSmallMaxNumSeqs
			if large {
				c.MaxNumSeqs = vllmLargeMaxNumSeqs
			}
		}
		if c.MaxModelLen == 0 {
			c.MaxModelLen = c.Model.MaxPosition
		}
		if c.MaxBatchedTokens == 0 {
			switch {
			case !c.ChunkedPrefill:
				c.MaxBatchedTokens = max(c.MaxModelLen, vllmSmallBatchedTokens)
			case large:
				c.MaxBatchedTokens = vllmLargeBatchedTokens
			default:
				c.MaxBatchedTokens = vllmSmallBatchedTokens
			}
		}
		if c.MemFraction == 0 {
			c.MemFraction = vllmDefaultUtilization
		}
		if c.BlockSize == 0 {
			c.BlockSize = vllmDefaultBlockSize
		}
		if c.CUDAGraphMaxBS == 0 {
			c.CUDAGraphMaxBS = vllmMaxCaptureSize
		}
		if c.MaxBatchedTokens < c.MaxNumSeqs {
			return bad("max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d).", c.MaxBatchedTokens, c.MaxNumSeqs)
		}
		if !c.ChunkedPrefill && c.MaxBatchedTokens < c.MaxModelLen {
			return bad("max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.", c.MaxBatchedTokens, c.MaxModelLen)
		}
	case SGLang:
		if c.MaxModelLen == 0 {
			c.MaxModelLen = c.Model.MaxPosition
		}
		if c.MaxBatchedTokens == 0 {
			c.MaxBatchedTokens = sglangDefaultChunkedPrefill
			if !c.ChunkedPrefill {
				c.MaxBatchedTokens = max(c.MaxModelLen, sglangDefaultMaxPrefill)
			}
		}
		if c.MaxPrefillTokens == 0 {
			c.MaxPrefillTokens = sglangDefaultMaxPrefill
		}
		if c.MemFraction == 0 {
			c.MemFraction = sglangDefaultMemFraction(c.TP)
		}
		if c.BlockSize == 0 {
			c.BlockSize = 1
		}
		if c.CUDAGraphMaxBS == 0 {
			c.CUDAGraphMaxBS = sglangDefaultCUDAGraphMaxBS
		}
		// MaxNumSeqs 0 stays: derived from the KV pool in Estimate.
	}
	if c.MaxModelLen > c.Model.MaxPosition && c.Model.MaxPosition > 0 {
		return bad("User-specified max_model_len (%d) is greater than the derived max_model_len (max_position_embeddings=%d in model's config.json).", c.MaxModelLen, c.Model.MaxPosition)
	}
	for _, v := range []struct {
		name string
		val  int
	}{{"max_model_len", c.MaxModelLen}, {"max_num_batched_tokens", c.MaxBatchedTokens}, {"block_size", c.BlockSize}} {
		if v.val <= 0 {
			return bad("%s must be positive, got %d", v.name, v.val)
		}
	}
	if c.MaxNumSeqs < 0 {
		return bad("max_num_seqs must be positive, got %d", c.MaxNumSeqs)
	}
	if !(c.MemFraction > 0 && c.MemFraction <= 1) {
		return bad("memory fraction %v: must be in (0, 1]", c.MemFraction)
	}
	switch c.Quantization {
	case "", "none":
		c.Quantization = c.Model.Quantization
	case "fp8", "awq", "gptq", "awq_marlin", "gptq_marlin":
		c.Quantization = strings.TrimSuffix(c.Quantization, "_marlin")
		if c.Model.Quantization != "" && c.Model.Quantization != c.Quantization {
			return bad("Quantization method specified in the model config (%s) does not match the quantization method specified in the `quantization` argument (%s).", c.Model.Quantization, c.Quantization)
		}
	default:
		return bad("--quantization %q: the simulator models fp8, awq and gptq", c.Quantization)
	}
	switch c.KVCacheDType {
	case "", "auto":
		c.KVCacheDType = "auto"
	case "fp8", "fp8_e4m3", "fp8_e5m2":
	default:
		return bad("--kv-cache-dtype %q: want auto, fp8, fp8_e4m3 or fp8_e5m2", c.KVCacheDType)
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		return bad("--time-scale %v: must be a positive number", c.TimeScale)
	}
	if c.LoadTime < 0 {
		c.LoadTime = defaultLoadTime
	}
	if c.Port < 0 || c.Port > 65535 {
		return bad("--port %d: out of range", c.Port)
	}
	return nil
}

// weightBytesPerElem is the storage size of a quantized linear weight.
func (c *Config) weightBytesPerElem() float64 {
	switch c.Quantization {
	case "fp8":
		return bytesFP8
	case "awq", "gptq":
		return bytesInt4
	default:
		return bytesBF16
	}
}

// kvBytesPerElem is the KV cache element size.
func (c *Config) kvBytesPerElem() float64 {
	if strings.HasPrefix(c.KVCacheDType, "fp8") {
		return 1
	}
	return 2
}

// kvHeadsPerGPU is the KV heads one TP rank stores: kv/tp, or one replicated
// head when there are fewer KV heads than ranks.
func (c *Config) kvHeadsPerGPU() int {
	return max(1, c.Model.KVHeads/c.TP)
}

// parser collects the first conversion error so ParseArgs reads linearly.
type parser struct {
	vals map[string]string
	err  error
}

func (p *parser) intFlag(def int, names ...string) int {
	for _, n := range names {
		if s, ok := p.vals[n]; ok {
			return p.parseInt(n, s)
		}
	}
	return def
}

func (p *parser) floatFlag(def float64, names ...string) float64 {
	for _, n := range names {
		if s, ok := p.vals[n]; ok {
			return p.parseFloat(n, s)
		}
	}
	return def
}

func (p *parser) parseInt(name, s string) int {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%w: argument %s: invalid int value: %q", ErrBadArgs, name, s)
	}
	return v
}

func (p *parser) parseFloat(name, s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if (err != nil || math.IsNaN(v)) && p.err == nil {
		p.err = fmt.Errorf("%w: argument %s: invalid float value: %q", ErrBadArgs, name, s)
	}
	return v
}

// parseDuration accepts a Go duration ("1.5s") or plain seconds ("1.5").
func (p *parser) parseDuration(name, s string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second))
	}
	if p.err == nil {
		p.err = fmt.Errorf("%w: argument %s: invalid duration %q (e.g. 1s, 500ms, 2.5)", ErrBadArgs, name, s)
	}
	return 0
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

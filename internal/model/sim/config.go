package sim

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// ErrBadArgs is wrapped by every configuration error: a bad command line
// (engine.ErrBadArgs) or settings the engine would refuse.
var ErrBadArgs = engine.ErrBadArgs

// Config is one simulated engine: the model, the hardware and the launch
// settings, with the engine's defaults filled in. Build it with ParseArgs
// (the engine's own command line) or fill it by hand and call Normalize.
type Config struct {
	Engine engine.Engine
	// ModelID is the id the server answers to (served_model_name, else the
	// model argument).
	ModelID string
	Model   catalog.Model
	GPU     catalog.GPU
	NumGPUs int

	TP, PP, DP int

	// The settings by neutral name (engine.Names: the engines' flags are in
	// the engine package's table).
	MaxRunningRequests int // max_running_requests
	MaxBatchedTokens   int // max_batched_tokens (SGLang: the prefill chunk)
	MaxPrefillTokens   int // max_prefill_tokens (SGLang only; 0 for vLLM)
	// MemFraction is gpu_memory_fraction: for vLLM the share of total
	// memory for everything, for SGLang the share for weights
	// and the KV pool): not the same quantity.
	MemFraction    float64
	MaxModelLen    int
	Quantization   string // "", fp8, awq, gptq
	KVCacheDType   string // the engine flag table's kv_cache_dtype values
	PrefixCaching  bool
	ChunkedPrefill bool
	MixedChunk     bool // mixed_chunk (SGLang): prefill and decode in one batch
	// AsyncScheduling is async_scheduling (on by default; off is vLLM's
	// --no-async-scheduling, SGLang's --disable-overlap-schedule): the
	// host's per-step work runs beside the GPU's steps, not between them.
	AsyncScheduling bool
	// ExpertParallel is expert_parallel: whole experts per GPU across the
	// experts' group (MoEGroup) instead of a slice of each.
	ExpertParallel bool
	// DPAttention is dp_attention (SGLang's flag, engine.Flag); vLLM
	// does it on every MoE model with DP > 1 (DPAttentionOn).
	DPAttention bool
	// Speculative decoding (speculative.go): SpecMethod spec_method ("" or
	// "none": off), SpecTokens the drafts per step (k), SpecDraftModel the
	// draft's id, SpecTopK and SpecVerify SGLang's tree (1 and k+1 for a
	// chain); SpecAcceptance each draft's acceptance rate, the
	// simulator's own setting (SpecAcceptanceSet: it was given).
	SpecMethod        string
	SpecTokens        int
	SpecDraftModel    string
	SpecTopK          int
	SpecVerify        int
	SpecAcceptance    float64
	SpecAcceptanceSet bool
	specDraft         catalog.Model // the draft model (draft_model), resolved by Normalize

	// Sampling is the server's sampling for a request that sets none
	// (nil: DefaultSampling), and SamplerSort says that the engine sorts
	// the vocabulary for top-p and top-k (sim_sampler_sort; steptime.go,
	// samplerSeconds). GenerationConfig is vLLM's --generation-config:
	// "auto" (or empty) for the model's generation_config.json defaults,
	// "vllm" for none, or a folder holding a generation_config.json.
	Sampling         *catalog.Sampling
	SamplerSort      bool
	GenerationConfig string

	// V0Scheduler: vLLM's V0 scheduler (sim_v0_scheduler; core.go,
	// scheduleV0Prefills), whose steps of new prompts run alone when
	// chunked prefill is off.
	V0Scheduler bool
	// AsyncOutputProc is async_output_proc (a vLLM V0 switch, on by
	// default): off, each step's output processing runs between the steps
	// (constants.go, outputProcPerSeq).
	AsyncOutputProc bool

	BlockSize      int  // block_size (SGLang: page size)
	CUDAGraphs     bool // cuda_graphs (on by default; off runs eager)
	CUDAGraphMaxBS int
	// StreamInterval is stream_interval: a stream's tokens go out one
	// message per this many (0 or 1: every step's), the first and the
	// last at once (sends).
	StreamInterval int

	// Constants are the efficiency constants of the step-time model; zero
	// fields take the stock values (StockConstants). A calibration
	// profile sets them (sim_calibration).
	Constants Constants
	// Calibration names the profile the constants came from ("" = stock).
	Calibration string
	// Deviation is what the engine does that the model lacks (deviation.go);
	// zero for none.
	Deviation Deviation

	// Disaggregated prefill and decode (disagg.go): the engine's role
	// ("" aggregated, RolePrefill, RoleDecode, RoleBoth), its KV connector
	// (vLLM's kv_connector, SGLang's transfer backend) and the link the KV
	// cache crosses (a Links name; the simulator's own setting).
	KVRole      string
	KVConnector string
	KVLink      string
	// The flags they come from: vLLM's --kv-transfer-config (JSON),
	// SGLang's --disaggregation-mode (null, prefill, decode).
	KVTransferConfig   string
	DisaggregationMode string

	// Sim-only.
	TimeScale float64       // the server runs TimeScale times faster than simulated time
	LoadTime  time.Duration // simulated start-up before /health turns ready
	Host      string
	Port      int
	APIKey    string `json:"-"` // api_key; never logged
}

// ParseArgs builds a Config from an engine command line: vLLM's (`[serve]
// MODEL [flags]` or `--model MODEL [flags]`) or SGLang's (`--model-path
// MODEL [flags]`), plus the simulator's own flags, with the SERVETUNE_SIM_*
// variables from env (os.Getenv, or nil for none) where the line does not
// give them (engine.ParseCommand). The engine is the sim_engine setting, else
// SGLang when an SGLang-only flag is present, else vLLM. Unknown flags are
// rejected, as the engines' own argument parsers do.
func ParseArgs(args []string, env func(string) string) (Config, error) {
	c, err := engine.ParseCommand(args, env)
	if err != nil {
		return Config{}, err
	}
	return FromCommand(c)
}

// FromCommand builds a Config from a command line read by
// engine.ParseCommand.
func FromCommand(c engine.Command) (Config, error) {
	e := c.Engine
	if e == "" {
		e = engine.VLLM
	}
	modelConfig, _ := c.Settings.String("sim_model_config")
	gpu, _ := c.Settings.String("sim_gpu")
	numGPUs, _ := c.Settings.Int("sim_num_gpus")
	return FromSettings(e, c.Model, modelConfig, gpu, numGPUs, c.Settings)
}

// FromSettings builds a Config for engine e serving model on numGPUs GPUs of
// the catalog's gpu ("" = the simulator's default, 0 GPUs = as many as the
// parallel settings need) with settings s by neutral name (engine.Names, and
// the server and sim settings of engine.ParseCommand). modelConfig, when
// not "", is a Hugging Face config.json for a model outside the catalog.
// The tuner's memory precheck and the virtual launcher build configs this
// way, without a command line.
func FromSettings(e engine.Engine, model, modelConfig, gpu string, numGPUs int, s engine.Settings) (Config, error) {
	if !e.Valid() {
		return Config{}, fmt.Errorf("%w: engine %q: want vllm or sglang", ErrBadArgs, e)
	}
	if model == "" {
		return Config{}, fmt.Errorf("%w: no model (give MODEL, --model or --model-path)", ErrBadArgs)
	}
	m, err := catalog.LoadModel(model, modelConfig)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
	}
	return FromModel(e, model, m, gpu, numGPUs, s)
}

// FromModel is FromSettings for a model already read: a config.json's
// content parsed by catalog.ParseHFConfig (a stored study's), or a catalog
// entry. model is the id the server answers to.
func FromModel(e engine.Engine, model string, m catalog.Model, gpu string, numGPUs int, s engine.Settings) (Config, error) {
	if !e.Valid() {
		return Config{}, fmt.Errorf("%w: engine %q: want vllm or sglang", ErrBadArgs, e)
	}
	cfg := Config{Engine: e, Model: m, ModelID: model, NumGPUs: numGPUs, TimeScale: 1, LoadTime: -1, Host: defaultHost,
		Port: defaultPort}
	switchesOn(&cfg)
	var err error
	if gpu == "" {
		gpu = defaultGPU
	}
	if cfg.GPU, err = catalog.LookupGPU(gpu); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
	}
	if v, ok := s.Float("sim_time_scale"); ok && !(v > 0 && v <= engine.MaxTimeScale) {
		return Config{}, fmt.Errorf("%w: %s %v: want a number above 0 and at most %d", ErrBadArgs, engine.Flag(e, "sim_time_scale"), v, engine.MaxTimeScale)
	}
	cfg.apply(s)
	if path, ok := s.String("sim_calibration"); ok && path != "" {
		force, _ := s.Bool("sim_force_calibration")
		if err := cfg.UseProfile(path, force); err != nil {
			return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
		}
	}
	if err := cfg.loadGenerationConfig(); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrBadArgs, err)
	}
	if cfg.Engine == engine.SGLang && cfg.MaxBatchedTokens == -1 {
		cfg.ChunkedPrefill, cfg.MaxBatchedTokens = false, 0
	}
	if err := cfg.Normalize(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// UseProfile takes c's constants from the calibration profile at path,
// which must have been measured on c's GPU and engine unless force.
func (c *Config) UseProfile(path string, force bool) error {
	p, err := LoadProfile(path)
	if err != nil {
		return err
	}
	return c.ApplyProfile(p, path, force)
}

// ApplyProfile takes c's constants from profile p (read from name, for
// messages), which must have been measured on c's GPU and engine unless
// force.
func (c *Config) ApplyProfile(p Profile, name string, force bool) error {
	if err := p.Check(c.GPU.ID, c.Engine, force); err != nil {
		return fmt.Errorf("calibration %s: %w", name, err)
	}
	c.Constants = p.Constants
	c.Calibration = fmt.Sprintf("%s (%s)", name, p.What())
	return nil
}

// setting is one launch setting the simulator models, by neutral name
// (engine.Names, and the server and sim settings of engine.ParseCommand):
// how its value reads from settings, where it goes in a Config, and what a
// Config holds for it. apply and Settings both walk settings, so a name is
// read and written back in one place.
type setting struct {
	name string
	// server marks the server's and the simulator's own settings (address,
	// key, time scale): applied, never among Config.Settings.
	server bool
	parse  func(s engine.Settings, name string) (any, bool)
	apply  func(c *Config, v any)
	// value is what c holds; ok is false when it holds nothing to write
	// (an unset number, which Normalize fills with the engine's default).
	value func(c *Config) (v any, ok bool)
}

// settings is the one table of what the simulator reads from settings.
// Names it does not list are ignored (the engine would take them).
var settings = []setting{
	field("tensor_parallel", engine.Settings.Int, func(c *Config) *int { return &c.TP }),
	field("pipeline_parallel", engine.Settings.Int, func(c *Config) *int { return &c.PP }),
	field("data_parallel", engine.Settings.Int, func(c *Config) *int { return &c.DP }),
	field("max_running_requests", engine.Settings.Int, func(c *Config) *int { return &c.MaxRunningRequests }),
	field("max_batched_tokens", engine.Settings.Int, func(c *Config) *int { return &c.MaxBatchedTokens }),
	field("max_prefill_tokens", engine.Settings.Int, func(c *Config) *int { return &c.MaxPrefillTokens }),
	field("gpu_memory_fraction", engine.Settings.Float, func(c *Config) *float64 { return &c.MemFraction }),
	field("max_model_len", engine.Settings.Int, func(c *Config) *int { return &c.MaxModelLen }),
	{name: "quantization", parse: text, apply: func(c *Config, v any) { c.Quantization = strings.ToLower(v.(string)) },
		value: func(c *Config) (any, bool) {
			if c.Quantization == "" {
				return "none", true // the engine table's word for unquantized
			}
			return c.Quantization, true
		}},
	{name: "kv_cache_dtype", parse: text, apply: func(c *Config, v any) { c.KVCacheDType = strings.ToLower(v.(string)) },
		value: func(c *Config) (any, bool) { return c.KVCacheDType, c.KVCacheDType != "" }},
	switched("prefix_caching", func(c *Config) *bool { return &c.PrefixCaching }),
	switched("chunked_prefill", func(c *Config) *bool { return &c.ChunkedPrefill }),
	field("block_size", engine.Settings.Int, func(c *Config) *int { return &c.BlockSize }),
	switched("cuda_graphs", func(c *Config) *bool { return &c.CUDAGraphs }),
	field("cuda_graph_max_bs", engine.Settings.Int, func(c *Config) *int { return &c.CUDAGraphMaxBS }),
	field("stream_interval", engine.Settings.Int, func(c *Config) *int { return &c.StreamInterval }),
	switched("mixed_chunk", func(c *Config) *bool { return &c.MixedChunk }),
	switched("async_scheduling", func(c *Config) *bool { return &c.AsyncScheduling }),
	whenOn("sim_sampler_sort", func(c *Config) *bool { return &c.SamplerSort }),
	whenOn("sim_v0_scheduler", func(c *Config) *bool { return &c.V0Scheduler }),
	whenOff("async_output_proc", func(c *Config) *bool { return &c.AsyncOutputProc }),
	nonEmpty("generation_config", func(c *Config) *string { return &c.GenerationConfig }),
	whenOn("expert_parallel", func(c *Config) *bool { return &c.ExpertParallel }),
	whenOn("dp_attention", func(c *Config) *bool { return &c.DPAttention }),
	{name: "spec_method", parse: text, apply: func(c *Config, v any) { c.SpecMethod = strings.ToLower(v.(string)) },
		value: func(c *Config) (any, bool) { return c.SpecMethod, c.specOn() }},
	field("spec_tokens", engine.Settings.Int, func(c *Config) *int { return &c.SpecTokens }),
	field("spec_draft_model", engine.Settings.String, func(c *Config) *string { return &c.SpecDraftModel }),
	field("spec_eagle_topk", engine.Settings.Int, func(c *Config) *int { return &c.SpecTopK }),
	field("spec_verify_tokens", engine.Settings.Int, func(c *Config) *int { return &c.SpecVerify }),

	server(field("port", engine.Settings.Int, func(c *Config) *int { return &c.Port })),
	server(field("sim_num_gpus", engine.Settings.Int, func(c *Config) *int { return &c.NumGPUs })),
	{name: "sim_spec_acceptance", server: true,
		parse: func(s engine.Settings, name string) (any, bool) { return boxed(s.Float(name)) },
		apply: func(c *Config, v any) { c.SpecAcceptance, c.SpecAcceptanceSet = v.(float64), true },
		value: func(c *Config) (any, bool) { return c.SpecAcceptance, c.SpecAcceptanceSet }},
	server(field("sim_time_scale", engine.Settings.Float, func(c *Config) *float64 { return &c.TimeScale })),
	{name: "sim_load_time", server: true,
		parse: func(s engine.Settings, name string) (any, bool) { v, ok := s[name].(time.Duration); return v, ok },
		apply: func(c *Config, v any) { c.LoadTime = v.(time.Duration) },
		value: func(c *Config) (any, bool) { return c.LoadTime, c.LoadTime >= 0 }},
	server(field("kv_transfer_config", engine.Settings.String, func(c *Config) *string { return &c.KVTransferConfig })),
	server(field("disaggregation_mode", engine.Settings.String, func(c *Config) *string { return &c.DisaggregationMode })),
	server(nonEmpty("disaggregation_transfer_backend", func(c *Config) *string { return &c.KVConnector })),
	server(nonEmpty("sim_kv_link", func(c *Config) *string { return &c.KVLink })),
	// An empty name or address keeps the model's id and the default host.
	server(nonEmpty("served_model_name", func(c *Config) *string { return &c.ModelID })),
	server(nonEmpty("host", func(c *Config) *string { return &c.Host })),
	server(field("api_key", engine.Settings.String, func(c *Config) *string { return &c.APIKey })),
}

// field is a setting held as is in the field at returns (an int, a float
// or a string); its zero value is unset.
func field[T comparable](name string, read func(engine.Settings, string) (T, bool), at func(*Config) *T) setting {
	return setting{name: name,
		parse: func(s engine.Settings, name string) (any, bool) { return boxed(read(s, name)) },
		apply: func(c *Config, v any) { *at(c) = v.(T) },
		value: func(c *Config) (any, bool) {
			var zero T
			return *at(c), *at(c) != zero
		}}
}

// switchesOn sets the switches that are on unless a setting turns them
// off, as the engines default them.
func switchesOn(c *Config) {
	c.PrefixCaching, c.ChunkedPrefill, c.CUDAGraphs, c.AsyncScheduling, c.AsyncOutputProc = true, true, true, true, true
}

// switched is a bool setting held in the field at returns, always
// written back; the field's default is FromModel's.
func switched(name string, at func(*Config) *bool) setting {
	return setting{name: name,
		parse: func(s engine.Settings, name string) (any, bool) { return boxed(s.Bool(name)) },
		apply: func(c *Config, v any) { *at(c) = v.(bool) },
		value: func(c *Config) (any, bool) { return *at(c), true }}
}

// whenOff is a bool setting, on by default, written back only when off.
func whenOff(name string, at func(*Config) *bool) setting {
	st := switched(name, at)
	st.value = func(c *Config) (any, bool) { return *at(c), !*at(c) }
	return st
}

// whenOn is a bool setting written back only when true: configurations
// without it keep the settings (and the keys) they had before it existed.
func whenOn(name string, at func(*Config) *bool) setting {
	st := switched(name, at)
	st.value = func(c *Config) (any, bool) { return *at(c), *at(c) }
	return st
}

// nonEmpty is a string setting that an empty value leaves as it was.
func nonEmpty(name string, at func(*Config) *string) setting {
	st := field(name, engine.Settings.String, at)
	parse := st.parse
	st.parse = func(s engine.Settings, name string) (any, bool) {
		v, ok := parse(s, name)
		return v, ok && v != ""
	}
	return st
}

func server(st setting) setting { st.server = true; return st }

func text(s engine.Settings, name string) (any, bool) { return boxed(s.String(name)) }

func boxed[T any](v T, ok bool) (any, bool) { return v, ok }

// apply copies settings by neutral name into c's fields.
func (c *Config) apply(s engine.Settings) {
	for _, st := range settings {
		if v, ok := st.parse(s, st.name); ok {
			st.apply(c, v)
		}
	}
}

// Settings are c's engine settings by neutral name, as apply reads them
// (FromSettings on them builds the same engine): each setting c holds a
// value for that the engine's flag table knows for c's engine (tunable,
// or a flag of c's engine). The server's and the simulator's own settings
// are left out.
func (c *Config) Settings() engine.Settings {
	out := engine.Settings{}
	for _, st := range settings {
		if st.server {
			continue
		}
		if _, tunable := engine.TypeOf(st.name); !tunable && engine.Flag(c.Engine, st.name) == "" {
			continue
		}
		if v, ok := st.value(c); ok {
			out[st.name] = v
		}
	}
	return out
}

// bad is a configuration error, wrapping ErrBadArgs.
func bad(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadArgs, fmt.Sprintf(format, a...))
}

// Normalize fills the engine's defaults into unset (zero) fields and
// validates the result; errors wrap ErrBadArgs and name the bad setting,
// in the engine's own words where it has them.
func (c *Config) Normalize() error {
	if c.Engine == "" {
		c.Engine = engine.VLLM
	}
	if !c.Engine.Valid() {
		return bad("engine %q: want vllm or sglang", c.Engine)
	}
	if err := c.Model.Validate(); err != nil {
		return bad("%v", err)
	}
	if err := c.Model.Simulable(); err != nil {
		// The weights are sized all the same: they answer "how many GPUs"
		// before any simulation.
		w := *c
		if w.Quantization == "" || w.Quantization == "none" {
			w.Quantization = w.Model.Quantization
		}
		q := w.Quantization
		if q == "" {
			q = "16-bit"
		}
		return bad("%v; its weights alone are %.1f GiB at %s", err, w.weightsBytes()/GiB, q)
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
	if err := c.Constants.validate(); err != nil {
		return bad("%v", err)
	}
	c.Constants = c.Constants.WithDefaults(c.Engine)
	if err := c.normalizeParallel(); err != nil {
		return err
	}
	if err := c.checkSparse(); err != nil { // sparse.go
		return err
	}
	var err error
	if c.Engine == engine.SGLang {
		err = c.sglangDefaults()
	} else {
		err = c.vllmDefaults()
	}
	if err != nil {
		return err
	}
	if err := c.specDefaults(); err != nil {
		return err
	}
	if err := c.normalizeDisagg(); err != nil {
		return err
	}
	return c.validate()
}

// normalizeParallel defaults the parallel degrees to 1 and checks them
// against the model and the GPUs.
func (c *Config) normalizeParallel() error {
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
	if a := c.Model.Linear; a != nil && (a.KeyHeads%c.TP != 0 || a.ValueHeads%c.TP != 0) {
		// vLLM's and SGLang's Gated DeltaNet split both kinds of heads over the ranks.
		return bad("linear_num_key_heads (%d) and linear_num_value_heads (%d) must be divisible by tensor parallel size (%d).", a.KeyHeads, a.ValueHeads, c.TP)
	}
	if c.Model.Layers%c.PP != 0 && c.PP > c.Model.Layers {
		return bad("pipeline parallel size %d exceeds the %d layers", c.PP, c.Model.Layers)
	}
	world := c.TP * c.PP * c.DP
	if c.NumGPUs == 0 {
		c.NumGPUs = world
	}
	if c.NumGPUs < 0 {
		return bad("%s must be positive, got %d", engine.Flag(c.Engine, "sim_num_gpus"), c.NumGPUs)
	}
	if world > c.NumGPUs {
		return bad("World size (%d) is larger than the number of available GPUs (%d) in this node.", world, c.NumGPUs)
	}
	return nil
}

// vllmDefaults fills vLLM V1's defaults and applies its start-up checks.
func (c *Config) vllmDefaults() error {
	large := c.GPU.MemoryGiB >= vllmLargeGPUThresholdGiB && !strings.HasPrefix(c.GPU.ID, "A100")
	if c.MaxRunningRequests == 0 {
		c.MaxRunningRequests = vllmSmallMaxNumSeqs
		if large {
			c.MaxRunningRequests = vllmLargeMaxNumSeqs
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
	c.vllmLinearDefaults() // a hybrid's state pages (linear.go)
	if c.CUDAGraphMaxBS == 0 {
		c.CUDAGraphMaxBS = vllmMaxCaptureSize
	}
	if c.MaxBatchedTokens < c.MaxRunningRequests {
		return bad("max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d).", c.MaxBatchedTokens, c.MaxRunningRequests)
	}
	if !c.ChunkedPrefill && c.MaxBatchedTokens < c.MaxModelLen {
		return bad("max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.", c.MaxBatchedTokens, c.MaxModelLen)
	}
	return nil
}

// sglangDefaults fills SGLang's defaults. MaxRunningRequests 0 stays: Estimate
// derives it from the KV pool, as SGLang does.
func (c *Config) sglangDefaults() error {
	if c.MaxModelLen == 0 {
		c.MaxModelLen = c.Model.MaxPosition
	}
	if c.MaxPrefillTokens == 0 {
		c.MaxPrefillTokens = sglangDefaultMaxPrefill
	}
	// The chunk, the CUDA graphs' largest batch and the memory fraction
	// by the GPU's memory (sglangMemoryDefaults); without chunked
	// prefill the reserve is for max_prefill_tokens instead.
	chunk := c.MaxBatchedTokens
	if !c.ChunkedPrefill {
		chunk = c.MaxPrefillTokens
	}
	dpAttention := 1
	if c.DPAttentionOn() {
		dpAttention = c.DP
	}
	chunk, graphBS, frac := sglangMemoryDefaults(c.GPU.MemoryGiB*1024, c.TP, max(c.PP, 1), dpAttention, c.SpecMethod != "", chunk, c.CUDAGraphMaxBS)
	if c.MaxBatchedTokens == 0 {
		c.MaxBatchedTokens = chunk
		if !c.ChunkedPrefill {
			c.MaxBatchedTokens = max(c.MaxModelLen, sglangDefaultMaxPrefill)
		}
	}
	if c.CUDAGraphMaxBS == 0 {
		c.CUDAGraphMaxBS = graphBS
	}
	if c.MemFraction == 0 {
		c.MemFraction = frac
	}
	if c.BlockSize == 0 {
		c.BlockSize = 1
	}
	return nil
}

// validate checks the filled-in settings both engines share.
func (c *Config) validate() error {
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
	if c.MaxRunningRequests < 0 {
		return bad("max_num_seqs must be positive, got %d", c.MaxRunningRequests)
	}
	if !(c.MemFraction > 0 && c.MemFraction <= 1) {
		return bad("memory fraction %v: must be in (0, 1]", c.MemFraction)
	}
	switch c.Quantization {
	case "", "none":
		c.Quantization = c.Model.Quantization
	case "nvfp4", "modelopt_fp4":
		if err := c.checkFP4(); err != nil {
			return err
		}
	case "fp8", "awq", "gptq", "awq_marlin", "gptq_marlin", "mxfp4", "compressed-tensors":
		c.Quantization = strings.TrimSuffix(c.Quantization, "_marlin")
		if c.Model.Quantization != "" && c.Model.Quantization != c.Quantization {
			return bad("Quantization method specified in the model config (%s) does not match the quantization method specified in the `quantization` argument (%s).", c.Model.Quantization, c.Quantization)
		}
	default:
		return bad("%s %q: the simulator models fp8, awq, gptq, mxfp4 and modelopt_fp4 (nvfp4)", engine.Flag(c.Engine, "quantization"), c.Quantization)
	}
	if err := c.checkWeightBlocks(); err != nil {
		return err
	}
	if c.KVCacheDType == "" {
		c.KVCacheDType = "auto"
	}
	// The engine flag table's values are the simulator's: auto, and each
	// fp8 spelling (one byte per KV element).
	if kn, _ := engine.LookupKnob("kv_cache_dtype"); !slices.Contains(kn.Choices, c.KVCacheDType) {
		last := len(kn.Choices) - 1
		return bad("%s %q: want %s or %s", engine.Flag(c.Engine, "kv_cache_dtype"), c.KVCacheDType, strings.Join(kn.Choices[:last], ", "), kn.Choices[last])
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0 && c.TimeScale <= engine.MaxTimeScale) {
		return bad("%s %v: want a number above 0 and at most %d", engine.Flag(c.Engine, "sim_time_scale"), c.TimeScale, engine.MaxTimeScale)
	}
	if c.LoadTime < 0 {
		c.LoadTime = defaultLoadTime
	}
	if c.Port < 0 || c.Port > 65535 {
		return bad("%s %d: out of range", engine.Flag(c.Engine, "port"), c.Port)
	}
	return nil
}

// checkWeightBlocks refuses, as both engines do while creating the
// weights, a block-scaled FP8 checkpoint whose MLPs tensor parallelism
// splits off a block: each GPU's share of a gate/up output (and of the
// down projection's input) must be whole blocks of weight_block_size.
// Routed experts under expert parallelism stay whole. vLLM's
// Fp8MoEMethod.create_weights and validate_fp8_block_shape (fp8.py) and
// SGLang's copy raise it: Qwen3-235B-A22B-FP8 at TP8, 1536/8 = 192
// against 128 (vLLM issue #17569), served at TP4 (384) or with experts
// in parallel instead.
func (c *Config) checkWeightBlocks() error {
	b := c.Model.WeightBlock
	if c.Quantization != "fp8" || b <= 0 || c.TP <= 1 {
		return nil
	}
	if c.Model.Experts > 0 && !c.ExpertParallel && (c.Model.Intermediate/c.TP)%b != 0 {
		return bad("The output_size of gate's and up's weight = %d is not divisible by weight quantization block_n = %d.",
			c.Model.Intermediate/c.TP, b)
	}
	dense := []int{c.Model.SharedIntermediate, c.Model.DenseIntermediate}
	if c.Model.Experts == 0 {
		dense = []int{c.Model.Intermediate}
	}
	for _, n := range dense {
		if n > 0 && (n/c.TP)%b != 0 {
			return bad("Weight output_partition_size = %d is not divisible by weight quantization block_n = %d.", n/c.TP, b)
		}
	}
	return nil
}

// weightsBytes is the whole model's weights: quantized linear layers,
// 16-bit embeddings and LM head (catalog.Model.WeightBytes).
func (c *Config) weightsBytes() float64 {
	return c.Model.WeightBytes(c.quantOrNone())
}

// quantOrNone is the quantization for catalog's weight formats: "none"
// for 16-bit, so that the checkpoint's own does not stand in for it.
func (c *Config) quantOrNone() string {
	if c.Quantization == "" {
		return "none"
	}
	return c.Quantization
}

// weightBytesPerElem is the storage size of a linear weight other than
// a routed expert's.
func (c *Config) weightBytesPerElem() float64 {
	bits, expertsOnly := c.Model.QuantBits(c.Quantization)
	if expertsOnly {
		return bytesBF16
	}
	return bits / 8
}

// expertBytesPerElem is the storage size of a routed expert's weight.
func (c *Config) expertBytesPerElem() float64 {
	bits, _ := c.Model.QuantBits(c.Quantization)
	return bits / 8
}

// kvBytesPerElem is the KV cache element size.
func (c *Config) kvBytesPerElem() float64 {
	if strings.HasPrefix(c.KVCacheDType, "fp8") || c.sparseKVFP8() {
		return 1
	}
	return 2
}

// kvHeadsPerGPU is the KV heads one TP rank stores: kv/tp, or one replicated
// head when there are fewer KV heads than ranks.
func (c *Config) kvHeadsPerGPU() int {
	return max(1, c.Model.KVHeads/c.TP)
}

// sends reports whether a stream's tokens go out as a message now, with
// pending generated since the last message and sent before it: the first
// token at once, then one message per StreamInterval tokens, and the
// last. Both engines do so: vLLM's output processor sends when the
// request finished, on its first token, or once stream_interval tokens
// have gathered (vllm/v1/engine/output_processor.py, RequestState); SGLang's
// scheduler when len(output_ids) % stream_interval == 1 or the request
// finished (scheduler_output_processor_mixin.py, stream_output_generation),
// the same messages at one token per step.
func (c *Config) sends(pending, sent int, last bool) bool {
	return last || sent == 0 || pending >= max(c.StreamInterval, 1)
}

// loadGenerationConfig reads the sampling defaults of a --generation-config
// folder into Sampling; "auto" and "vllm" name no folder.
func (c *Config) loadGenerationConfig() error {
	switch c.GenerationConfig {
	case "", "auto", "vllm":
		return nil
	}
	g, err := catalog.LoadGenerationConfig(filepath.Join(c.GenerationConfig, "generation_config.json"))
	if err != nil {
		return err
	}
	if g == nil {
		g = &catalog.Sampling{Temperature: 1}
	}
	c.Sampling = g
	return nil
}

// DefaultSampling is the sampling the server gives a request that sets
// none: Sampling when set, else the model's generation_config.json
// defaults (vLLM's --generation-config auto, its default since PR
// #12622), else the OpenAI API's (temperature 1, no filter). Only an
// engine that sorts for a filter (SamplerSort) pays for it.
func (c *Config) DefaultSampling() catalog.Sampling {
	switch {
	case c.Sampling != nil:
		return *c.Sampling
	case c.Model.Generation != nil && c.GenerationConfig != "vllm":
		return *c.Model.Generation
	}
	return catalog.Sampling{Temperature: 1}
}

// RequestSampling is a request's sampling: the fields it sets over the
// server's defaults (DefaultSampling).
func (c *Config) RequestSampling(temperature, topP *float64, topK *int) catalog.Sampling {
	s := c.DefaultSampling()
	if temperature != nil {
		s.Temperature = *temperature
	}
	if topP != nil {
		s.TopP = *topP
	}
	if topK != nil {
		s.TopK = *topK
	}
	return s
}

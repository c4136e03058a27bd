package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the one table of engine command-line flags: every flag of
// vLLM and SGLang servetune renders or reads, by neutral setting name, and
// the simulated engine's own flags. Names drift between engine releases:
// change them here only (docs/architecture.md, "Where to add").

// Type is the kind of value a setting takes.
type Type int

// Setting value types.
const (
	Int Type = iota
	Float
	String
	Bool
	Duration // a Go duration ("1.5s") or plain seconds ("1.5")
)

func (t Type) String() string {
	return [...]string{"an integer", "a number", "a string", "true or false", "a duration"}[t]
}

// spelling says how one engine writes one setting.
type spelling struct {
	flag    string            // flag followed by the value
	aliases []string          // other names of flag
	values  map[string]string // value renames when rendering
	on      []string          // bool settings: argv when true
	off     []string          // bool settings: argv when false
	// custom renders settings whose flags depend on other settings; emits
	// lists the flags it may write (for "did you mean" on flag names).
	custom func(v any, s Settings) []string
	emits  []string
	// read overrides how flag's value is read back (nil: as the setting's type).
	read func(val string, s Settings) error
}

// setting is one row of the table.
type setting struct {
	name    string
	typ     Type
	min     float64  // Int and Float: smallest value allowed (exclusive when open)
	max     float64  // Int and Float: largest value allowed, 0 = none
	open    bool     // Float: min is exclusive
	enum    []string // String: allowed values
	skip    string   // String: value that renders no flag (the engine default)
	tunable bool     // may appear in a study's space
	sim     bool     // a flag of the simulated engine only
	doc     string
	vllm    spelling
	sglang  spelling
}

func (s *setting) spell(e Engine) spelling {
	if e == SGLang {
		return s.sglang
	}
	return s.vllm
}

// simFlag is a setting of the simulated engine's own, spelled flag on both
// engines' command lines (a Bool one is the flag alone when true).
func simFlag(name string, typ Type, flag, doc string) setting {
	sp := spelling{flag: flag}
	if typ == Bool {
		sp = spelling{on: []string{flag}}
	}
	return setting{name: name, typ: typ, sim: true, doc: doc, vllm: sp, sglang: sp}
}

// table is the one table. Render emits tunable settings in this order.
//
// gpu_memory_fraction renders the same number to both engines but the
// quantity differs: vLLM's flag is the share of the GPU's TOTAL memory the
// engine may use for everything (weights, activations, CUDA graphs,
// non-torch memory and KV cache), while SGLang's is the share for weights
// plus the KV pool only; activations and graphs must fit in the remaining
// 1-f. The same value therefore gives SGLang the larger KV pool (typical
// SGLang values are a few points lower than vLLM's). The simulator's memory
// model applies each engine's own accounting, so the tuner compares like
// with like.
var table = []setting{
	// tensor_parallel is the attention's TP within one data-parallel rank
	// (vLLM's meaning). SGLang's --tp-size spans every GPU of the server
	// when --enable-dp-attention splits it into --dp-size attention ranks:
	// it renders tensor_parallel × data_parallel then, and reads back
	// divided (dpAttentionTP).
	{name: "tensor_parallel", typ: Int, min: 1, tunable: true,
		doc:  "GPUs one model replica's layers are split across (tensor parallel size)",
		vllm: spelling{flag: "--tensor-parallel-size", aliases: []string{"-tp"}},
		sglang: spelling{flag: "--tp-size", aliases: []string{"--tp"}, emits: []string{"--tp-size"},
			custom: func(v any, s Settings) []string {
				n := v.(int)
				if on, _ := s.Bool("dp_attention"); on {
					if dp, ok := s.Int("data_parallel"); ok && dp > 0 {
						n *= dp
					}
				}
				return []string{"--tp-size", strconv.Itoa(n)}
			}}},
	{name: "pipeline_parallel", typ: Int, min: 1, tunable: true,
		doc:  "pipeline stages one replica is split into",
		vllm: spelling{flag: "--pipeline-parallel-size", aliases: []string{"-pp"}}, sglang: spelling{flag: "--pp-size"}},
	{name: "data_parallel", typ: Int, min: 1, tunable: true,
		doc:  "replicas inside one server (for MoE models with dp_attention: attention ranks sharing the experts)",
		vllm: spelling{flag: "--data-parallel-size", aliases: []string{"-dp"}}, sglang: spelling{flag: "--dp-size", aliases: []string{"--dp"}}},
	// Expert parallelism places whole experts on GPUs instead of slicing
	// every expert: vLLM's switch makes the experts' group (tensor_parallel
	// × data_parallel GPUs, docs/reference.md (Mixture of experts)) an EP
	// group; SGLang takes the EP size, that of its --tp-size.
	{name: "expert_parallel", typ: Bool, tunable: true,
		doc:  "MoE: whole experts per GPU across the experts' group (tensor_parallel × data_parallel GPUs with dp_attention)",
		vllm: spelling{on: []string{"--enable-expert-parallel"}},
		sglang: spelling{flag: "--ep-size", aliases: []string{"--ep"}, emits: []string{"--ep-size"},
			custom: func(v any, s Settings) []string {
				if on, _ := v.(bool); !on {
					return nil
				}
				n, _ := s.Int("tensor_parallel")
				n = max(n, 1)
				if on, _ := s.Bool("dp_attention"); on {
					if dp, ok := s.Int("data_parallel"); ok && dp > 0 {
						n *= dp
					}
				}
				return []string{"--ep-size", strconv.Itoa(n)}
			},
			read: func(val string, s Settings) error {
				n, err := strconv.Atoi(strings.TrimSpace(val))
				if err != nil || n < 1 {
					return fmt.Errorf("invalid int value: %q", val)
				}
				s["expert_parallel"] = n > 1
				return nil
			}}},
	// Data-parallel attention: each data-parallel rank runs attention on
	// its own requests with its own KV cache, the experts shared across
	// ranks. vLLM does so for every MoE model with data_parallel > 1 and
	// has no flag; SGLang needs --enable-dp-attention.
	{name: "dp_attention", typ: Bool, tunable: true,
		doc:    "MoE: data_parallel ranks run attention apart and share the experts (vLLM: always on MoE models with data_parallel > 1)",
		sglang: spelling{on: []string{"--enable-dp-attention"}}},
	{name: "max_running_requests", typ: Int, min: 1, tunable: true,
		doc:  "requests scheduled at once (the running batch)",
		vllm: spelling{flag: "--max-num-seqs"}, sglang: spelling{flag: "--max-running-requests"}},
	// vLLM's per-step token budget. SGLang has two knobs: the prefill chunk
	// size and the prefill batch budget; both take the value, except that
	// with chunked_prefill false the chunk size is chunked_prefill's -1.
	{name: "max_batched_tokens", typ: Int, min: 1, tunable: true,
		doc:  "tokens one engine step may process (SGLang: the prefill chunk and prefill budget)",
		vllm: spelling{flag: "--max-num-batched-tokens"},
		sglang: spelling{flag: "--chunked-prefill-size", emits: []string{"--chunked-prefill-size", "--max-prefill-tokens"},
			custom: func(v any, s Settings) []string {
				n := formatValue(v)
				if on, ok := s.Bool("chunked_prefill"); ok && !on {
					return []string{"--max-prefill-tokens", n}
				}
				return []string{"--chunked-prefill-size", n, "--max-prefill-tokens", n}
			},
			read: func(val string, s Settings) error {
				n, err := strconv.Atoi(strings.TrimSpace(val))
				if err != nil {
					return fmt.Errorf("invalid int value: %q", val)
				}
				if n == -1 { // SGLang's way to turn chunked prefill off
					s["chunked_prefill"] = false
					return nil
				}
				s["max_batched_tokens"] = n
				return nil
			}}},
	{name: "gpu_memory_fraction", typ: Float, min: 0, open: true, max: 1, tunable: true,
		doc:  "share of GPU memory the engine takes (vLLM: for everything; SGLang: for weights and the KV pool)",
		vllm: spelling{flag: "--gpu-memory-utilization"}, sglang: spelling{flag: "--mem-fraction-static"}},
	{name: "max_model_len", typ: Int, min: 1, tunable: true,
		doc:  "longest prompt plus output one request may have",
		vllm: spelling{flag: "--max-model-len"}, sglang: spelling{flag: "--context-length"}},
	{name: "quantization", typ: String, skip: "none", tunable: true,
		enum: []string{"none", "fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "int4", "int8", "bitsandbytes", "compressed-tensors", "marlin", "modelopt", "mxfp4", "modelopt_fp4"},
		doc:  "weight quantization",
		vllm: spelling{flag: "--quantization", aliases: []string{"-q"}}, sglang: spelling{flag: "--quantization"}},
	// SGLang has no plain "fp8" KV dtype; fp8_e4m3 is what vLLM's fp8 means.
	{name: "kv_cache_dtype", typ: String, skip: "auto", tunable: true,
		enum: []string{"auto", "fp8", "fp8_e4m3", "fp8_e5m2"},
		doc:  "KV cache element type (fp8 holds twice the tokens)",
		vllm: spelling{flag: "--kv-cache-dtype"}, sglang: spelling{flag: "--kv-cache-dtype", values: map[string]string{"fp8": "fp8_e4m3"}}},
	{name: "prefix_caching", typ: Bool, tunable: true,
		doc:    "reuse the KV blocks of shared prompt prefixes",
		vllm:   spelling{on: []string{"--enable-prefix-caching"}, off: []string{"--no-enable-prefix-caching"}},
		sglang: spelling{off: []string{"--disable-radix-cache"}}},
	{name: "chunked_prefill", typ: Bool, tunable: true,
		doc:  "split long prompts across steps",
		vllm: spelling{on: []string{"--enable-chunked-prefill"}, off: []string{"--no-enable-chunked-prefill"}},
		sglang: spelling{emits: []string{"--chunked-prefill-size"}, custom: func(v any, _ Settings) []string {
			if on, _ := v.(bool); on {
				return nil
			}
			return []string{"--chunked-prefill-size", "-1"}
		}}},
	{name: "block_size", typ: Int, min: 1, tunable: true,
		doc:  "tokens per KV cache block (SGLang: page size)",
		vllm: spelling{flag: "--block-size"}, sglang: spelling{flag: "--page-size"}},
	{name: "cuda_graphs", typ: Bool, tunable: true,
		doc:  "run decode steps as captured CUDA graphs",
		vllm: spelling{off: []string{"--enforce-eager"}}, sglang: spelling{off: []string{"--disable-cuda-graph"}}},

	// Speculative decoding (docs/reference.md, "Speculative decoding"):
	// vLLM takes one JSON object, --speculative-config, which spec_method
	// writes with the method's draft tokens and draft model
	// (vllmSpecConfig); SGLang spells each part with a flag of its own,
	// the draft tokens as a chain (top-k 1, k steps, k+1 tokens verified).
	{name: "spec_method", typ: String, skip: "none", tunable: true,
		enum: specMethods,
		doc:  "speculative decoding: how draft tokens are proposed (none: off)",
		vllm: spelling{flag: "--speculative-config", custom: vllmSpecConfig, read: readVLLMSpecConfig},
		sglang: spelling{flag: "--speculative-algorithm", values: sglangSpecAlgorithms,
			read: func(val string, s Settings) error {
				for neutral, alg := range sglangSpecAlgorithms {
					if strings.EqualFold(strings.TrimSpace(val), alg) {
						s["spec_method"] = neutral
						return nil
					}
				}
				return fmt.Errorf("invalid choice: %q (servetune models %s)", val, strings.Join(slices.Sorted(maps.Values(sglangSpecAlgorithms)), ", "))
			}}},
	{name: "spec_tokens", typ: Int, min: 1, tunable: true,
		doc:  "speculative decoding: draft tokens proposed per sequence and step (k)",
		vllm: spelling{emits: []string{"--speculative-config"}, custom: func(any, Settings) []string { return nil }},
		sglang: spelling{flag: "--speculative-num-steps",
			emits: []string{"--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"},
			custom: func(v any, s Settings) []string {
				if m, _ := s.String("spec_method"); m == "" || m == "none" {
					return nil
				}
				k := v.(int)
				return []string{"--speculative-num-steps", strconv.Itoa(k), "--speculative-eagle-topk", "1",
					"--speculative-num-draft-tokens", strconv.Itoa(k + 1)}
			}}},
	{name: "spec_draft_model", typ: String, tunable: true,
		doc:  "speculative decoding: the draft model or draft head (EAGLE's weights)",
		vllm: spelling{emits: []string{"--speculative-config"}, custom: func(any, Settings) []string { return nil }},
		sglang: spelling{flag: "--speculative-draft-model-path", custom: func(v any, s Settings) []string {
			if m, _ := s.String("spec_method"); m == "" || m == "none" || v == "" {
				return nil
			}
			return []string{"--speculative-draft-model-path", v.(string)}
		}}},

	// The deployment's shape (docs/spec.md (`disaggregation`)): no
	// engine flag of their own. A disaggregated configuration
	// is split into prefill and decode engines (Parts), each with the other
	// settings and its role's own tensor_parallel, max_running_requests
	// and max_batched_tokens (roleSettings); the role flags below and the
	// study's router join them.
	{name: "disaggregated", typ: Bool, tunable: true,
		doc: "serve with separate prefill and decode engines behind a router (false: one aggregated engine)"},
	{name: "prefill_replicas", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: prefill engines"},
	{name: "decode_replicas", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: decode engines"},
	{name: "prefill_tensor_parallel", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: tensor parallel size of each prefill engine (default tensor_parallel)"},
	{name: "decode_tensor_parallel", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: tensor parallel size of each decode engine (default tensor_parallel)"},
	{name: "prefill_max_running_requests", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: max_running_requests of each prefill engine (default max_running_requests)"},
	{name: "decode_max_running_requests", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: max_running_requests of each decode engine (default max_running_requests)"},
	{name: "prefill_max_batched_tokens", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: max_batched_tokens of each prefill engine (default max_batched_tokens)"},
	{name: "decode_max_batched_tokens", typ: Int, min: 1, tunable: true,
		doc: "disaggregated: max_batched_tokens of each decode engine (default max_batched_tokens)"},

	// Server settings: read from command lines, never tuned.
	// The simulated engine takes either spelling with either engine's flags
	// (launchers start it with --model).
	{name: "model", typ: String, doc: "model id or path",
		vllm: spelling{flag: "--model", aliases: []string{"--model-path"}}, sglang: spelling{flag: "--model-path", aliases: []string{"--model"}}},
	{name: "served_model_name", typ: String, doc: "the model name the server answers to",
		vllm: spelling{flag: "--served-model-name"}, sglang: spelling{flag: "--served-model-name"}},
	{name: "host", typ: String, doc: "address the server binds",
		vllm: spelling{flag: "--host"}, sglang: spelling{flag: "--host"}},
	{name: "port", typ: Int, doc: "port the server listens on",
		vllm: spelling{flag: "--port"}, sglang: spelling{flag: "--port"}},
	{name: "api_key", typ: String, doc: "key clients must send as a Bearer token",
		vllm: spelling{flag: "--api-key"}, sglang: spelling{flag: "--api-key"}},
	{name: "max_prefill_tokens", typ: Int, doc: "SGLang's token budget of one prefill batch",
		sglang: spelling{flag: "--max-prefill-tokens"}},
	{name: "cuda_graph_max_bs", typ: Int, doc: "largest batch captured as a CUDA graph",
		sglang: spelling{flag: "--cuda-graph-max-bs"}},
	{name: "stream_interval", typ: Int, min: 1, doc: "tokens per streamed message after the first (the first token goes out at once)",
		vllm: spelling{flag: "--stream-interval"}, sglang: spelling{flag: "--stream-interval"}},
	{name: "mixed_chunk", typ: Bool, doc: "SGLang: prefill chunks and decodes in one batch",
		sglang: spelling{on: []string{"--enable-mixed-chunk"}}},
	{name: "enable_metrics", typ: Bool, doc: "SGLang: serve Prometheus metrics",
		sglang: spelling{on: []string{"--enable-metrics"}}},
	// SGLang's draft tree: top-k branches per draft step and the tokens
	// verified (spec_tokens renders the chain; a tree is read back).
	{name: "spec_eagle_topk", typ: Int, doc: "SGLang: draft tokens kept per draft step (a tree when above 1)",
		sglang: spelling{flag: "--speculative-eagle-topk"}},
	{name: "spec_verify_tokens", typ: Int, doc: "SGLang: draft tokens the target model verifies per sequence and step",
		sglang: spelling{flag: "--speculative-num-draft-tokens"}},
	{name: "async_scheduling", typ: Bool, doc: "schedule the next step while the GPU runs this one (vLLM's async scheduling, SGLang's overlap scheduler; on by default)",
		vllm:   spelling{on: []string{"--async-scheduling"}, off: []string{"--no-async-scheduling"}},
		sglang: spelling{off: []string{"--disable-overlap-schedule"}}},
	{name: "async_output_proc", typ: Bool, doc: "vLLM V0 (0.6 to 0.10): process a step's outputs while the GPU runs the next (on by default)",
		vllm: spelling{off: []string{"--disable-async-output-proc"}}},

	// Disaggregated prefill and decode (docs/reference.md (Disaggregated
	// prefill and decode)): vLLM's KV connector and its role, SGLang's
	// mode and transfer backend. Server settings: a deployment's parts
	// differ in them (RoleArgs writes them), a study does not tune them.
	{name: "kv_transfer_config", typ: String, doc: "vLLM: the KV connector and its role, as JSON (disaggregated prefill and decode)",
		vllm: spelling{flag: "--kv-transfer-config", read: readKVTransferConfig}},
	{name: "disaggregation_mode", typ: String, doc: "SGLang: this server's part in disaggregated prefill and decode (null, prefill, decode)",
		sglang: spelling{flag: "--disaggregation-mode", read: readDisaggregationMode}},
	{name: "disaggregation_transfer_backend", typ: String, doc: "SGLang: the KV transfer backend of disaggregated prefill and decode",
		sglang: spelling{flag: "--disaggregation-transfer-backend"}},

	// The simulated engine's own flags (both command lines; SimEnv holds the
	// environment variables that stand in for them).
	simFlag("sim_gpu", String, "--gpu", "catalog GPU the simulator models"),
	simFlag("sim_num_gpus", Int, "--num-gpus", "GPUs the simulated node has"),
	simFlag("sim_time_scale", Float, "--time-scale", "how many times faster than real time the simulated server runs"),
	simFlag("sim_load_time", Duration, "--sim-load-time", "simulated start-up time"),
	simFlag("sim_engine", String, "--engine", "the engine the simulator imitates"),
	simFlag("sim_model_config", String, "--model-config", "a Hugging Face config.json for a model outside the catalog"),
	simFlag("sim_calibration", String, "--calibration", "a calibration profile (servetune calibrate) for the simulator's constants"),
	// The draft's acceptance rate is the data's and the draft's, not an
	// engine flag: the simulator is told it.
	simFlag("sim_spec_acceptance", Float, "--spec-acceptance", "speculative decoding: the chance each draft token is accepted, in [0, 1)"),
	simFlag("sim_kv_link", String, "--kv-link", "disaggregated prefill and decode: the link the KV cache crosses (nvlink, pcie, infiniband, roce, ethernet)"),
	{name: "generation_config", typ: String, doc: "vLLM: where a request's default sampling comes from (auto: the model's generation_config.json; vllm: none; or a folder)",
		vllm: spelling{flag: "--generation-config"}},
	// Which sampler a vLLM build runs is its version's, not a flag of it:
	// the PyTorch-native sort (sim/constants.go, samplerSortMs) until the
	// FlashInfer and Triton samplers took over.
	{name: "sim_sampler_sort", typ: Bool, sim: true, doc: "vLLM: top-p/top-k sampling sorts the vocabulary (the PyTorch-native sampler of vLLM 0.15 and the releases around it)",
		vllm: spelling{on: []string{"--sampler-sort"}}},
	// Which scheduler a vLLM build runs is its version's too: V0's (vLLM
	// up to 0.10) ran a step of new prompts alone when chunked prefill
	// was off (sim/core.go, scheduleV0Prefills).
	{name: "sim_v0_scheduler", typ: Bool, sim: true, doc: "vLLM: V0's scheduler (vLLM before V1): without chunked prefill a step of new prompts runs no decodes",
		vllm: spelling{on: []string{"--v0-scheduler"}}},
	simFlag("sim_force_calibration", Bool, "--force-calibration", "use the calibration profile even on another GPU or engine"),
}

// ignoredSwitches and ignoredValued are flags of the engines that change
// nothing servetune models; command lines written for the real engines are
// read without complaint.
var (
	ignoredSwitches = []string{"--disable-log-requests", "--disable-log-stats", "--trust-remote-code",
		"--enable-log-requests", "--no-enable-log-requests", "--disable-custom-all-reduce",
		"--disable-frontend-multiprocessing", "--skip-tokenizer-init", "--disable-fastapi-docs"}
	ignoredValued = []string{"--dtype", "--seed", "--download-dir", "--tokenizer", "--revision",
		"--swap-space", "--uvicorn-log-level", "--load-format", "--distributed-executor-backend",
		"--max-log-len", "--tokenizer-mode", "--compilation-config", "-O",
		"--random-seed", "--log-level", "--attention-backend", "--schedule-policy", "--tool-call-parser",
		"--reasoning-parser", "--chat-template", "--max-num-partial-prefills", "--limit-mm-per-prompt",
		"--cuda-graph-bs"}
)

// secretSettings name settings whose values are credentials (never stored
// or printed).
var secretSettings = []string{"api_key"}

// ErrUnknownName is wrapped by errors about a setting servetune does not know.
var ErrUnknownName = errors.New("unknown setting")

// ErrBadValue is wrapped by errors about a value a setting does not take.
var ErrBadValue = errors.New("bad value")

// ErrBadArgs is wrapped by every command-line error of ParseCommand and
// ParseFlags.
var ErrBadArgs = errors.New("bad engine arguments")

func lookup(name string) (*setting, bool) {
	for i := range table {
		if table[i].name == name {
			return &table[i], true
		}
	}
	return nil, false
}

// tunable returns the tunable setting of a neutral name.
func tunable(name string) (*setting, bool) {
	k, ok := lookup(name)
	if !ok || !k.tunable {
		return nil, false
	}
	return k, true
}

// Names returns the tunable setting names in rendering order.
func Names() []string {
	var out []string
	for _, k := range table {
		if k.tunable {
			out = append(out, k.name)
		}
	}
	return out
}

// Knob describes one tunable setting, for validation and documentation.
type Knob struct {
	Name    string
	Type    Type
	Doc     string
	Range   string   // Int and Float: the allowed interval, e.g. "(0, 1]"
	Choices []string // String: the values it takes
	VLLM    []string // the flags vLLM spells it with
	SGLang  []string // the flags SGLang spells it with
}

// LookupKnob returns the tunable setting of a neutral name.
func LookupKnob(name string) (Knob, bool) {
	k, ok := tunable(name)
	if !ok {
		return Knob{}, false
	}
	kn := Knob{Name: k.name, Type: k.typ, Doc: k.doc, Choices: k.enum, VLLM: k.vllm.flags(), SGLang: k.sglang.flags()}
	if k.typ == Int || k.typ == Float {
		kn.Range = k.limits()
	}
	return kn, true
}

// flags lists every flag a spelling may write or read.
func (spell spelling) flags() []string {
	var out []string
	for _, f := range slices.Concat([]string{spell.flag}, spell.aliases, spell.on, spell.off, spell.emits) {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Spellings lists every flag an engine writes or reads the named setting
// with, each engine's in Engines' order (none for a name that is not a
// setting): what internal/archtest's rule flags-spelled-once keeps out of
// every other file.
func Spellings(name string) []string {
	k, ok := lookup(name)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range Engines {
		for _, f := range k.spell(e).flags() {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Flag returns the flag engine e writes the named setting with ("" when it
// has none of its own).
func Flag(e Engine, name string) string {
	k, ok := lookup(name)
	if !ok {
		return ""
	}
	spell := k.spell(e)
	if spell.flag != "" {
		return spell.flag
	}
	if len(spell.on) > 0 {
		return spell.on[0]
	}
	if len(spell.off) > 0 {
		return spell.off[0]
	}
	return ""
}

// UnknownName returns the error for a setting name that is not tunable,
// with a suggestion when a known name is close or when name is an engine's
// flag for one.
func UnknownName(name string) error {
	if k, e, flag := engineFlag(name); k != nil {
		return fmt.Errorf("%w %q (did you mean %s? %s is %s's flag)", ErrUnknownName, name, k.name, flag, e.Title())
	}
	if s := suggest(name); s != "" {
		return fmt.Errorf("%w %q (did you mean %s?)", ErrUnknownName, name, s)
	}
	return fmt.Errorf("%w %q", ErrUnknownName, name)
}

// TypeOf returns the value type of a tunable setting.
func TypeOf(name string) (Type, bool) {
	k, ok := tunable(name)
	if !ok {
		return 0, false
	}
	return k.typ, true
}

// Check converts v to the tunable setting's Go type (int, float64, string,
// bool; whole float64s count as ints, ints as floats) and checks it against
// the setting's range or choices. The error wraps ErrUnknownName or
// ErrBadValue.
func Check(name string, v any) (any, error) {
	k, ok := tunable(name)
	if !ok {
		return nil, UnknownName(name)
	}
	n, err := k.normalize(v)
	if err != nil {
		return nil, err
	}
	return n, k.validate(n)
}

// CheckSettings checks every setting of s (Check), in name order.
func CheckSettings(s Settings) error {
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if _, err := Check(name, s[name]); err != nil {
			return err
		}
	}
	return nil
}

func (k *setting) normalize(v any) (any, error) {
	switch k.typ {
	case Int:
		if n, ok := (Settings{"v": v}).Int("v"); ok {
			return n, nil
		}
	case Float:
		if f, ok := (Settings{"v": v}).Float("v"); ok {
			return f, nil
		}
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	if str, ok := v.(string); ok {
		return nil, fmt.Errorf("%w: %s must be %s, not %q", ErrBadValue, k.name, k.typ, str)
	}
	return nil, fmt.Errorf("%w: %s must be %s, not %v", ErrBadValue, k.name, k.typ, v)
}

// maxIntSetting bounds every integer setting: the engines read them as
// C ints, and a larger one is a typo.
const maxIntSetting = 1<<31 - 1

func (k *setting) validate(v any) error {
	switch k.typ {
	case Int, Float:
		f, _ := (Settings{"v": v}).Float("v")
		if k.typ == Int && f > maxIntSetting {
			return fmt.Errorf("%w: %s %v is above %d", ErrBadValue, k.name, formatValue(v), maxIntSetting)
		}
		low := f < k.min || (k.open && f == k.min)
		if low || (k.max != 0 && f > k.max) {
			return fmt.Errorf("%w: %s %v is outside %s", ErrBadValue, k.name, formatValue(v), k.limits())
		}
	case String:
		if len(k.enum) > 0 && !slices.Contains(k.enum, v.(string)) {
			return fmt.Errorf("%w: %s %q is not one of %v", ErrBadValue, k.name, v, k.enum)
		}
	}
	return nil
}

func (k *setting) limits() string {
	lo := "["
	if k.open {
		lo = "("
	}
	hi := "inf)"
	if k.max != 0 {
		hi = formatValue(k.max) + "]"
	}
	return lo + formatValue(k.min) + ", " + hi
}

// formatValue writes a setting's value as a flag value.
func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	}
	return fmt.Sprint(v)
}

// Off returns the flags engine e turns the named switch (a Bool setting)
// off with: vLLM's --no-async-scheduling for async_scheduling; nil when e
// has no such spelling.
func Off(e Engine, name string) []string {
	k, ok := lookup(name)
	if !ok || k.typ != Bool {
		return nil
	}
	return slices.Clone(k.spell(e).off)
}

// FormatValue writes a setting's value as it appears on a command line.
func FormatValue(v any) string { return formatValue(v) }

// Render returns engine e's flags for s, in table order. Settings at the
// engine default ("none" quantization, "auto" KV dtype, enabled features the
// engine enables anyway) render nothing. Every setting renders or the
// errors are joined; the flags of the good ones are still returned.
func Render(e Engine, s Settings) ([]string, error) {
	if !e.Valid() {
		return nil, fmt.Errorf("%w: engine %q (want vllm or sglang)", ErrBadValue, e)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if _, ok := tunable(name); !ok {
			errs = append(errs, UnknownName(name))
		}
	}
	var out []string
	for i := range table {
		k := &table[i]
		raw, ok := s[k.name]
		if !ok || !k.tunable {
			continue
		}
		v, err := k.normalize(raw)
		if err == nil {
			err = k.validate(v)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r := k.spell(e)
		switch {
		case r.custom != nil:
			out = append(out, r.custom(v, s)...)
		case k.typ == Bool:
			if v.(bool) {
				out = append(out, r.on...)
			} else {
				out = append(out, r.off...)
			}
		case k.typ == String && v == k.skip:
		case r.flag == "": // a shape setting, or one this engine has no flag for
		default:
			val := formatValue(v)
			if rn, ok := r.values[val]; ok {
				val = rn
			}
			out = append(out, r.flag, val)
		}
	}
	return out, errors.Join(errs...)
}

// engineFlag finds the tunable setting whose engine flag name is written:
// users who know one engine write max_num_seqs or mem-fraction-static.
func engineFlag(name string) (*setting, Engine, string) {
	norm := strings.ReplaceAll(strings.TrimLeft(name, "-"), "_", "-")
	for i := range table {
		k := &table[i]
		if !k.tunable {
			continue
		}
		for _, e := range Engines {
			for _, f := range k.spell(e).flags() {
				if strings.TrimLeft(f, "-") == norm {
					return k, e, f
				}
			}
		}
	}
	return nil, "", ""
}

// suggest returns the tunable name closest to name, or "" when none is close.
func suggest(name string) string {
	if k, ok := tunable(strings.TrimSuffix(name, "_size")); ok { // vLLM's tensor_parallel_size
		return k.name
	}
	best, bestD := "", 4
	for _, k := range table {
		if !k.tunable {
			continue
		}
		if d := editDistance(name, k.name); d < bestD {
			best, bestD = k.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// reading is what one flag of a command line means.
type reading struct {
	k       *setting
	engines map[Engine]bool // whose command line has the flag
	valued  bool            // takes a value
	set     *bool           // switch: the value it sets
	read    func(val string, s Settings) error
	ignored bool
}

// readings indexes every flag of the table by its name.
var readings = func() map[string]*reading {
	m := map[string]*reading{}
	add := func(flag string, e Engine, r reading) {
		if old, ok := m[flag]; ok {
			old.engines[e] = true
			return
		}
		r.engines = map[Engine]bool{e: true}
		m[flag] = &r
	}
	t, f := true, false
	for i := range table {
		k := &table[i]
		for _, e := range Engines {
			spell := k.spell(e)
			for _, name := range append([]string{spell.flag}, spell.aliases...) {
				if name != "" {
					add(name, e, reading{k: k, valued: true, read: spell.read})
				}
			}
			for _, name := range spell.on {
				add(name, e, reading{k: k, set: &t})
			}
			for _, name := range spell.off {
				add(name, e, reading{k: k, set: &f})
			}
		}
	}
	for _, name := range ignoredSwitches {
		for _, e := range Engines {
			add(name, e, reading{ignored: true})
		}
	}
	for _, name := range ignoredValued {
		for _, e := range Engines {
			add(name, e, reading{ignored: true, valued: true})
		}
	}
	return m
}()

// Command is an engine command line read back.
type Command struct {
	// Engine is the engine whose flags the line uses: the sim_engine
	// setting when given, else the engine of any flag only one engine has,
	// else "" (the line fits either).
	Engine   Engine
	Model    string   // the positional MODEL, --model or --model-path
	Settings Settings // every flag read, by neutral name (tunable, server and sim settings)
}

// ParseCommand reads an engine command line: vLLM's (`[serve] MODEL
// [flags]` or `--model MODEL [flags]`) or SGLang's (`--model-path MODEL
// [flags]`), with the simulated engine's flags. env supplies the
// simulator's environment variables (SimEnv) for sim settings the line
// does not give; nil for none. Unknown flags and flags of both engines on
// one line are rejected, as the engines' own argument parsers would.
func ParseCommand(args []string, env func(string) string) (Command, error) {
	var c Command
	s, positional, saw, err := parseFlags(args)
	if err != nil {
		return c, err
	}
	if len(positional) > 0 && positional[0] == "serve" { // `vllm serve MODEL`
		positional = positional[1:]
	}
	if len(positional) > 1 {
		return c, fmt.Errorf("%w: unrecognized arguments: %s", ErrBadArgs, strings.Join(positional[1:], " "))
	}
	model, _ := s.String("model")
	delete(s, "model")
	if len(positional) == 1 {
		if model != "" && model != positional[0] {
			return c, fmt.Errorf("%w: model given twice (%q and %q)", ErrBadArgs, positional[0], model)
		}
		model = positional[0]
	}
	if model == "" {
		return c, fmt.Errorf("%w: no model (give MODEL, --model or --model-path)", ErrBadArgs)
	}
	if env != nil {
		for _, v := range simEnv {
			if _, ok := s[v.setting]; ok {
				continue
			}
			if raw := env(v.name); raw != "" {
				k, _ := lookup(v.setting)
				val, err := readValue(k, raw)
				if err != nil {
					return c, fmt.Errorf("%w: %s: %v", ErrBadArgs, v.name, err)
				}
				s[v.setting] = val
			}
		}
	}
	c.Model, c.Settings = model, s
	if name, ok := s.String("sim_engine"); ok {
		e, err := Parse(name)
		if err != nil {
			return c, fmt.Errorf("%w: %s %q: want vllm or sglang", ErrBadArgs, Flag(VLLM, "sim_engine"), name)
		}
		c.Engine = e
	} else if saw[SGLang] != nil && saw[VLLM] == nil {
		c.Engine = SGLang
	} else if saw[VLLM] != nil && saw[SGLang] == nil {
		c.Engine = VLLM
	}
	switch {
	case saw[VLLM] != nil && saw[SGLang] != nil:
		return c, fmt.Errorf("%w: %s is %s's flag and %s is %s's: one command line is one engine's", ErrBadArgs,
			saw[VLLM].flag, VLLM.Title(), saw[SGLang].flag, SGLang.Title())
	case c.Engine == VLLM && saw[SGLang] != nil:
		return c, saw[SGLang].notOn(VLLM)
	case c.Engine == SGLang && saw[VLLM] != nil:
		return c, saw[VLLM].notOn(SGLang)
	}
	return c, nil
}

// ownFlag is a flag only one engine has, as a command line spelled it,
// and the setting it reads.
type ownFlag struct {
	flag, setting string
	engine        Engine
}

// notOn is the error of f on engine e's command line, naming e's own
// spelling of the setting where e has one.
func (f *ownFlag) notOn(e Engine) error {
	if spell := Flag(e, f.setting); spell != "" {
		return fmt.Errorf("%w: %s is %s's flag, not %s's (%s's is %s)", ErrBadArgs, f.flag, f.engine.Title(), e.Title(), e.Title(), spell)
	}
	return fmt.Errorf("%w: %s is %s's flag; %s has none for it", ErrBadArgs, f.flag, f.engine.Title(), e.Title())
}

// ParseFlags reads flags of engine e (no model): a space's extra_args, for
// instance. Flags only the other engine has are rejected.
func ParseFlags(e Engine, args []string) (Settings, error) {
	s, positional, saw, err := parseFlags(args)
	if err != nil {
		return nil, err
	}
	if len(positional) > 0 {
		return nil, fmt.Errorf("%w: unrecognized arguments: %s", ErrBadArgs, strings.Join(positional, " "))
	}
	for _, other := range Engines {
		if other != e && saw[other] != nil {
			return nil, saw[other].notOn(e)
		}
	}
	return s, nil
}

// parseFlags reads args into settings; saw holds, by engine, the first
// of its own flags (flags the other engine lacks) that appeared.
func parseFlags(args []string) (Settings, []string, map[Engine]*ownFlag, error) {
	s := Settings{}
	var positional []string
	saw := map[Engine]*ownFlag{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		r, ok := readings[name]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: unrecognized arguments: %s", ErrBadArgs, name)
		}
		if r.valued && !hasVal {
			if i+1 >= len(args) {
				return nil, nil, nil, fmt.Errorf("%w: argument %s: expected one argument", ErrBadArgs, name)
			}
			i++
			val = args[i]
		} else if !r.valued && hasVal {
			return nil, nil, nil, fmt.Errorf("%w: argument %s: ignored explicit argument %q", ErrBadArgs, name, val)
		}
		if len(r.engines) == 1 {
			for e := range r.engines {
				if saw[e] == nil {
					saw[e] = &ownFlag{flag: name, setting: r.k.name, engine: e}
				}
			}
		}
		switch {
		case r.ignored:
		case r.set != nil:
			s[r.k.name] = *r.set
		case r.read != nil:
			if err := r.read(val, s); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: argument %s: %v", ErrBadArgs, name, err)
			}
		default:
			v, err := readValue(r.k, val)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%w: argument %s: %v", ErrBadArgs, name, err)
			}
			s[r.k.name] = v
		}
	}
	if err := dpAttentionTP(s); err != nil {
		return nil, nil, nil, err
	}
	return s, positional, saw, nil
}

// dpAttentionTP turns SGLang's --tp-size under --enable-dp-attention (all
// the server's GPUs) into tensor_parallel's meaning (the GPUs of one
// attention rank): --tp-size 8 --dp-size 8 is tensor_parallel 1 ×
// data_parallel 8.
func dpAttentionTP(s Settings) error {
	if on, _ := s.Bool("dp_attention"); !on {
		return nil
	}
	tp, okTP := s.Int("tensor_parallel")
	dp, okDP := s.Int("data_parallel")
	if !okTP || !okDP || dp <= 1 {
		return nil
	}
	if tp%dp != 0 {
		return fmt.Errorf("%w: argument %s: %d does not divide %s %d (with %s)", ErrBadArgs,
			Flag(SGLang, "data_parallel"), dp, Flag(SGLang, "tensor_parallel"), tp, Flag(SGLang, "dp_attention"))
	}
	s["tensor_parallel"] = tp / dp
	return nil
}

// readValue converts a flag's text to the setting's type.
func readValue(k *setting, val string) (any, error) {
	t := strings.TrimSpace(val)
	switch k.typ {
	case Int:
		n, err := strconv.Atoi(t)
		if err != nil {
			return nil, fmt.Errorf("invalid int value: %q", val)
		}
		return n, nil
	case Float:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || f != f {
			return nil, fmt.Errorf("invalid float value: %q", val)
		}
		return f, nil
	case Duration:
		if d, err := time.ParseDuration(t); err == nil && d >= 0 {
			return d, nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && f >= 0 && f < 1e9 {
			return time.Duration(f * float64(time.Second)), nil
		}
		return nil, fmt.Errorf("invalid duration %q (e.g. 1s, 500ms, 2.5)", val)
	case Bool:
		b, err := strconv.ParseBool(t)
		if err != nil {
			return nil, fmt.Errorf("invalid bool value: %q", val)
		}
		return b, nil
	}
	return val, nil
}

// IsSecretFlag reports whether flag (of either engine) carries a credential
// in its value.
func IsSecretFlag(flag string) bool {
	name, _, _ := strings.Cut(flag, "=")
	r, ok := readings[name]
	return ok && r.k != nil && slices.Contains(secretSettings, r.k.name)
}

// specMethods are spec_method's values.
var specMethods = []string{"none", "eagle", "eagle3", "mtp", "ngram", "draft_model"}

// SpeculativeMethods are the speculative decoding methods servetune
// models (spec_method's values but none).
var SpeculativeMethods = specMethods[1:]

// NeedsDraft says whether speculative method m serves a draft head or
// model the serve command must name (spec_draft_model).
func NeedsDraft(m string) bool { return m == "eagle" || m == "eagle3" || m == "draft_model" }

// sglangSpecAlgorithms are SGLang's --speculative-algorithm values by
// neutral spec_method: MTP heads run as NEXTN, a draft model as
// STANDALONE.
var sglangSpecAlgorithms = map[string]string{
	"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "ngram": "NGRAM", "draft_model": "STANDALONE",
}

// vllmSpec is the part of vLLM's --speculative-config servetune writes
// and reads; other keys are read and ignored.
type vllmSpec struct {
	Method string `json:"method,omitempty"`
	Model  string `json:"model,omitempty"`
	Tokens int    `json:"num_speculative_tokens,omitempty"`
}

// vllmSpecConfig renders spec_method, spec_tokens and spec_draft_model as
// vLLM's one JSON flag.
func vllmSpecConfig(v any, s Settings) []string {
	m, _ := v.(string)
	if m == "" || m == "none" {
		return nil
	}
	c := vllmSpec{Method: m}
	c.Model, _ = s.String("spec_draft_model")
	c.Tokens, _ = s.Int("spec_tokens")
	b, err := json.Marshal(c)
	if err != nil { // a struct of strings and an int always encodes
		panic(err)
	}
	return []string{"--speculative-config", string(b)}
}

// readVLLMSpecConfig reads --speculative-config. vLLM's MTP methods
// (deepseek_mtp, qwen3_next_mtp, ...) read as mtp; without a method,
// vLLM takes an EAGLE head from the draft's name, else a draft model.
func readVLLMSpecConfig(val string, s Settings) error {
	var raw map[string]any
	if err := json.Unmarshal([]byte(val), &raw); err != nil {
		return fmt.Errorf("invalid JSON object: %v", err)
	}
	var c vllmSpec
	for key, dst := range map[string]*string{"method": &c.Method, "model": &c.Model} {
		if x, ok := raw[key]; ok && x != nil {
			str, ok := x.(string)
			if !ok {
				return fmt.Errorf("%s: want a string, not %v", key, x)
			}
			*dst = str
		}
	}
	if x, ok := raw["num_speculative_tokens"]; ok && x != nil {
		f, ok := x.(float64)
		if !ok || f != float64(int(f)) || f < 1 {
			return fmt.Errorf("num_speculative_tokens: want a positive integer, not %v", x)
		}
		c.Tokens = int(f)
	}
	m := strings.ToLower(c.Method)
	switch {
	case m == "" && c.Model == "":
		return errors.New("neither method nor model given")
	case m == "" && strings.Contains(strings.ToLower(c.Model), "eagle3"):
		m = "eagle3"
	case m == "" && strings.Contains(strings.ToLower(c.Model), "eagle"):
		m = "eagle"
	case m == "":
		m = "draft_model"
	case m == "mtp" || strings.HasSuffix(m, "_mtp"):
		m = "mtp"
	}
	if !slices.Contains(specMethods, m) || m == "none" {
		return fmt.Errorf("method %q: servetune models eagle, eagle3, mtp, ngram and draft_model", c.Method)
	}
	s["spec_method"] = m
	if c.Tokens > 0 {
		s["spec_tokens"] = c.Tokens
	}
	if c.Model != "" {
		s["spec_draft_model"] = c.Model
	}
	return nil
}

// FlagDoc is one flag of an engine's command line, for help texts.
type FlagDoc struct {
	Flag string
	Doc  string
	Sim  bool // the simulated engine's own flag
}

// FlagDocs lists e's flags in the table's order (tunable settings, server
// settings, the simulated engine's own), each by its first spelling: the
// one list `sim run --help` and `sim serve --help` print.
func FlagDocs(e Engine) []FlagDoc {
	var out []FlagDoc
	for _, k := range table {
		spell := k.spell(e)
		f, doc := spell.flag, k.doc
		switch {
		case f != "":
		case len(spell.on) > 0:
			f = spell.on[0]
		case len(spell.off) > 0:
			f, doc = spell.off[0], "turns off: "+doc
		case len(spell.emits) > 0:
			continue // written by another setting's flag
		default:
			continue
		}
		out = append(out, FlagDoc{Flag: f, Doc: doc, Sim: k.sim})
	}
	return out
}

package space

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// valueType is the Go type a setting's values have.
type valueType int

const (
	intValue valueType = iota
	floatValue
	stringValue
	boolValue
)

func (t valueType) String() string {
	return [...]string{"an integer", "a number", "a string", "true or false"}[t]
}

// rule says how one engine spells one setting.
type rule struct {
	flag   string            // flag followed by the value
	values map[string]string // value renames for string settings
	on     []string          // bool settings: argv when true
	off    []string          // bool settings: argv when false
	// custom renders settings whose flags depend on other settings; emits
	// lists the flags it may write (for "did you mean" on engine flag names).
	custom func(v any, s Settings) []string
	emits  []string
}

// knob is one tunable setting: its neutral name, the values it accepts, and
// its flags in each engine.
type knob struct {
	name   string
	typ    valueType
	min    float64  // int and float: smallest value allowed (exclusive when open)
	max    float64  // int and float: largest value allowed, 0 = none
	open   bool     // float: min is exclusive
	enum   []string // string: allowed values
	skip   string   // string: value that renders no flag (the engine default)
	vllm   rule
	sglang rule
}

// knobs is the one table of settings and flags (reference/engines.md). Render
// emits flags in this order. Names drift between engine releases: change
// them here only.
//
// gpu_memory_fraction renders the same number to both engines but the
// quantity differs: vLLM's --gpu-memory-utilization is the share of the GPU's
// TOTAL memory the engine may use for everything (weights, activations, CUDA
// graphs, non-torch memory and KV cache), while SGLang's --mem-fraction-static
// is the share for weights plus the KV pool only; activations and graphs must
// fit in the remaining 1-f. The same value therefore gives SGLang the larger
// KV pool (typical SGLang values are a few points lower than vLLM's). The
// simulator's memory model applies each engine's own accounting, so the tuner
// compares like with like.
var knobs = []knob{
	{name: "tensor_parallel", typ: intValue, min: 1,
		vllm: rule{flag: "--tensor-parallel-size"}, sglang: rule{flag: "--tp-size"}},
	{name: "pipeline_parallel", typ: intValue, min: 1,
		vllm: rule{flag: "--pipeline-parallel-size"}, sglang: rule{flag: "--pp-size"}},
	{name: "data_parallel", typ: intValue, min: 1,
		vllm: rule{flag: "--data-parallel-size"}, sglang: rule{flag: "--dp-size"}},
	{name: "max_running_requests", typ: intValue, min: 1,
		vllm: rule{flag: "--max-num-seqs"}, sglang: rule{flag: "--max-running-requests"}},
	// vLLM's per-step token budget. SGLang has two knobs: the prefill chunk
	// size and the prefill batch budget; both take the value, except that
	// with chunked_prefill false the chunk size is chunked_prefill's -1.
	{name: "max_batched_tokens", typ: intValue, min: 1,
		vllm: rule{flag: "--max-num-batched-tokens"},
		sglang: rule{emits: []string{"--chunked-prefill-size", "--max-prefill-tokens"}, custom: func(v any, s Settings) []string {
			n := formatValue(v)
			if on, ok := s.Bool("chunked_prefill"); ok && !on {
				return []string{"--max-prefill-tokens", n}
			}
			return []string{"--chunked-prefill-size", n, "--max-prefill-tokens", n}
		}}},
	{name: "gpu_memory_fraction", typ: floatValue, min: 0, open: true, max: 1,
		vllm: rule{flag: "--gpu-memory-utilization"}, sglang: rule{flag: "--mem-fraction-static"}},
	{name: "max_model_len", typ: intValue, min: 1,
		vllm: rule{flag: "--max-model-len"}, sglang: rule{flag: "--context-length"}},
	{name: "quantization", typ: stringValue, skip: "none",
		enum: []string{"none", "fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "int4", "int8", "bitsandbytes", "compressed-tensors", "marlin", "modelopt"},
		vllm: rule{flag: "--quantization"}, sglang: rule{flag: "--quantization"}},
	// SGLang has no plain "fp8" KV dtype; fp8_e4m3 is what vLLM's fp8 means.
	{name: "kv_cache_dtype", typ: stringValue, skip: "auto",
		enum: []string{"auto", "fp8", "fp8_e4m3", "fp8_e5m2"},
		vllm: rule{flag: "--kv-cache-dtype"}, sglang: rule{flag: "--kv-cache-dtype", values: map[string]string{"fp8": "fp8_e4m3"}}},
	{name: "prefix_caching", typ: boolValue,
		vllm:   rule{on: []string{"--enable-prefix-caching"}, off: []string{"--no-enable-prefix-caching"}},
		sglang: rule{off: []string{"--disable-radix-cache"}}},
	{name: "chunked_prefill", typ: boolValue,
		vllm: rule{on: []string{"--enable-chunked-prefill"}, off: []string{"--no-enable-chunked-prefill"}},
		sglang: rule{emits: []string{"--chunked-prefill-size"}, custom: func(v any, _ Settings) []string {
			if on, _ := v.(bool); on {
				return nil
			}
			return []string{"--chunked-prefill-size", "-1"}
		}}},
	{name: "block_size", typ: intValue, min: 1,
		vllm: rule{flag: "--block-size"}, sglang: rule{flag: "--page-size"}},
	{name: "cuda_graphs", typ: boolValue,
		vllm: rule{off: []string{"--enforce-eager"}}, sglang: rule{off: []string{"--disable-cuda-graph"}}},
}

// lookup returns the knob of a neutral name.
func lookup(name string) (*knob, bool) {
	for i := range knobs {
		if knobs[i].name == name {
			return &knobs[i], true
		}
	}
	return nil, false
}

// Names returns the neutral setting names in rendering order.
func Names() []string {
	out := make([]string, len(knobs))
	for i, k := range knobs {
		out[i] = k.name
	}
	return out
}

// ErrUnknownName is wrapped by errors about a setting servetune does not know.
var ErrUnknownName = errors.New("unknown setting")

// ErrBadValue is wrapped by errors about a value a setting does not take.
var ErrBadValue = errors.New("bad value")

// unknownName returns the error for an unknown setting, with a suggestion
// when a known name is close.
func unknownName(name string) error {
	if k, e, flag := engineFlag(name); k != nil {
		engine := map[Engine]string{VLLM: "vLLM", SGLang: "SGLang"}[e]
		return fmt.Errorf("%w %q (did you mean %s? %s is %s's flag)", ErrUnknownName, name, k.name, flag, engine)
	}
	if s := suggest(name); s != "" {
		return fmt.Errorf("%w %q (did you mean %s?)", ErrUnknownName, name, s)
	}
	return fmt.Errorf("%w %q", ErrUnknownName, name)
}

// normalize converts v to the knob's Go type (int, float64, string, bool),
// accepting float64 whole numbers for ints (JSON) and ints for floats.
func (k *knob) normalize(v any) (any, error) {
	switch k.typ {
	case intValue:
		if n, ok := (Settings{"v": v}).Int("v"); ok {
			return n, nil
		}
	case floatValue:
		if f, ok := (Settings{"v": v}).Float("v"); ok {
			return f, nil
		}
	case stringValue:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case boolValue:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	if str, ok := v.(string); ok {
		return nil, fmt.Errorf("%w: %s must be %s, not %q", ErrBadValue, k.name, k.typ, str)
	}
	return nil, fmt.Errorf("%w: %s must be %s, not %v", ErrBadValue, k.name, k.typ, v)
}

// validate checks a normalized value against the knob's limits.
func (k *knob) validate(v any) error {
	switch k.typ {
	case intValue, floatValue:
		f, _ := (Settings{"v": v}).Float("v")
		low := f < k.min || (k.open && f == k.min)
		if low || (k.max != 0 && f > k.max) {
			return fmt.Errorf("%w: %s %v is outside %s", ErrBadValue, k.name, formatValue(v), k.limits())
		}
	case stringValue:
		for _, e := range k.enum {
			if v == e {
				return nil
			}
		}
		return fmt.Errorf("%w: %s %q is not one of %v", ErrBadValue, k.name, v, k.enum)
	}
	return nil
}

// limits describes the allowed range for messages.
func (k *knob) limits() string {
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

// check normalizes and validates a value of the named setting.
func check(name string, v any) (*knob, any, error) {
	k, ok := lookup(name)
	if !ok {
		return nil, nil, unknownName(name)
	}
	n, err := k.normalize(v)
	if err != nil {
		return k, nil, err
	}
	return k, n, k.validate(n)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	}
	return fmt.Sprint(v)
}

// Render returns the engine's flags for s, in the order of Names. Settings at
// the engine default ("none" quantization, "auto" KV dtype, enabled features
// the engine enables anyway) render nothing. Every setting renders or the
// errors are joined; the flags of the good ones are still returned.
func Render(engine Engine, s Settings) ([]string, error) {
	if engine != VLLM && engine != SGLang {
		return nil, fmt.Errorf("%w: engine %q (want vllm or sglang)", ErrBadValue, engine)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if _, ok := lookup(name); !ok {
			errs = append(errs, unknownName(name))
		}
	}
	var out []string
	for i := range knobs {
		k := &knobs[i]
		raw, ok := s[k.name]
		if !ok {
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
		r := k.vllm
		if engine == SGLang {
			r = k.sglang
		}
		switch {
		case r.custom != nil:
			out = append(out, r.custom(v, s)...)
		case k.typ == boolValue:
			if v.(bool) {
				out = append(out, r.on...)
			} else {
				out = append(out, r.off...)
			}
		case k.typ == stringValue && v == k.skip:
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

// ServeCommand returns the full argv that starts engine serving model with
// settings s, then extra: `vllm serve MODEL ...` or `python3 -m
// sglang.launch_server --model-path MODEL ...`. Settings Render rejects are
// left out (validate with Render or Check first); an unknown engine gives nil.
func ServeCommand(engine Engine, model string, s Settings, extra []string) []string {
	var argv []string
	switch engine {
	case VLLM:
		argv = []string{"vllm", "serve", model}
	case SGLang:
		argv = []string{"python3", "-m", "sglang.launch_server", "--model-path", model}
	default:
		return nil
	}
	flags, _ := Render(engine, s)
	argv = append(argv, flags...)
	return append(argv, extra...)
}

// engineFlag finds the knob whose engine flag name is written: users who know
// one engine write max_num_seqs or mem-fraction-static.
func engineFlag(name string) (*knob, Engine, string) {
	norm := strings.ReplaceAll(strings.TrimLeft(name, "-"), "_", "-")
	for i := range knobs {
		k := &knobs[i]
		for _, c := range []struct {
			e Engine
			r rule
		}{{VLLM, k.vllm}, {SGLang, k.sglang}} {
			for _, f := range slices.Concat([]string{c.r.flag}, c.r.on, c.r.off, c.r.emits) {
				if f != "" && strings.TrimLeft(f, "-") == norm {
					return k, c.e, f
				}
			}
		}
	}
	return nil, "", ""
}

// suggest returns the known name closest to name, or "" when none is close.
func suggest(name string) string {
	best, bestD := "", 4
	for _, k := range knobs {
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

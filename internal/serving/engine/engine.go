package engine

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Engine names an inference engine servetune knows the vocabulary of.
type Engine string

// The engines.
const (
	VLLM   Engine = "vllm"
	SGLang Engine = "sglang"
)

// Engines lists the engines in a stable order.
var Engines = []Engine{VLLM, SGLang}

// Parse reads an engine name (case-insensitive).
func Parse(s string) (Engine, error) {
	switch e := Engine(strings.ToLower(strings.TrimSpace(s))); e {
	case VLLM, SGLang:
		return e, nil
	}
	return "", fmt.Errorf("%w: engine %q (want vllm or sglang)", ErrBadValue, s)
}

// Valid reports whether e is one of Engines.
func (e Engine) Valid() bool { return e == VLLM || e == SGLang }

// Title is the engine's name as its project writes it.
func (e Engine) Title() string {
	switch e {
	case VLLM:
		return "vLLM"
	case SGLang:
		return "SGLang"
	}
	return string(e)
}

// Settings are one engine configuration by neutral setting name (see
// Names). Values are int, float64, string or bool. After a JSON round trip
// numbers come back as float64; the accessors accept both.
type Settings map[string]any

// Int returns the named setting as an int. A float64 holding a whole number
// (as JSON decoding yields) counts as an int. ok is false when the setting is
// missing or not an integer.
func (s Settings) Int(name string) (v int, ok bool) {
	switch x := s[name].(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int(x), true
		}
	}
	return 0, false
}

// Float returns the named setting as a float64; ints convert (Number).
func (s Settings) Float(name string) (v float64, ok bool) { return Number(s[name]) }

// Number reads a setting's value as a float64: a float, or an int that
// converts; ok is false for any other value.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// String returns the named setting when it is a string.
func (s Settings) String(name string) (v string, ok bool) {
	x, ok := s[name].(string)
	return x, ok
}

// Bool returns the named setting when it is a bool.
func (s Settings) Bool(name string) (v bool, ok bool) {
	x, ok := s[name].(bool)
	return x, ok
}

// Clone returns a copy of s that shares nothing with it.
func (s Settings) Clone() Settings {
	c := make(Settings, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// parallelNames are the settings whose product is a configuration's GPU
// count.
var parallelNames = []string{"tensor_parallel", "pipeline_parallel", "data_parallel"}

// GPUs returns how many GPUs a configuration needs: tensor_parallel ×
// pipeline_parallel × data_parallel (each default 1); a disaggregated
// one's, the sum over its parts (Parts).
func (s Settings) GPUs() int {
	if parts := s.Parts(); parts != nil {
		n := 0
		for _, p := range parts {
			n += p.GPUs()
		}
		return n
	}
	n := 1
	for _, name := range parallelNames {
		if v, ok := s.Int(name); ok && v > 0 {
			n *= v
		}
	}
	return n
}

// ParallelNames returns the settings whose product is the GPU count.
func ParallelNames() []string { return append([]string(nil), parallelNames...) }

// Line writes the settings as k=v in name order, space separated: how
// every command and page shows a configuration.
func (s Settings) Line() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + formatValue(s[k])
	}
	return strings.Join(parts, " ")
}

// Key is a canonical text of s, numbers normalised (JSON gives float64
// where YAML gave int): equal configurations have equal keys. An
// aggregated configuration's shape settings (prefill_replicas and the
// like) configure nothing, so they are left out: two aggregated
// configurations that differ only there are one configuration, measured
// once.
func (s Settings) Key() string {
	inactive := !s.Disaggregated()
	keys := make([]string, 0, len(s))
	for k := range s {
		if inactive && k != "disaggregated" && slices.Contains(shapeNames, k) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := make([]byte, 0, 128)
	for _, k := range keys {
		v := s[k]
		if f, ok := s.Float(k); ok {
			v = f
		}
		b = fmt.Appendf(b, "%s=%v;", k, v)
	}
	return string(b)
}

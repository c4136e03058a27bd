package space

import (
	"fmt"
	"math"
)

// Engine names an inference engine whose flags Render knows.
type Engine string

// Engines servetune renders flags for.
const (
	VLLM   Engine = "vllm"
	SGLang Engine = "sglang"
)

// Settings are one trial's launch settings by neutral name (see Names).
// Values are int, float64, string or bool. After a JSON round trip numbers
// come back as float64; the accessors accept both.
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

// Float returns the named setting as a float64; ints convert.
func (s Settings) Float(name string) (v float64, ok bool) {
	switch x := s[name].(type) {
	case float64:
		return x, true
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

// Kind is the type of a search parameter.
type Kind int

// Parameter kinds. A log-int parameter is KindInt with Log set.
const (
	KindInt         Kind = iota // integer range [Low, High], Step (default 1), optionally Log
	KindFloat                   // real range [Low, High], optional Step, optionally Log
	KindCategorical             // one of Choices (scalars of any type)
	KindBool                    // false or true
)

func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindCategorical:
		return "categorical"
	case KindBool:
		return "bool"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Param is one dimension of the search space.
type Param struct {
	Name    string  // neutral name, one of Names
	Kind    Kind    // what values it takes
	Low     float64 // KindInt, KindFloat: lower bound, inclusive
	High    float64 // KindInt, KindFloat: upper bound, inclusive
	Log     bool    // KindInt, KindFloat: sample on a log scale
	Step    float64 // KindInt: step (0 means 1); KindFloat: 0 means continuous
	Choices []any   // KindCategorical: the choices in spec order; KindBool: false, true
	Line    int     // line of the parameter in the spec file, 0 when unknown
}

// Space is a search space: parameters in spec order plus raw extra flags
// appended to every trial's command line, and user constraints.
type Space struct {
	Params      []Param
	Extra       []string
	Constraints []Constraint
}

// Param returns the parameter with the given name.
func (sp Space) Param(name string) (Param, bool) {
	for _, p := range sp.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

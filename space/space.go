package space

import (
	"fmt"
	"strings"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Settings are one trial's launch settings by neutral name; the engine
// package owns their vocabulary.
type Settings = engine.Settings

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
func (space Space) Param(name string) (Param, bool) {
	for _, p := range space.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Holds reports whether every parameter of the space has a value in s that
// the parameter can take (a stored trial fits a space edited since).
func (space Space) Holds(s Settings) bool {
	for _, p := range space.Params {
		v, ok := s[p.Name]
		if !ok || !p.holds(v) {
			return false
		}
	}
	return true
}

func (p Param) holds(v any) bool {
	switch p.Kind {
	case KindInt, KindFloat:
		f, ok := (Settings{"v": v}).Float("v")
		return ok && f >= p.Low && f <= p.High
	case KindBool:
		_, ok := v.(bool)
		return ok
	}
	for _, c := range p.Choices {
		if fmt.Sprint(c) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}

// Describe is the values the parameter searches, as a reader would write
// them: "2048, 4096 or 8192" for choices, "16 to 512" for a range.
func (p Param) Describe() string {
	switch p.Kind {
	case KindInt, KindFloat:
		return engine.FormatValue(p.Low) + " to " + engine.FormatValue(p.High)
	}
	vals := make([]string, len(p.Choices))
	for i, c := range p.Choices {
		vals[i] = engine.FormatValue(c)
	}
	if len(vals) < 2 {
		return strings.Join(vals, "")
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " or " + vals[len(vals)-1]
}

// Searches reports whether the parameter takes more than one value.
func (p Param) Searches() bool {
	switch p.Kind {
	case KindInt, KindFloat:
		return p.High > p.Low
	}
	return len(p.Choices) > 1
}

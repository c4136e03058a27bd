package space

import (
	"fmt"
	"math"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
)

// Parse reads a space from the value of a study spec's `space:` key, a
// mapping from neutral setting names to their values:
//
//	tensor_parallel: [1, 2, 4]                      # a list: categorical
//	max_running_requests: {int: [16, 1024], log: true}
//	gpu_memory_fraction: {float: [0.80, 0.95]}      # optional log, step
//	prefix_caching: {bool: true}                    # or [true, false]
//	kv_cache_dtype: fp8                             # a scalar: fixed value
//	extra_args: ["--no-enable-log-requests"]          # appended to every trial
//	constraints: ["max_batched_tokens >= max_running_requests"]
//
// Errors are *yamlpos.Error values with file, line and field "space.NAME".
func Parse(node *yaml.Node, file string) (Space, error) {
	p := parser{file: file}
	return p.space(node)
}

type parser struct {
	file string
}

// MaxChoices bounds a listed parameter's values: a list is for choices;
// a long run of numbers is a range.
const MaxChoices = 10_000

func (p parser) errf(n *yaml.Node, field string, format string, a ...any) error {
	return p.wrap(n, field, fmt.Errorf(format, a...))
}

func (p parser) wrap(n *yaml.Node, field string, err error) error {
	e := &yamlpos.Error{File: p.file, Field: field, Err: err}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

func (p parser) space(node *yaml.Node) (Space, error) {
	var searchSpace Space
	if node == nil {
		return searchSpace, p.errf(nil, "space", "missing")
	}
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	if node.Kind != yaml.MappingNode {
		return searchSpace, p.errf(node, "space", "must be a mapping of setting names to values")
	}
	if len(node.Content) == 0 {
		return searchSpace, p.errf(node, "space", "is empty")
	}
	seen := map[string]bool{}
	var constraintNodes []*yaml.Node
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		name := key.Value
		field := "space." + name
		if key.Kind != yaml.ScalarNode {
			return searchSpace, p.errf(key, "space", "keys must be setting names")
		}
		if seen[name] {
			return searchSpace, p.errf(key, field, "given twice")
		}
		seen[name] = true
		switch name {
		case "extra_args":
			extra, err := p.strings(val, field)
			if err != nil {
				return searchSpace, err
			}
			searchSpace.Extra = extra
			continue
		case "constraints":
			if val.Kind != yaml.SequenceNode {
				return searchSpace, p.errf(val, field, "must be a list of expressions")
			}
			constraintNodes = val.Content
			continue
		}
		k, ok := lookup(name)
		if !ok {
			return searchSpace, p.wrap(key, "space", engine.UnknownName(name))
		}
		prm, err := p.param(k, val, field)
		if err != nil {
			return searchSpace, err
		}
		prm.Line = key.Line
		searchSpace.Params = append(searchSpace.Params, prm)
	}
	for _, n := range constraintNodes {
		if n.Kind != yaml.ScalarNode {
			return searchSpace, p.errf(n, "space.constraints", "each constraint must be a string")
		}
		c, err := ParseConstraint(n.Value)
		if err != nil {
			return searchSpace, p.wrap(n, "space.constraints", err)
		}
		if err := searchSpace.constrains(c); err != nil {
			return searchSpace, p.wrap(n, "space.constraints", err)
		}
		searchSpace.Constraints = append(searchSpace.Constraints, c)
	}
	return searchSpace, nil
}

func (p parser) strings(n *yaml.Node, field string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, field, "must be a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode || c.Tag != "!!str" {
			return nil, p.errf(c, field, "must be a list of strings")
		}
		out = append(out, c.Value)
	}
	return out, nil
}

// scalar decodes a scalar node into int, float64, string or bool.
func (p parser) scalar(n *yaml.Node, field string) (any, error) {
	if n.Kind != yaml.ScalarNode {
		return nil, p.errf(n, field, "must be a single value")
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, p.wrap(n, field, err)
	}
	switch x := v.(type) {
	case int, string, bool:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, p.errf(n, field, "%v is not a finite number", n.Value)
		}
		return x, nil
	case nil:
		return nil, p.errf(n, field, "has no value")
	}
	return nil, p.errf(n, field, "%q is not a number, string or bool", n.Value)
}

// value decodes, normalizes and validates one value of knob k.
func (p parser) value(k *knob, n *yaml.Node, field string) (any, error) {
	v, err := p.scalar(n, field)
	if err != nil {
		return nil, err
	}
	if k.typ == engine.String {
		// YAML reads `none`, `fp8` as strings but a bare number too: keep the text.
		v = n.Value
	}
	nv, err := engine.Check(k.name, v)
	if err != nil {
		return nil, p.wrap(n, field, err)
	}
	return nv, nil
}

func (p parser) param(k *knob, n *yaml.Node, field string) (Param, error) {
	prm := Param{Name: k.name}
	switch n.Kind {
	case yaml.ScalarNode: // a fixed value
		v, err := p.value(k, n, field)
		if err != nil {
			return prm, err
		}
		prm.Kind, prm.Choices = KindCategorical, []any{v}
		return prm, nil
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return prm, p.errf(n, field, "empty list")
		}
		if len(n.Content) > MaxChoices {
			return prm, p.errf(n, field, "%d values listed, at most %d (use a range: {int: [lo, hi]})", len(n.Content), MaxChoices)
		}
		seen := make(map[any]bool, len(n.Content))
		for _, c := range n.Content {
			v, err := p.value(k, c, field)
			if err != nil {
				return prm, err
			}
			if seen[v] {
				return prm, p.errf(c, field, "%s listed twice", engine.FormatValue(v))
			}
			seen[v] = true
			prm.Choices = append(prm.Choices, v)
		}
		prm.Kind = KindCategorical
		if k.typ == engine.Bool && len(prm.Choices) == 2 {
			prm.Kind, prm.Choices = KindBool, []any{false, true}
		}
		return prm, nil
	case yaml.MappingNode:
		return p.rangeParam(k, n, field)
	}
	return prm, p.errf(n, field, "must be a value, a list of values or a mapping like {int: [lo, hi]}")
}

// rangeParam parses {int: [lo, hi], log, step}, {float: [lo, hi], log, step} or {bool: true}.
func (p parser) rangeParam(k *knob, n *yaml.Node, field string) (Param, error) {
	prm := Param{Name: k.name}
	var kindNode, bounds, logNode, stepNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		switch key.Value {
		case "int", "float", "bool":
			if kindNode != nil {
				return prm, p.errf(key, field, "give one of int, float or bool, not %s and %s", kindNode.Value, key.Value)
			}
			kindNode, bounds = key, val
		case "log":
			logNode = val
		case "step":
			stepNode = val
		default:
			return prm, p.errf(key, field, "unknown key %q (want int, float, bool, log or step)", key.Value)
		}
	}
	if kindNode == nil {
		return prm, p.errf(n, field, "needs int: [lo, hi], float: [lo, hi] or bool: true")
	}
	switch kindNode.Value {
	case "bool":
		if k.typ != engine.Bool {
			return prm, p.errf(kindNode, field, "%s takes %s, not a bool", k.name, k.typ)
		}
		var b bool
		if bounds.Kind != yaml.ScalarNode || bounds.Decode(&b) != nil || !b {
			return prm, p.errf(bounds, field, "bool: must be true (searches false and true); write %s: false to fix a value", k.name)
		}
		if logNode != nil || stepNode != nil {
			return prm, p.errf(n, field, "log and step apply to int and float ranges")
		}
		prm.Kind, prm.Choices = KindBool, []any{false, true}
		return prm, nil
	case "int":
		if k.typ != engine.Int {
			return prm, p.errf(kindNode, field, "%s takes %s, not an int range", k.name, k.typ)
		}
		prm.Kind = KindInt
	case "float":
		if k.typ != engine.Float && k.typ != engine.Int {
			return prm, p.errf(kindNode, field, "%s takes %s, not a float range", k.name, k.typ)
		}
		if k.typ == engine.Int {
			return prm, p.errf(kindNode, field, "%s is an integer: use int: [lo, hi]", k.name)
		}
		prm.Kind = KindFloat
	}
	if bounds.Kind != yaml.SequenceNode || len(bounds.Content) != 2 {
		return prm, p.errf(bounds, field, "%s: needs [lo, hi]", kindNode.Value)
	}
	lo, err := p.value(k, bounds.Content[0], field)
	if err != nil {
		return prm, err
	}
	hi, err := p.value(k, bounds.Content[1], field)
	if err != nil {
		return prm, err
	}
	prm.Low, _ = (Settings{"v": lo}).Float("v")
	prm.High, _ = (Settings{"v": hi}).Float("v")
	if prm.Low > prm.High {
		return prm, p.errf(bounds, field, "low %s is above high %s", engine.FormatValue(lo), engine.FormatValue(hi))
	}
	if logNode != nil {
		if logNode.Kind != yaml.ScalarNode || logNode.Decode(&prm.Log) != nil {
			return prm, p.errf(logNode, field, "log: must be true or false")
		}
		if prm.Log && prm.Low <= 0 {
			return prm, p.errf(bounds, field, "a log range needs a positive low bound")
		}
	}
	if stepNode != nil {
		if prm.Log {
			return prm, p.errf(stepNode, field, "step and log do not combine")
		}
		var step float64
		if stepNode.Kind != yaml.ScalarNode || stepNode.Decode(&step) != nil || !(step > 0) || math.IsInf(step, 0) {
			return prm, p.errf(stepNode, field, "step: must be a positive number")
		}
		if prm.Kind == KindInt && step != math.Trunc(step) {
			return prm, p.errf(stepNode, field, "step: must be an integer for an int range")
		}
		prm.Step = step
	}
	return prm, nil
}

// knob is what the parser needs of a tunable setting.
type knob struct {
	name string
	typ  engine.Type
}

func lookup(name string) (*knob, bool) {
	t, ok := engine.TypeOf(name)
	if !ok {
		return nil, false
	}
	return &knob{name: name, typ: t}, true
}

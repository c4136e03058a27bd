package yamlpos

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Decoder reads values out of a YAML tree and keeps the first problem as an
// *Error with the node's position, so a parser reads linearly and checks
// Err once. The zero value is ready; set File for messages.
type Decoder struct {
	File string
	// OnFields, when set, sees every mapping's field and allowed keys as
	// Fields checks them: the spec reference's test walks the parser's
	// keys this way (docs/spec.md).
	OnFields func(field string, allowed []string)
	err      error
}

// Err returns the first problem, or nil.
func (d *Decoder) Err() error { return d.err }

// Failed reports whether a problem was found.
func (d *Decoder) Failed() bool { return d.err != nil }

// Fail records a problem at n's position (n may be nil) unless one was
// recorded already.
func (d *Decoder) Fail(n *yaml.Node, field, format string, a ...any) {
	d.FailErr(n, field, fmt.Errorf(format, a...))
}

// FailErr records err at n's position; an *Error is kept as it is.
func (d *Decoder) FailErr(n *yaml.Node, field string, err error) {
	if d.err != nil || err == nil {
		return
	}
	if _, ok := err.(*Error); ok {
		d.err = err
		return
	}
	e := &Error{File: d.File, Field: field, Err: err}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.err = e
}

// Fields returns a mapping's keys and values, rejecting keys not in
// allowed and keys given twice.
func (d *Decoder) Fields(n *yaml.Node, field string, allowed ...string) map[string]*yaml.Node {
	if d.OnFields != nil {
		d.OnFields(field, allowed)
	}
	out := map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.MappingNode {
		d.Fail(n, field, "want a mapping")
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			d.Fail(k, Join(field, k.Value), "unknown key (want one of %s)", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.Fail(k, Join(field, k.Value), "duplicate key")
		}
		out[k.Value] = v
	}
	return out
}

// Require returns f[key], the value of a key the mapping at n must have.
// An absent key fails at n with "missing (why)"; once any problem is
// recorded it returns nil, so that a caller stops at the first problem.
func (d *Decoder) Require(n *yaml.Node, f map[string]*yaml.Node, field, key, why string) *yaml.Node {
	if d.err != nil {
		return nil
	}
	x := f[key]
	if x == nil {
		d.Fail(n, Join(field, key), "missing (%s)", why)
	}
	return x
}

// KeyNode returns the key node of name in mapping n (for error positions),
// or n itself.
func KeyNode(n *yaml.Node, name string) *yaml.Node {
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				return n.Content[i]
			}
		}
	}
	return n
}

// Join appends key to a dotted field path.
func Join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Str reads a string scalar.
func (d *Decoder) Str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.Fail(n, field, "want a string")
		return ""
	}
	return n.Value
}

// MaxInt is the largest integer Int accepts: no count, length or index in
// a spec comes near it, and a larger one is a typo that would exhaust
// memory or overflow later.
const MaxInt = 1<<31 - 1

// Int reads an integer in [min, MaxInt]. A number with a fraction (1.9) is
// refused, not truncated.
func (d *Decoder) Int(n *yaml.Node, field string, min int) int {
	return d.IntIn(n, field, min, MaxInt)
}

// IntIn reads an integer in [min, max].
func (d *Decoder) IntIn(n *yaml.Node, field string, min, max int) int {
	var f float64
	if n.Kind != yaml.ScalarNode || n.Tag == "!!str" || n.Decode(&f) != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		d.Fail(n, field, "want an integer, got %q", n.Value)
		return 0
	}
	if f < float64(min) {
		d.Fail(n, field, "%s is below the minimum %d", n.Value, min)
		return 0
	}
	if f > float64(max) {
		d.Fail(n, field, "%s is above the maximum %d", n.Value, max)
		return 0
	}
	return int(f)
}

// Number reads a finite number.
func (d *Decoder) Number(n *yaml.Node, field string) float64 {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.Fail(n, field, "want a number, got %q", n.Value)
		return 0
	}
	return v
}

// MaxNumber bounds every number Positive reads: no price per GPU-hour,
// latency in milliseconds (11 days), weight, speed-up or rate a spec gives
// comes near it, and a larger one is a typo that would overflow into +Inf
// in the figures computed from it. Fields with a tighter range say so
// (PositiveAtMost).
const MaxNumber = 1e9

// Positive reads a number in (0, MaxNumber].
func (d *Decoder) Positive(n *yaml.Node, field string) float64 {
	return d.PositiveAtMost(n, field, MaxNumber)
}

// PositiveAtMost reads a number in (0, max].
func (d *Decoder) PositiveAtMost(n *yaml.Node, field string, max float64) float64 {
	v := d.Number(n, field)
	if d.err == nil && v <= 0 {
		d.Fail(n, field, "%g must be > 0", v)
	}
	if d.err == nil && v > max {
		d.Fail(n, field, "%s is above the maximum %g", n.Value, max)
	}
	return v
}

// Bool reads true or false.
func (d *Decoder) Bool(n *yaml.Node, field string) bool {
	var v bool
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		d.Fail(n, field, "want true or false, got %q", n.Value)
	}
	return v
}

// Duration reads a positive Go duration such as 90s or 20m.
func (d *Decoder) Duration(n *yaml.Node, field string) time.Duration {
	s := d.Str(n, field)
	v, err := time.ParseDuration(s)
	if d.err == nil && (err != nil || v <= 0) {
		d.Fail(n, field, "want a positive duration like 90s or 20m, got %q", s)
	}
	return v
}

// Seq reads a non-empty list.
func (d *Decoder) Seq(n *yaml.Node, field string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.Fail(n, field, "want a list")
		return nil
	}
	if len(n.Content) == 0 {
		d.Fail(n, field, "empty list")
	}
	return n.Content
}

// Strings reads a non-empty list of strings.
func (d *Decoder) Strings(n *yaml.Node, field string) []string {
	var out []string
	for _, c := range d.Seq(n, field) {
		out = append(out, d.Str(c, field))
	}
	return out
}

// GPUs reads a list of GPU indices, none listed twice (a launcher's
// gpus).
func (d *Decoder) GPUs(n *yaml.Node, field string) []int {
	var ids []int
	seen := map[int]bool{}
	for _, g := range d.Seq(n, field) {
		id := d.Int(g, field, 0)
		if !d.Failed() && seen[id] {
			d.Fail(g, field, "GPU %d listed twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids
}

// EnvNames reads a list of environment variable names (a launcher's env):
// names only, as a value would land in the stored spec; the values are
// read from the environment.
func (d *Decoder) EnvNames(n *yaml.Node, field string) []string {
	var names []string
	for _, e := range d.Seq(n, field) {
		name := d.Str(e, field)
		if !d.Failed() && (strings.Contains(name, "=") || name == "") {
			d.Fail(e, field, "%q: list variable names only; values are read from the environment", name)
		}
		names = append(names, name)
	}
	return names
}

package space

import (
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Choices is a categorical parameter: name takes one of values, in order
// (one value fixes it). New checks the name and the values.
func Choices[T any](name string, values ...T) Param {
	p := Param{Name: name, Kind: KindCategorical}
	for _, v := range values {
		p.Choices = append(p.Choices, v)
	}
	return p
}

// New is the space of params, in order, under constraints: the space a
// program builds in Go, with the checks Parse makes of a spec's (known
// names, each given once; categorical values the setting takes, each
// listed once, normalized as engine.Check does; a list of false and true
// is a bool parameter; constraints over the space's parameters only).
// Range parameters are taken as they are.
func New(params []Param, constraints ...string) (Space, error) {
	var space Space
	for _, p := range params {
		if _, ok := engine.TypeOf(p.Name); !ok {
			return space, engine.UnknownName(p.Name)
		}
		if _, ok := space.Param(p.Name); ok {
			return space, fmt.Errorf("space.%s: given twice", p.Name)
		}
		if p.Kind == KindCategorical {
			var err error
			if p, err = categorical(p); err != nil {
				return space, fmt.Errorf("space.%s: %w", p.Name, err)
			}
		}
		space.Params = append(space.Params, p)
	}
	for _, expr := range constraints {
		c, err := ParseConstraint(expr)
		if err == nil {
			err = space.constrains(c)
		}
		if err != nil {
			return space, fmt.Errorf("space.constraints: %w", err)
		}
		space.Constraints = append(space.Constraints, c)
	}
	return space, nil
}

// categorical checks and normalizes a categorical parameter's values.
func categorical(p Param) (Param, error) {
	if len(p.Choices) == 0 {
		return p, errors.New("empty list")
	}
	if len(p.Choices) > MaxChoices {
		return p, fmt.Errorf("%d values listed, at most %d", len(p.Choices), MaxChoices)
	}
	out := make([]any, 0, len(p.Choices))
	seen := make(map[any]bool, len(p.Choices))
	for _, v := range p.Choices {
		nv, err := engine.Check(p.Name, v)
		if err != nil {
			return p, err
		}
		if seen[nv] {
			return p, fmt.Errorf("%s listed twice", engine.FormatValue(nv))
		}
		seen[nv] = true
		out = append(out, nv)
	}
	p.Choices = out
	if t, _ := engine.TypeOf(p.Name); t == engine.Bool && len(out) == 2 {
		p.Kind, p.Choices = KindBool, []any{false, true}
	}
	return p, nil
}

// constrains checks that c is over space's parameters only.
func (space Space) constrains(c Constraint) error {
	for _, name := range c.Names() {
		if _, ok := space.Param(name); !ok {
			return fmt.Errorf("%q is not a parameter of this space", name)
		}
	}
	return nil
}

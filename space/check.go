package space

import "errors"

// Context holds the facts constraints are checked against.
type Context struct {
	AttentionHeads int                  // model's attention heads; 0 skips the divisibility check
	KVHeads        int                  // model's key/value heads; 0 skips
	GPUs           int                  // GPUs available to one trial; 0 skips
	Fits           func(Settings) error // memory-fit hook (the simulator's memory model); nil skips
}

// Constraint is one parsed user constraint, e.g. "max_batched_tokens >= max_running_requests".
type Constraint struct {
	Expr string
}

// ParseConstraint parses one constraint expression.
func ParseConstraint(expr string) (Constraint, error) {
	return Constraint{}, errors.New("space.ParseConstraint: not implemented")
}

// Check reports the first reason s cannot be launched: built-in rules, then
// sp's constraints, then c.Fits.
func (sp Space) Check(s Settings, c Context) error {
	return errors.New("space.Check: not implemented")
}

// Size returns the number of points of the grid, or an error when a
// parameter is continuous.
func (sp Space) Size() (int, error) {
	return 0, errors.New("space.Size: not implemented")
}

// Grid enumerates every point of a discrete space in a deterministic order.
func (sp Space) Grid() ([]Settings, error) {
	return nil, errors.New("space.Grid: not implemented")
}

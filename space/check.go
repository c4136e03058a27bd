package space

import (
	"errors"
	"fmt"
	"math"

	"github.com/servetune/servetune/internal/serving/engine"
)

// ErrInfeasible is wrapped by every error Check returns: the settings cannot
// run, so a tuner records the trial as failed/infeasible without launching
// anything.
var ErrInfeasible = errors.New("infeasible settings")

// Context holds the facts constraints are checked against.
type Context struct {
	Engine         engine.Engine        // engine-specific rules apply when set
	AttentionHeads int                  // model's attention heads; 0 skips the divisibility check
	KVHeads        int                  // model's key/value heads; 0 skips
	GPUs           int                  // GPUs available to one trial; 0 skips
	Fits           func(Settings) error // memory-fit hook (the simulator's memory model); nil skips
}

// Check reports the first reason s cannot be launched, wrapped in
// ErrInfeasible: a bad value, then the built-in rules (tensor parallel
// divides the attention heads, and the KV heads or is a multiple of them;
// tensor × pipeline × data parallel fits in the GPUs; for vLLM without
// chunked prefill, max_batched_tokens >= max_model_len), then space's
// constraints, then c.Fits. Parallel degrees missing from s count as 1.
func (space Space) Check(s Settings, c Context) error {
	if err := validSettings(s); err != nil {
		return fmt.Errorf("%w: %w", ErrInfeasible, err)
	}
	degree := func(name string) int {
		if v, ok := s.Int(name); ok {
			return v
		}
		return 1
	}
	tp, pp, dp := degree("tensor_parallel"), degree("pipeline_parallel"), degree("data_parallel")
	if c.AttentionHeads > 0 && c.AttentionHeads%tp != 0 {
		return fmt.Errorf("%w: tensor_parallel %d does not divide the model's %d attention heads", ErrInfeasible, tp, c.AttentionHeads)
	}
	if c.KVHeads > 0 && c.KVHeads%tp != 0 && tp%c.KVHeads != 0 {
		return fmt.Errorf("%w: tensor_parallel %d neither divides nor is a multiple of the model's %d KV heads", ErrInfeasible, tp, c.KVHeads)
	}
	if c.GPUs > 0 && tp*pp*dp > c.GPUs {
		return fmt.Errorf("%w: tensor×pipeline×data parallel = %d×%d×%d needs %d GPUs, %d available", ErrInfeasible, tp, pp, dp, tp*pp*dp, c.GPUs)
	}
	// vLLM refuses to start when, without chunked prefill, one step cannot
	// hold a whole max_model_len prompt.
	if c.Engine == engine.VLLM {
		chunked, set := s.Bool("chunked_prefill")
		budget, hasBudget := s.Int("max_batched_tokens")
		maxLen, hasLen := s.Int("max_model_len")
		if set && !chunked && hasBudget && hasLen && budget < maxLen {
			return fmt.Errorf("%w: without chunked prefill vLLM needs max_batched_tokens %d >= max_model_len %d", ErrInfeasible, budget, maxLen)
		}
	}
	for _, con := range space.Constraints {
		ok, err := con.Holds(s)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInfeasible, err)
		}
		if !ok {
			return fmt.Errorf("%w: constraint %q does not hold", ErrInfeasible, con.Expr)
		}
	}
	if c.Fits != nil {
		if err := c.Fits(s); err != nil {
			return fmt.Errorf("%w: does not fit in memory: %w", ErrInfeasible, err)
		}
	}
	return nil
}

// validSettings checks every setting's name, type and range.
func validSettings(s Settings) error { return engine.CheckSettings(s) }

// ErrNotDiscrete is returned by Size and Grid for a space with a continuous parameter.
var ErrNotDiscrete = errors.New("space is not discrete")

// maxGrid bounds Size so a grid never overflows or exhausts memory (a
// grid is a slice of Settings maps: a million is about half a gigabyte).
const maxGrid = 1_000_000

// count returns how many values a discrete parameter has, without listing them.
func (p Param) count() (float64, error) {
	switch p.Kind {
	case KindCategorical, KindBool:
		return float64(len(p.Choices)), nil
	case KindInt:
		return math.Floor((p.High-p.Low)/max(p.Step, 1)) + 1, nil
	case KindFloat:
		if p.Step == 0 {
			return 0, fmt.Errorf("%w: %s is a continuous range (give it a step)", ErrNotDiscrete, p.Name)
		}
		// The epsilon keeps High when float division lands just below a whole step.
		return math.Floor((p.High-p.Low)/p.Step+1e-9) + 1, nil
	}
	return 0, fmt.Errorf("%w: %s has kind %v", ErrNotDiscrete, p.Name, p.Kind)
}

// Values returns the parameter's values in order when it is discrete: the
// categorical or bool choices, every step of an int range, or every step of
// a float range with a step. A log int range lists every integer.
func (p Param) Values() ([]any, error) {
	n, err := p.count()
	if err != nil {
		return nil, err
	}
	if n > maxGrid {
		return nil, fmt.Errorf("%w: %s has %.0f values", ErrNotDiscrete, p.Name, n)
	}
	switch p.Kind {
	case KindInt:
		step := int(max(p.Step, 1))
		out := make([]any, 0, int(n))
		for i := range int(n) {
			out = append(out, int(p.Low)+i*step)
		}
		return out, nil
	case KindFloat:
		out := make([]any, 0, int(n))
		for i := range int(n) {
			// Round to drop float noise such as 0.30000000000000004.
			v := p.Low + float64(i)*p.Step
			out = append(out, math.Round(v*1e9)/1e9)
		}
		return out, nil
	}
	return p.Choices, nil
}

// Size returns the number of points of the grid; ErrNotDiscrete when a
// parameter is continuous or the grid exceeds a million points.
func (space Space) Size() (int, error) {
	size := 1
	for _, p := range space.Params {
		n, err := p.count()
		if err != nil {
			return 0, err
		}
		if n > float64(maxGrid/max(size, 1)) {
			return 0, fmt.Errorf("%w: the grid has more than %d points", ErrNotDiscrete, maxGrid)
		}
		size *= int(n)
	}
	return size, nil
}

// Grid enumerates every point of a discrete space: the first parameter
// varies slowest, the last fastest, values in spec order. Points that break
// constraints are included; filter them with Check. Points that are one
// configuration (engine.Settings.Key: an aggregated point's shape settings
// configure nothing) appear once, so the grid can be shorter than Size.
func (space Space) Grid() ([]Settings, error) {
	size, err := space.Size()
	if err != nil {
		return nil, err
	}
	values := make([][]any, len(space.Params))
	for i, p := range space.Params {
		values[i], _ = p.Values()
	}
	out := make([]Settings, 0, size)
	seen := make(map[string]bool, size)
	idx := make([]int, len(space.Params))
	for range size {
		s := make(Settings, len(space.Params))
		for i, p := range space.Params {
			s[p.Name] = values[i][idx[i]]
		}
		if k := s.Key(); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < len(values[i]) {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

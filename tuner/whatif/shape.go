package whatif

import (
	"fmt"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/space"
)

// shape is an MoE candidate's parallel layout on its n GPUs: tensor
// parallel within each attention rank, data-parallel attention ranks
// (each with its own requests and KV cache, the routed experts shared
// across all n GPUs), and whether the experts are placed whole
// (expert_parallel) or sliced. Dense models have no shape: their
// candidates search the tensor/pipeline split as before.
type shape struct {
	tp, dp int
	ep     bool
}

// String names the shape as a row shows it: "TP8", "TP8+EP8", "DP8+EP8",
// "TP2xDP4+EP8".
func (s shape) String() string {
	var out string
	switch {
	case s.dp <= 1:
		out = fmt.Sprintf("TP%d", s.tp)
	case s.tp == 1:
		out = fmt.Sprintf("DP%d", s.dp)
	default:
		out = fmt.Sprintf("TP%dxDP%d", s.tp, s.dp)
	}
	if s.ep {
		out += fmt.Sprintf("+EP%d", s.tp*max(s.dp, 1))
	}
	return out
}

// moeShapes are the layouts an MoE model's candidate of n GPUs compares:
// TP=n with the experts sliced (the engines' default), TP=n with expert
// parallelism, and every split of n into TP × DP attention ranks with
// expert parallelism over all n GPUs (DP=n+EP, TP2×DP4+EP, ...). A
// tensor-parallel size the model's heads do not allow is left out. Both
// engines run each of them (the settings data_parallel, expert_parallel
// and dp_attention, spelled per engine in internal/serving/engine/flags.go). Nil for dense models and
// for one GPU, which keep the tensor/pipeline search.
func moeShapes(m catalog.Model, n int) []shape {
	if !m.MoE() || n < 2 {
		return nil
	}
	allowed := map[int]bool{}
	for _, tp := range tensorChoices(m, n) {
		allowed[tp] = true
	}
	var out []shape
	if allowed[n] {
		out = append(out, shape{tp: n, dp: 1}, shape{tp: n, dp: 1, ep: true})
	}
	for dp := n; dp >= 2; dp /= 2 {
		if tp := n / dp; allowed[tp] {
			out = append(out, shape{tp: tp, dp: dp, ep: true})
		}
	}
	return out
}

// apply writes the shape's layout into a configuration: data_parallel,
// dp_attention (SGLang's switch; vLLM does it on every MoE model with
// data_parallel > 1 and renders nothing for it) and expert_parallel.
func (s shape) apply(set space.Settings) {
	set["tensor_parallel"] = s.tp
	delete(set, "pipeline_parallel")
	if s.dp > 1 {
		set["data_parallel"] = s.dp
		set["dp_attention"] = true
	}
	if s.ep {
		set["expert_parallel"] = true
	}
}

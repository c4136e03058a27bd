package whatif

import (
	"fmt"
	"math"
	"strings"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// pruneBySLO drops, before any simulation, each candidate that cannot
// meet the SLO's TPOT/ITL limit at all: its fastest decode step (one
// sequence with no context to read, over every tensor split
// it may search, without pipeline stages, which only add to a token's
// time) is already over the limit. Speculative decoding, which emits
// several tokens a step, is left to the search.
func pruneBySLO(o Options, cands []candidate) {
	limit := math.Inf(1)
	for _, l := range o.SLO.Latency() {
		if strings.HasPrefix(l.Metric, "tpot") || strings.HasPrefix(l.Metric, "itl") {
			limit = math.Min(limit, l.Max)
		}
	}
	if math.IsInf(limit, 1) || o.Spec != nil {
		return
	}
	for i := range cands {
		c := &cands[i]
		if c.anchor == nil || c.disagg {
			continue
		}
		best := math.Inf(1)
		for _, tp := range c.tps {
			set := engine.Settings{}
			for k, v := range c.anchor {
				set[k] = v
			}
			set["tensor_parallel"] = tp
			delete(set, "pipeline_parallel")
			cfg, err := launcherFor(o, *c).Config(launcher.Spec{Engine: c.engine, Model: o.Model, Settings: withLayout(set, c.n, c.shape), GPUs: make([]int, c.n)})
			if err != nil {
				best = 0 // not priced here: leave it to the search
				break
			}
			st, err := sim.EstimateStepTimes(cfg, 1)
			if err != nil {
				best = 0
				break
			}
			best = math.Min(best, st.Decode[1])
		}
		if best > limit {
			c.anchor, c.unfit = nil, fmt.Sprintf("cannot meet TPOT %.0f ms: one sequence's decode step alone takes %.1f ms", limit, best)
		}
	}
}

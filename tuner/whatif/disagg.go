package whatif

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
)

// The shapes a what-if question compares (Options.Shapes): one engine per
// replica, or prefill and decode engines behind a router
// (docs/reference.md (Disaggregated prefill and decode)).
const (
	ShapeAggregated    = engine.ShapeAggregated
	ShapeDisaggregated = engine.ShapeDisaggregated
)

// Part is one side of a disaggregated row: its engines, the GPUs they
// take together, their settings and one engine's serve command.
type Part struct {
	Replicas      int             `json:"replicas"`
	GPUsPerEngine int             `json:"gpus_per_engine"`
	GPUs          int             `json:"gpus"`
	Settings      engine.Settings `json:"settings"`
	ServeCommand  string          `json:"serve_command"`
}

// checkShapes validates Shapes (default aggregated only) and KVLink.
func (o *Options) checkShapes() error {
	if len(o.Shapes) == 0 {
		o.Shapes = []string{ShapeAggregated}
	}
	for _, s := range o.Shapes {
		if s != ShapeAggregated && s != ShapeDisaggregated {
			return inputErr("--shapes %q: want aggregated, disaggregated or both", s)
		}
	}
	l, err := sim.LookupLink(o.KVLink)
	if err != nil {
		return inputErr("--kv-link: %v", err)
	}
	o.KVLink = l.Name
	return nil
}

func (o Options) wants(shape string) bool { return slices.Contains(o.Shapes, shape) }

// disaggTPs are the tensor-parallel sizes a prefill or decode engine may
// take when both sides share n GPUs: those the model allows up to n/2.
func disaggTPs(m catalog.Model, n int) []int {
	if n < 2 {
		return nil
	}
	return tensorChoices(m, n/2)
}

// disaggLayout is a disaggregated configuration's shape: prefill and
// decode engines and their tensor-parallel sizes.
func disaggLayout(set engine.Settings) (p, ptp, d, dtp int) {
	p, _ = set.Int("prefill_replicas")
	d, _ = set.Int("decode_replicas")
	ptp, _ = set.Int("prefill_tensor_parallel")
	dtp, _ = set.Int("decode_tensor_parallel")
	return max(p, 1), max(ptp, 1), max(d, 1), max(dtp, 1)
}

// disaggShape names a disaggregated row's layout: "P1xTP4:D2xTP2", one
// prefill engine of 4 GPUs to two decode engines of 2.
func disaggShape(set engine.Settings) string {
	p, ptp, d, dtp := disaggLayout(set)
	return fmt.Sprintf("P%dxTP%d:D%dxTP%d", p, ptp, d, dtp)
}

// disaggParams are the space of a disaggregated candidate's layout: each
// side's engines and tensor-parallel size, all within its n GPUs.
func disaggParams(c candidate) ([]space.Param, []string) {
	var reps []int
	for r := 1; r < c.n; r++ {
		reps = append(reps, r)
	}
	return []space.Param{
		space.Choices("prefill_tensor_parallel", c.tps...),
		space.Choices("decode_tensor_parallel", c.tps...),
		space.Choices("prefill_replicas", reps...),
		space.Choices("decode_replicas", reps...),
	}, []string{fmt.Sprintf("prefill_replicas * prefill_tensor_parallel + decode_replicas * decode_tensor_parallel <= %d", c.n)}
}

// disaggFits is fits for a disaggregated candidate: one prefill and one
// decode engine, each of the widest tensor split that leaves the other
// as many GPUs, with the most compact weights and KV cache allowed; the
// first anchor configuration whose parts both fit, or why none does.
func disaggFits(o Options, c candidate) (engine.Settings, string) {
	if len(c.tps) == 0 {
		return nil, fmt.Sprintf("disaggregated: needs at least 2 GPUs whose tensor split the model's heads allow, %d given (--max-gpus)", c.n)
	}
	tp := c.tps[len(c.tps)-1]
	fill := func(set engine.Settings) {
		set["prefill_replicas"], set["decode_replicas"] = 1, 1
		set["prefill_tensor_parallel"], set["decode_tensor_parallel"] = tp, tp
	}
	return firstThatFits(o, c, fill, func(set engine.Settings) string {
		full := withDisagg(set)
		d, err := launcherFor(o, c).Deployment(launcher.Spec{Engine: c.engine, Model: o.Model, Settings: full, GPUs: make([]int, full.GPUs())})
		if err != nil {
			return oneLine(err)
		}
		for _, cfg := range []sim.Config{d.Prefill, d.Decode} {
			if est, err := sim.Estimate(cfg); err != nil {
				return whyNot(est, cfg, err)
			}
		}
		return ""
	})
}

// withDisagg marks a configuration disaggregated (engine.Settings.Parts).
func withDisagg(set engine.Settings) engine.Settings {
	s := set.Clone()
	s["disaggregated"] = true
	return s
}

// fillDisagg fills a disaggregated row from its best configuration: the
// GPUs it takes, its two parts and their commands, the router's.
func (r *Row) fillDisagg(o Options, model string, set engine.Settings) {
	r.Deployment, r.Shape, r.KVLink = ShapeDisaggregated, disaggShape(set), o.KVLink
	r.GPUsPerReplica = set.GPUs()
	r.Settings = set
	parts := set.Parts()
	for _, role := range []engine.Role{engine.Prefill, engine.Decode} {
		var pt *Part
		for _, p := range parts {
			if p.Role != role {
				continue
			}
			if pt == nil {
				args := engine.RoleArgs(r.Engine, role, engine.KVTransfer{})
				pt = &Part{GPUsPerEngine: p.GPUs(), Settings: p.Settings,
					ServeCommand: engine.ShellJoin(engine.ServeCommand(r.Engine, model, p.Settings, args))}
			}
			pt.Replicas++
			pt.GPUs += p.GPUs()
		}
		if role == engine.Prefill {
			r.Prefill = pt
		} else {
			r.Decode = pt
		}
	}
	r.RouterCommand = routerCommand(r.Engine, r.Prefill.Replicas, r.Decode.Replicas)
	r.ServeCommand = fmt.Sprintf("prefill x%d: %s; decode x%d: %s; router: %s",
		r.Prefill.Replicas, r.Prefill.ServeCommand, r.Decode.Replicas, r.Decode.ServeCommand, r.RouterCommand)
}

// routerCommand is the router the engine's projects package
// (engine.RouterFor: vLLM's vllm-router, SGLang's sglang_router) over p
// prefill and d decode engines, their base URLs left as placeholders
// (PREFILL_0_URL, ...), listening on engine.ContainerPort.
func routerCommand(e engine.Engine, p, d int) string {
	r, ok := engine.RouterFor(e, engine.Version{}, engine.KVTransfer{})
	if !ok {
		return ""
	}
	fill := strings.NewReplacer("{host}", "0.0.0.0", "{port}", strconv.Itoa(engine.ContainerPort))
	var argv []string
	for _, a := range r.Command {
		argv = append(argv, fill.Replace(a))
	}
	for _, each := range []struct {
		role string
		n    int
		args []string
	}{{"PREFILL", p, r.EachPrefill}, {"DECODE", d, r.EachDecode}} {
		for i := range each.n {
			u := strings.NewReplacer("{url}", each.role+"_"+strconv.Itoa(i)+"_URL")
			for _, a := range each.args {
				argv = append(argv, u.Replace(a))
			}
		}
	}
	return engine.ShellJoin(argv)
}

// Verdict says which shape ranks first, and by how much against the best
// row of the other shape; "" unless both shapes were asked for.
func (rep *Report) Verdict() string {
	if len(rep.Rows) == 0 || rep.Rows[0].Rank != 1 || rep.Rows[0].Deployment == "" {
		return ""
	}
	best := rep.Rows[0]
	for _, r := range rep.Rows[1:] {
		if r.Rank == 0 || r.Deployment == best.Deployment {
			continue
		}
		unit, a, b := "Mtok", best.CostPerMTok, r.CostPerMTok
		if rep.TargetRPS > 0 {
			unit, a, b = "month", best.MonthlyCost, r.MonthlyCost
		}
		return fmt.Sprintf("%s wins for this workload and SLO: %s at %s against %s's best, %s, at %s",
			best.Deployment, best.Name(), measure.DollarsPer(a, unit), r.Deployment, r.Name(), measure.DollarsPer(b, unit))
	}
	return fmt.Sprintf("%s wins for this workload and SLO: no %s row serves it", best.Deployment, other(best.Deployment))
}

func other(shape string) string {
	if shape == ShapeAggregated {
		return ShapeDisaggregated
	}
	return ShapeAggregated
}

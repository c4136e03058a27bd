package tuner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/sim"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
)

// VirtualEvaluator evaluates settings with the simulated engine in virtual
// time (sim.RunVirtual): no process, no HTTP, milliseconds per trial. It
// serves the sampler benchmark and dry runs of a spec. It is safe for
// concurrent use.
type VirtualEvaluator struct {
	Spec *Spec
	// NumGPUs is the GPU count the simulator sees per trial; 0 = the trial's
	// need (tensor × pipeline × data parallel).
	NumGPUs int
}

var _ Evaluator = (*VirtualEvaluator)(nil)

// Evaluate simulates trial number with settings. gpus only sizes the trial.
func (v *VirtualEvaluator) Evaluate(ctx context.Context, number int, set space.Settings, gpus []int) trial.Result {
	start := time.Now()
	res := v.evaluate(ctx, number, set)
	res.Started, res.Finished = start, time.Now()
	return res
}

func (v *VirtualEvaluator) evaluate(ctx context.Context, number int, set space.Settings) trial.Result {
	sp := v.Spec
	n := v.NumGPUs
	if n == 0 {
		n = GPUsFor(set)
	}
	r := &TrialRunner{Spec: sp}
	if err := sp.Space.Check(set, r.checkContext(n)); err != nil {
		if msg, ok := oomMessage(err); ok {
			return trial.Failed(trial.FailOOM, msg)
		}
		return trial.Failed(trial.FailInfeasible, err.Error())
	}
	args, err := space.Render(sp.Engine, set)
	if err != nil {
		return trial.Failed(trial.FailInfeasible, err.Error())
	}
	args = append(args, sp.Space.Extra...) // as TrialRunner launches it
	cfg, err := sim.ParseArgs(append([]string{sp.Model}, args...), r.simEnv(n))
	if err != nil {
		return trial.Failed(trial.FailLaunchError, err.Error())
	}
	// The same requests for every trial, so trials differ only by settings.
	seed := uint64(sp.Tuner.Seed)
	reqs, err := sp.Workload.Dataset.Generate(rand.New(rand.NewPCG(seed, 1)), sp.Workload.RequestsPerLevel)
	if err != nil {
		return trial.Failed(trial.FailBenchError, err.Error())
	}
	res := trial.Result{Status: trial.StatusOK}
	i := 0
	var failed *trial.Result
	measure := func(load bench.Load) (bench.Summary, error) {
		if err := ctx.Err(); err != nil {
			failed = &trial.Result{Status: trial.StatusInterrupted}
			return bench.Summary{}, err
		}
		recs, err := sim.RunVirtual(cfg, reqs, load, seed+uint64(i))
		i++
		if err != nil {
			var se *sim.StartupError
			r := trial.Failed(trial.FailCrash, fmt.Sprintf("simulation: %v", err))
			if errors.As(err, &se) {
				r = trial.Failed(trial.FailOOM, se.Message)
			}
			failed = &r
			return bench.Summary{}, err
		}
		sum := bench.Summarize(recs, bench.SummaryOptions{Goodput: sp.SLO.Goodput(), Bootstrap: 1, Seed: seed})
		sum.MaxConcurrency, sum.RequestRate = load.MaxConcurrency, load.Rate
		label, kind, value := trial.LevelLabel(load)
		res.Levels = append(res.Levels, trial.Level{Label: label, Kind: kind, Value: value, Load: load, Summary: sum})
		return sum, nil
	}
	if sp.Workload.Capacity {
		_, err := trial.SearchCapacity(sp.Workload.MaxConcurrency, 0, func(n int) (bool, error) {
			sum, err := measure(bench.Load{MaxConcurrency: n})
			return err == nil && sp.SLO.Met(Point{GPUs: 1, Summary: sum}), err
		})
		if err != nil {
			return *failed
		}
		return res
	}
	for _, load := range sp.Workload.Levels {
		if _, err := measure(load); err != nil {
			return *failed
		}
	}
	return res
}

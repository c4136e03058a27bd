package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/recommend"
)

// planFromStudy is the serve configuration a stored study recommends
// (its objective's pick), as the simulated engine's configuration, and
// the study's $ per GPU-hour (0 when it gave none), where it came from,
// and the model's config.json when the catalog lacks it: what plan
// multiplies into a fleet when --from-study names the study.
func planFromStudy(ctx context.Context, dbPath, name string) (sim.Config, float64, string, string, error) {
	ss, err := loadStudy(ctx, dbPath, name)
	if err != nil {
		return sim.Config{}, 0, "", "", err
	}
	study := ss.spec
	rec, err := recommend.RecommendStudy(ss.trials, study.Terms(), recommend.PreferObjective)
	if err != nil {
		return sim.Config{}, 0, "", "", failedError(fmt.Errorf("--from-study %s: %w", name, err))
	}
	p := rec.Best.Point
	if d, _ := p.Settings.Bool("disaggregated"); d {
		return sim.Config{}, 0, "", "", usageErrorf("--from-study %s: the recommendation is disaggregated (trial %d); plan scales aggregated replicas", name, p.Trial)
	}
	cfg, err := sim.FromSettings(study.Engine, study.Model, study.ModelConfig, study.Hardware.GPU, p.GPUs, p.Settings)
	if err != nil {
		return sim.Config{}, 0, "", "", failedError(fmt.Errorf("--from-study %s: trial %d: %w", name, p.Trial, err))
	}
	return cfg, study.Hardware.PricePerGPUHour, fmt.Sprintf("study %s, trial %d", name, p.Trial), study.ModelConfig, nil
}

// planConfig is the replica plan multiplies and the engine's command
// line that serves it (what --replay starts): the engine flags given (as
// sim run reads them), or with --from-study the stored study's
// recommendation, whose price stands in for the catalog's unless --price
// is given.
func planConfig(cmd *cobra.Command, f *planFlags, engineArgs []string) (sim.Config, []string, error) {
	if f.fromStudy == "" {
		cfg, err := simConfig(engineArgs)
		return cfg, engineArgs, err
	}
	if len(engineArgs) > 0 {
		return sim.Config{}, nil, usageErrorf("--from-study %s takes the engine, model, GPU and settings from the study: give no engine flags (got %s)", f.fromStudy, engineArgs[0])
	}
	cfg, price, src, modelConfig, err := planFromStudy(cmd.Context(), f.db, f.fromStudy)
	if err != nil {
		return cfg, nil, err
	}
	if f.price == 0 {
		f.price = price
	}
	settings := cfg.Settings()
	fmt.Fprintf(cmd.ErrOrStderr(), "plan: a replica is %s: %s %s on %d %s\n", src, cfg.Engine, settings.Line(), cfg.NumGPUs, cfg.GPU.ID)
	flags, err := engine.Render(cfg.Engine, servedSettings(cfg))
	if err != nil {
		return cfg, nil, failedError(fmt.Errorf("--from-study %s: %w", f.fromStudy, err))
	}
	e := cfg.Engine
	args := append([]string{engine.Flag(e, "model"), cfg.ModelID, engine.Flag(e, "sim_engine"), string(e), engine.Flag(e, "sim_gpu"), cfg.GPU.ID}, flags...)
	if p := modelConfig; p != "" {
		args = append(args, engine.Flag(e, "sim_model_config"), p)
	}
	return cfg, args, nil
}

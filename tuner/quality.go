package tuner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/load/quality"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/spec"
)

// QualityBaseline is the quality gate's measurement of the baseline
// configuration, stored with the study (store.Study.QualityBaseline) so a
// resumed study asks the baseline once.
type QualityBaseline struct {
	Settings engine.Settings `json:"settings"`
	Seed     uint64          `json:"seed"`
	Items    int             `json:"items"`
	Result   quality.Result  `json:"result"`
	// NotApplied says why the gate scores nothing in this study (the
	// simulated engine's answers are not a model's, the baseline did not
	// start); "" when it applies.
	NotApplied string `json:"not_applied,omitempty"`
	// Failed is the baseline's failure class and the engine's words when it
	// did not start or answer, as a failed trial keeps them; "" when it ran.
	Failed string `json:"failed,omitempty"`
}

// ParseQualityBaseline reads a stored baseline; ok is false for none.
func ParseQualityBaseline(text string) (b QualityBaseline, ok bool, err error) {
	if text == "" {
		return b, false, nil
	}
	if err := json.Unmarshal([]byte(text), &b); err != nil {
		return b, false, fmt.Errorf("stored quality baseline: %w", err)
	}
	return b, true, nil
}

// matches reports whether b measured the baseline study asks for.
func (b QualityBaseline) matches(study *spec.Spec) bool {
	return b.Seed == qualitySeed(study) && b.Items == study.Quality.Items && b.Settings.Key() == baselineSettings(study).Key()
}

// baselineSettings is the configuration the quality baseline launches: the
// space's fixed values (parameters with one choice) under the baseline's
// own. A setting the baseline leaves out is the study's, not the engine's
// default: a baseline naming only quantization must not start at the
// model's whole context when every trial fixes max_model_len.
func baselineSettings(study *spec.Spec) engine.Settings {
	set := engine.Settings{}
	for _, p := range study.Space.Params {
		switch {
		case (p.Kind == space.KindCategorical || p.Kind == space.KindBool) && len(p.Choices) == 1:
			set[p.Name] = p.Choices[0]
		case p.Kind == space.KindInt && p.Low == p.High:
			set[p.Name] = int(p.Low)
		case p.Kind == space.KindFloat && p.Low == p.High:
			set[p.Name] = p.Low
		}
	}
	for k, v := range study.Quality.Baseline {
		set[k] = v
	}
	return set
}

// qualitySeed is the task set's seed of a study: its tuner seed.
func qualitySeed(study *spec.Spec) uint64 { return uint64(study.Tuner.Seed) }

// qualityEvaluator is an Evaluator that can run the quality gate
// (TrialRunner): measure the baseline, then judge every search trial.
type qualityEvaluator interface {
	EvaluateBaseline(ctx context.Context, gpus []int) (QualityBaseline, error)
	UseQualityGate(b QualityBaseline)
}

// evalOptions are the gate's request options.
var evalOptions = quality.Options{Concurrency: 16}

// EvaluateBaseline launches the spec's quality baseline on gpus, asks it
// the task set and stops it. The virtual launcher's engine and the
// simulated engine produce no model text: the baseline then says the gate
// does not apply (NotApplied) rather than failing.
func (r *TrialRunner) EvaluateBaseline(ctx context.Context, gpus []int) (QualityBaseline, error) {
	study := r.Spec
	q := study.Quality
	b := QualityBaseline{Settings: baselineSettings(study), Seed: qualitySeed(study), Items: q.Items}
	ls := r.LaunchSpec(-1, b.Settings, gpus)
	inst, err := r.launcher().Launch(ctx, ls)
	if err != nil {
		return b, fmt.Errorf("launch: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), launcher.DefaultStopTimeout+5*time.Second)
		defer cancel()
		_ = inst.Stop(sctx)
	}()
	rctx, cancel := context.WithTimeout(ctx, study.Launcher.ReadyTimeout)
	err = inst.Ready(rctx)
	cancel()
	if err != nil {
		var exit *launcher.ExitError
		if errors.As(err, &exit) {
			_, msg := engine.Classify(exit.Exit, false, inst.Logs())
			return b, errors.New(msg)
		}
		return b, fmt.Errorf("not ready: %w", err)
	}
	if _, virtual := inst.(interface{ Transport() measure.Transport }); virtual {
		b.NotApplied = "the virtual launcher's simulated engine generates no text, only timings: there is nothing to score"
		return b, nil
	}
	res, err := quality.Run(ctx, openai.Target{BaseURL: inst.Endpoint(), Model: study.Model}, quality.Tasks(b.Seed, b.Items), evalOptions)
	b.Result = res
	if err != nil {
		return b, err
	}
	if res.Simulated {
		b.NotApplied = quality.SimulatedReason
	}
	return b, nil
}

// UseQualityGate makes every search trial answer the task set after its
// levels and be judged against b.
func (r *TrialRunner) UseQualityGate(b QualityBaseline) {
	r.gate = &b
}

// qualityCheck is the trial plan's quality step for a search trial.
func (r *TrialRunner) qualityCheck() func(ctx context.Context, endpoint string) measure.Quality {
	b, study := r.gate, r.Spec
	tasks := quality.Tasks(b.Seed, b.Items)
	return func(ctx context.Context, endpoint string) measure.Quality {
		// A failed run leaves its unanswered items counted wrong: a server
		// that cannot answer does not pass.
		res, _ := quality.Run(ctx, openai.Target{BaseURL: endpoint, Model: study.Model}, tasks, evalOptions)
		v := quality.Judge(res, b.Result, study.Quality.MaxDropPct)
		if v.Scored && !v.Pass && res.Errors > 0 {
			v.Reason = fmt.Sprintf("%d of %d tasks unanswered, the first: %s", res.Errors, res.Items, res.FirstError)
		}
		return v
	}
}

var _ qualityEvaluator = (*TrialRunner)(nil)

// qualityPlan sets the quality step of a search trial's plan.
func (r *TrialRunner) qualityPlan(p *trial.Plan, replica int) {
	// Confirmation runs measure a configuration that passed again, on
	// other workloads: its answers do not change with the load.
	if r.gate != nil && replica == 0 {
		p.Quality = r.qualityCheck()
	}
}

// qualityBaseline prepares the quality gate before the first trial: the
// stored measurement of the baseline when it is the one the spec asks for,
// else a fresh one on the study's first GPUs, stored with the study. A
// baseline the gate cannot score (the simulated engine) turns the gate off
// with a note that says why: nothing passes it unscored.
func (r *studyRun) qualityBaseline(ctx context.Context) error {
	study := r.s.Spec
	q := study.Quality
	if q == nil {
		return nil
	}
	qe, ok := r.eval.(qualityEvaluator)
	if !ok {
		return errors.New("the quality gate needs the study's own trial runner")
	}
	b, stored, err := ParseQualityBaseline(r.run.Study.QualityBaseline)
	if err != nil {
		return err
	}
	if !stored || !b.matches(study) {
		gpus, group := study.Launcher.Placement()
		if len(gpus) == 0 {
			for i := range 64 {
				gpus = append(gpus, i)
			}
		}
		pool := newGPUPool(gpus, group)
		set := baselineSettings(study)
		need := spec.GPUsFor(set)
		if need > pool.total {
			return fmt.Errorf("the baseline needs %d GPUs, the study has %d on one host", need, pool.total)
		}
		ids, err := pool.Acquire(ctx, need)
		if err != nil {
			return err
		}
		r.s.note("quality gate: measuring the baseline (%s) on GPUs %v", settingsKey(set), ids)
		b, err = qe.EvaluateBaseline(ctx, ids)
		pool.Release(ids)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// As a failed trial: kept with the study, said, and the
			// search goes on without a gate to judge it by.
			b.Failed = err.Error()
			b.NotApplied = "the baseline did not start or answer: " + b.Failed
		}
		text, err := json.Marshal(b)
		if err != nil {
			return err
		}
		if err := r.run.SetQualityBaseline(context.WithoutCancel(ctx), string(text)); err != nil {
			return err
		}
	}
	if b.NotApplied != "" {
		r.s.note("quality gate not applied: %s", b.NotApplied)
		return nil
	}
	r.s.note("quality gate: baseline accuracy %.1f%% on %d tasks; a trial may drop at most %.1f points", b.Result.AccuracyPct, b.Items, q.MaxDropPct)
	qe.UseQualityGate(b)
	return nil
}

// settingsKey writes settings as "k=v k=v" in name order, or "engine defaults".
func settingsKey(s engine.Settings) string {
	if len(s) == 0 {
		return "engine defaults"
	}
	return s.Line()
}

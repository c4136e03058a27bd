package sampler

import (
	"context"
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/registry"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/spec"
)

// ErrExhausted is returned by Ask when a grid sampler has proposed every point.
var ErrExhausted = errors.New("search space exhausted")

// Stopper is a Sampler that may stop proposing before the study's trial
// count on its own judgement (the guided sampler's forecast): StopReason
// says why, "" while it proposes.
type Stopper interface {
	StopReason() string
}

// Sampler proposes settings and learns from results (ask and tell). Values
// told are "higher is better"; a failed trial is told as failed and ranks
// below every success, so the sampler moves away from it. Implementations
// are safe for concurrent use and own their seeded random source, so one
// seed proposes the same settings in the same order in any program.
type Sampler interface {
	// Kind is the sampler's name in a spec (tuner.sampler).
	Kind() string
	// Ask proposes the next settings.
	Ask() (Proposal, error)
	// Observe gives a proposal's whole result before Tell: whether the
	// engine started, and the measured levels (the guided sampler refits
	// the simulator to them; other kinds ignore it).
	Observe(id int, res trial.Result)
	// Tell reports the value of a proposal (higher is better), or that it
	// failed.
	Tell(id int, value float64, failed bool) error
	// Replay records an already evaluated point (from a resumed study) so
	// the sampler continues from it.
	Replay(set space.Settings, value float64, failed bool) error
	// Reserve marks set as proposed without a result yet: an interrupted
	// trial of a resumed study that runs again, so that Ask does not
	// propose it while it runs. Its result comes later through Replay.
	Reserve(set space.Settings)
	// Summary is a line on what the sampler did ("" for kinds with
	// nothing to say).
	Summary() string
}

// Proposal is one point the sampler asks to evaluate.
type Proposal struct {
	ID       int // the sampler's handle for Tell
	Settings space.Settings
}

// Hooks are what a kind that forecasts the study before its first
// proposal (the guided sampler: seconds, minutes on a large space) tells
// while it builds: Note, a line on what it decides; Forecast, the
// configurations forecast so far of those it means to forecast (the
// total grows when it refines around the best), so that a long forecast
// shows as one and not as a study that hangs. Either may be nil;
// Forecast's calls are serialised.
type Hooks struct {
	Note     func(string)
	Forecast func(done, total int)
}

// Kind is a sampler a spec can name (spec.SamplerKinds, whose checks of
// a study are the spec's own). A kind registers itself in its file's
// (or package's) init: New builds it over a space, or Study, for kinds that
// need the whole study (the guided sampler forecasts it), from the spec.
type Kind struct {
	Name  string
	New   func(searchSpace space.Space, seed int64) (Sampler, error)
	Study func(ctx context.Context, study *spec.Spec, hooks Hooks) (Sampler, error)
}

var kinds = registry.New[Kind]("sampler")

// Register adds a sampler kind; a second kind of the same name panics.
func Register(k Kind) {
	kinds.Add(k.Name, k, (k.New == nil) != (k.Study == nil))
}

// Kinds returns the registered kinds' names, sorted.
func Kinds() []string { return kinds.Names() }

func lookup(name string) (Kind, bool) { return kinds.Lookup(name) }

// ForStudy builds the sampler of the study (its tuner.sampler and seed). A
// kind that forecasts the study first (guided: seconds to minutes; ctx
// bounds it) reports what it decides and how far its forecast is through
// hooks.
func ForStudy(ctx context.Context, study *spec.Spec, hooks Hooks) (Sampler, error) {
	k, ok := lookup(study.Tuner.Sampler)
	if !ok {
		return nil, fmt.Errorf("sampler %q is not in this program (want one of %v)", study.Tuner.Sampler, Kinds())
	}
	if k.Study != nil {
		return k.Study(ctx, study, hooks)
	}
	return k.New(study.Space, study.Tuner.Seed)
}

// New builds a seeded sampler of the given kind ("" is TPE) over searchSpace.
func New(kind string, searchSpace space.Space, seed int64) (Sampler, error) {
	if kind == "" {
		kind = spec.SamplerTPE
	}
	k, ok := lookup(kind)
	if !ok || k.New == nil {
		return nil, fmt.Errorf("sampler %q: want tpe, random, cmaes or grid", kind)
	}
	return k.New(searchSpace, seed)
}

package guided

import (
	"context"
	"fmt"
	"sync"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

func init() {
	sampler.Register(sampler.Kind{Name: spec.SamplerGuided, Study: New})
}

// Sampler is the guided sampler: the guide's proposals, then TPE's once
// the forecasts disagree with the measurements (startFallback).
type Sampler struct {
	mu sync.Mutex
	g  *guide
}

// New forecasts the space of the study (seconds to minutes; ctx bounds it)
// and returns the guided sampler, which reports how far the forecast is
// and what it decides through hooks.
func New(ctx context.Context, study *spec.Spec, hooks sampler.Hooks) (sampler.Sampler, error) {
	// The guided sampler forecasts latencies; the simulated engine fails
	// no request, so it weighs the latency limits only.
	gs := *study
	gs.SLO = study.SLO.Latency()
	g, err := newGuide(ctx, &gs, hooks)
	if err != nil {
		return nil, err
	}
	return &Sampler{g: g}, nil
}

// Kind is "guided".
func (s *Sampler) Kind() string { return spec.SamplerGuided }

// Ask proposes the best forecast, or TPE's proposal after the fallback.
func (s *Sampler) Ask() (sampler.Proposal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g.fallback != nil {
		return s.g.fallback.Ask()
	}
	return s.g.ask()
}

// Observe takes whether the engine started and the levels to refit to.
func (s *Sampler) Observe(id int, res trial.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.g.ids[id]; c != nil {
		s.g.observe(c, res)
	}
}

// StopReason says why the guide stopped proposing before the study's
// trial count (the forecast's reason), "" while it proposes or after the
// fallback to TPE.
func (s *Sampler) StopReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g.fallback != nil {
		return ""
	}
	return s.g.why
}

// Forecasts is the guide's forecast of every configuration it knows, the
// best of each parameter's values first (guide.forecasts), for the study's
// store; none after the fallback to TPE, when the measurements have shown
// the forecast wrong.
func (s *Sampler) Forecasts() []store.Forecast {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g.fallback != nil {
		return nil
	}
	return s.g.forecasts()
}

// Summary says what the guide did: refits, fallback, trials saved.
func (s *Sampler) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.g.summary()
}

// Tell records a proposal's value; after the fallback, TPE learns it too.
func (s *Sampler) Tell(id int, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.g
	if id < guidedIDBase {
		if g.fallback == nil {
			return fmt.Errorf("sampler guided: no proposal %d", id)
		}
		return g.fallback.Tell(id, value, failed)
	}
	c := g.ids[id]
	g.tell(id, value, failed)
	if g.fallback != nil && c != nil {
		return g.fallback.Replay(c.set, value, failed)
	}
	return nil
}

// Replay records a stored trial of a resumed study.
func (s *Sampler) Replay(set space.Settings, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.replay(set, value, failed)
	if s.g.fallback != nil {
		return s.g.fallback.Replay(set, value, failed)
	}
	return nil
}

// Reserve marks an interrupted trial's settings as proposed.
func (s *Sampler) Reserve(set space.Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.reserve(set)
	if s.g.fallback != nil {
		s.g.fallback.Reserve(set)
	}
}

package tuner

import (
	"context"
	"errors"
	"fmt"
	"github.com/servetune/servetune/tuner/spec"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/c-bata/goptuna"
	"github.com/c-bata/goptuna/cmaes"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
)

// ErrExhausted is returned by Ask when a grid sampler has proposed every point.
var ErrExhausted = errors.New("search space exhausted")

// Sampler proposes settings and learns from results (ask and tell). Values
// told are "higher is better"; a failed trial is told as failed and ranks
// below every success, so the sampler moves away from it. Safe for
// concurrent use.
type Sampler struct {
	mu     sync.Mutex
	kind   string
	params []space.Param
	study  *goptuna.Study // nil for the grid sampler
	grid   []space.Settings
	next   int
	seed   int64
	asked  int
	seen   map[string]bool // configurations proposed or replayed
	random *randomSampler  // fallback when the model repeats itself
	guide  *guide          // the guided sampler's state (kind guided)
}

// NewStudySampler builds the sampler of study sp: NewSampler's kinds, and
// the guided sampler, which forecasts the space first (seconds to a
// minute; ctx bounds it) and reports what it decides through note.
func NewStudySampler(ctx context.Context, sp *spec.Spec, note func(string)) (*Sampler, error) {
	if sp.Tuner.Sampler != spec.SamplerGuided {
		return NewSampler(sp.Tuner.Sampler, sp.Space, sp.Tuner.Seed)
	}
	// The guided sampler forecasts latencies; the simulated engine fails
	// no request, so it weighs the latency limits only.
	gs := *sp
	gs.SLO = sp.SLO.Latency()
	g, err := newGuide(ctx, &gs, note)
	if err != nil {
		return nil, err
	}
	return &Sampler{kind: spec.SamplerGuided, params: sp.Space.Params, seed: sp.Tuner.Seed, seen: map[string]bool{}, guide: g}, nil
}

// NewSampler builds a seeded sampler of the given kind over sp.
func NewSampler(kind string, sp space.Space, seed int64) (*Sampler, error) {
	s := &Sampler{kind: kind, params: sp.Params, seed: seed, seen: map[string]bool{},
		random: newRandomSampler(seed ^ 0x7ea5)}
	var opts []goptuna.StudyOption
	switch kind {
	case spec.SamplerTPE, "":
		s.kind = spec.SamplerTPE
		opts = append(opts, goptuna.StudyOptionSampler(&startupSampler{
			startup: tpeStartupTrials,
			random:  newRandomSampler(seed),
			next:    newTPESampler(seed),
		}))
	case spec.SamplerRandom:
		opts = append(opts, goptuna.StudyOptionSampler(newRandomSampler(seed)))
	case spec.SamplerCMAES:
		numeric := map[string]any{}
		for _, p := range sp.Params {
			if p.Kind == space.KindInt || p.Kind == space.KindFloat {
				numeric[p.Name] = distribution(p)
			}
		}
		if len(numeric) < 2 {
			return nil, fmt.Errorf("sampler cmaes needs at least 2 numeric parameters, the space has %d", len(numeric))
		}
		opts = append(opts,
			goptuna.StudyOptionSampler(newRandomSampler(seed)),
			goptuna.StudyOptionRelativeSampler(cmaes.NewSampler(cmaes.SamplerOptionSeed(seed))),
			goptuna.StudyOptionDefineSearchSpace(numeric))
	case spec.SamplerGrid:
		grid, err := sp.Grid()
		if err != nil {
			return nil, fmt.Errorf("sampler grid: %w", err)
		}
		// A seeded shuffle so a truncated grid still spreads over the space.
		rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
		rng.Shuffle(len(grid), func(i, j int) { grid[i], grid[j] = grid[j], grid[i] })
		s.grid = grid
		return s, nil
	default:
		return nil, fmt.Errorf("sampler %q: want tpe, random, cmaes or grid", kind)
	}
	// goptuna minimises; values are negated on the way in (CMA-ES ignores
	// the study direction, so minimising is the one convention all share).
	opts = append(opts, goptuna.StudyOptionDirection(goptuna.StudyDirectionMinimize),
		goptuna.StudyOptionLogger(nopLogger{}))
	study, err := goptuna.CreateStudy("servetune", opts...)
	if err != nil {
		return nil, fmt.Errorf("sampler %s: %w", kind, err)
	}
	s.study = study
	return s, nil
}

// Kind returns the sampler's kind.
func (s *Sampler) Kind() string { return s.kind }

// Proposal is one point the sampler asks to evaluate.
type Proposal struct {
	ID       int // the sampler's handle for Tell
	Settings space.Settings
}

// Ask proposes the next settings.
func (s *Sampler) Ask() (Proposal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.guide; g != nil {
		if g.fallback != nil {
			return g.fallback.Ask()
		}
		return g.ask()
	}
	if s.study == nil {
		if s.next >= len(s.grid) {
			return Proposal{}, ErrExhausted
		}
		s.next++
		return Proposal{ID: s.next - 1, Settings: s.grid[s.next-1].Clone()}, nil
	}
	// A configuration already proposed is not measured twice: ask again
	// (the duplicate stays an unfinished goptuna trial, which the samplers
	// ignore), and after maxDuplicates tries take a random new one.
	for try := 0; ; try++ {
		var p Proposal
		var err error
		if try < maxDuplicates {
			p, err = s.askOnce()
		} else {
			p, err = s.askRandom()
		}
		if err != nil {
			return Proposal{}, err
		}
		key := p.Settings.Key()
		if s.seen[key] && try <= maxDuplicates+maxDuplicates {
			continue
		}
		s.seen[key] = true
		return p, nil
	}
}

// maxDuplicates bounds the model's re-proposals of measured configurations
// before a random one is taken instead (which may also repeat in a small
// space; then the loop gives up avoiding duplicates).
const maxDuplicates = 16

func (s *Sampler) askOnce() (Proposal, error) {
	id, err := s.study.Storage.CreateNewTrial(s.study.ID)
	if err != nil {
		return Proposal{}, err
	}
	t := goptuna.Trial{Study: s.study, ID: id}
	s.asked++
	if err := t.CallRelativeSampler(); err != nil {
		return Proposal{}, fmt.Errorf("sampler %s: %w", s.kind, err)
	}
	set := make(space.Settings, len(s.params))
	for _, p := range s.params {
		v, err := suggest(&t, p)
		if err != nil {
			return Proposal{}, fmt.Errorf("sampler %s: %s: %w", s.kind, p.Name, err)
		}
		set[p.Name] = v
	}
	return Proposal{ID: id, Settings: set}, nil
}

// askRandom proposes uniformly at random, recorded as a goptuna trial.
func (s *Sampler) askRandom() (Proposal, error) {
	id, err := s.study.Storage.CreateNewTrial(s.study.ID)
	if err != nil {
		return Proposal{}, err
	}
	set := make(space.Settings, len(s.params))
	for _, p := range s.params {
		d := distribution(p)
		ir, err := s.random.Sample(s.study, goptuna.FrozenTrial{}, p.Name, d)
		if err != nil {
			return Proposal{}, err
		}
		if err := s.study.Storage.SetTrialParam(id, p.Name, ir, d); err != nil {
			return Proposal{}, err
		}
		set[p.Name] = external(p, ir)
	}
	return Proposal{ID: id, Settings: set}, nil
}

// external converts goptuna's internal value of p to a setting.
func external(p space.Param, ir float64) any {
	switch p.Kind {
	case space.KindInt:
		if p.Log {
			return roundInt(ir, p)
		}
		return int(math.Round(ir))
	case space.KindFloat:
		if p.Step > 0 {
			return roundFloat(ir)
		}
		return ir
	case space.KindBool:
		return ir >= 0.5
	}
	return p.Choices[int(ir)]
}

// Observe gives the guided sampler a proposal's whole result before Tell:
// whether the engine started, and the measured levels it refits the
// simulator to. Other kinds ignore it.
func (s *Sampler) Observe(id int, res trial.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.guide; g != nil {
		if c := g.ids[id]; c != nil {
			g.observe(c, res)
		}
	}
}

// Summary is a line on what the sampler did ("" for kinds with nothing to
// say).
func (s *Sampler) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guide == nil {
		return ""
	}
	return s.guide.summary()
}

// Tell reports the value of a proposal (higher is better), or that it
// failed.
func (s *Sampler) Tell(id int, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.guide; g != nil {
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
	if s.study == nil {
		return nil
	}
	return s.tell(id, value, failed)
}

// failureLoss is what a failure is told: worse than any success, yet finite
// so CMA-ES's spread test (max - min of recent values) stays a number.
const failureLoss = math.MaxFloat64 / 8

func (s *Sampler) tell(id int, value float64, failed bool) error {
	loss := -value
	if failed || math.IsNaN(value) {
		loss = failureLoss
	}
	// TPE and CMA-ES learn only from complete trials, so a failure is told
	// as a complete trial with the worst value rather than as "failed".
	if err := s.study.Storage.SetTrialValue(id, loss); err != nil {
		return err
	}
	return s.study.Storage.SetTrialState(id, goptuna.TrialStateComplete)
}

// Replay records an already evaluated point (from a resumed study) so the
// sampler continues from it.
func (s *Sampler) Replay(set space.Settings, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.guide; g != nil {
		g.replay(set, value, failed)
		if g.fallback != nil {
			return g.fallback.Replay(set, value, failed)
		}
		return nil
	}
	if s.study == nil {
		s.skipGrid(set)
		return nil
	}
	s.seen[set.Key()] = true
	id, err := s.study.Storage.CreateNewTrial(s.study.ID)
	if err != nil {
		return err
	}
	for _, p := range s.params {
		ir, err := internal(p, set[p.Name])
		if err != nil {
			return fmt.Errorf("replay %s: %w", p.Name, err)
		}
		if err := s.study.Storage.SetTrialParam(id, p.Name, ir, distribution(p)); err != nil {
			return fmt.Errorf("replay %s: %w", p.Name, err)
		}
	}
	return s.tell(id, value, failed)
}

// Reserve marks set as proposed without a result yet: an interrupted trial
// of a resumed study that runs again, so that Ask does not propose it while
// it runs. Its result comes later through Replay.
func (s *Sampler) Reserve(set space.Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.guide; g != nil {
		g.reserve(set)
		if g.fallback != nil {
			g.fallback.Reserve(set)
		}
		return
	}
	if s.study == nil {
		s.skipGrid(set)
		return
	}
	s.seen[set.Key()] = true
}

// skipGrid moves one not-yet-proposed grid point equal to set among the
// proposed ones.
func (s *Sampler) skipGrid(set space.Settings) {
	for i := s.next; i < len(s.grid); i++ {
		if sameSettings(s.grid[i], set) {
			s.grid[s.next], s.grid[i] = s.grid[i], s.grid[s.next]
			s.next++
			return
		}
	}
}

func sameSettings(a, b space.Settings) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if fmt.Sprint(v) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}

// distribution maps a parameter onto goptuna's distributions. Log-int
// parameters sample a log-uniform float that is rounded.
func distribution(p space.Param) any {
	switch p.Kind {
	case space.KindInt:
		if p.Log {
			return goptuna.LogUniformDistribution{Low: p.Low, High: p.High}
		}
		step := int(p.Step)
		if step <= 1 {
			return goptuna.IntUniformDistribution{Low: int(p.Low), High: int(p.High)}
		}
		return goptuna.StepIntUniformDistribution{Low: int(p.Low), High: int(p.High), Step: step}
	case space.KindFloat:
		if p.Log {
			return goptuna.LogUniformDistribution{Low: p.Low, High: p.High}
		}
		if p.Step > 0 {
			return goptuna.DiscreteUniformDistribution{Low: p.Low, High: p.High, Q: p.Step}
		}
		return goptuna.UniformDistribution{Low: p.Low, High: p.High}
	}
	return goptuna.CategoricalDistribution{Choices: choices(p)}
}

func choices(p space.Param) []string {
	vals := p.Choices
	if p.Kind == space.KindBool {
		vals = []any{false, true}
	}
	// Each proposal (and the preflight's, hundreds) asks for the labels: a
	// list of 9,999 values rebuilt every time allocated 750 MB for 6
	// trials. A long list's labels are built once per parsed list.
	long := len(vals) >= 64
	var key choiceKey
	if long {
		key = choiceKey{&vals[0], len(vals)}
		if out, ok := choiceCache.Load(key); ok {
			return out.([]string)
		}
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strconv.Itoa(i) + ":" + fmt.Sprint(v)
	}
	if long {
		if choiceCacheN.Add(1) > 256 {
			// Bounded: a process that parses many specs starts over.
			choiceCache.Clear()
			choiceCacheN.Store(1)
		}
		choiceCache.Store(key, out)
	}
	return out
}

// choiceKey names a parsed choice list by its backing array.
type choiceKey struct {
	first *any
	n     int
}

var (
	choiceCache  sync.Map // choiceKey -> []string
	choiceCacheN atomic.Int64
)

func suggest(t *goptuna.Trial, p space.Param) (any, error) {
	switch p.Kind {
	case space.KindInt:
		if p.Log {
			f, err := t.SuggestLogFloat(p.Name, p.Low, p.High)
			return roundInt(f, p), err
		}
		if step := int(p.Step); step > 1 {
			return t.SuggestStepInt(p.Name, int(p.Low), int(p.High), step)
		}
		return t.SuggestInt(p.Name, int(p.Low), int(p.High))
	case space.KindFloat:
		switch {
		case p.Log:
			return t.SuggestLogFloat(p.Name, p.Low, p.High)
		case p.Step > 0:
			v, err := t.SuggestDiscreteFloat(p.Name, p.Low, p.High, p.Step)
			return roundFloat(v), err
		}
		return t.SuggestFloat(p.Name, p.Low, p.High)
	}
	cs := choices(p)
	c, err := t.SuggestCategorical(p.Name, cs)
	if err != nil {
		return nil, err
	}
	for i, x := range cs {
		if x == c {
			if p.Kind == space.KindBool {
				return i == 1, nil
			}
			return p.Choices[i], nil
		}
	}
	return nil, fmt.Errorf("choice %q not in the parameter", c)
}

// roundInt rounds a log-sampled value to the parameter's integer grid.
func roundInt(f float64, p space.Param) int {
	step := math.Max(p.Step, 1)
	v := p.Low + math.Round((f-p.Low)/step)*step
	return int(math.Min(math.Max(v, p.Low), p.High))
}

// internal returns goptuna's internal representation of a stored value.
func internal(p space.Param, v any) (float64, error) {
	switch p.Kind {
	case space.KindInt, space.KindFloat:
		f, ok := space.Settings{"v": v}.Float("v")
		if !ok {
			return 0, fmt.Errorf("value %v is not a number", v)
		}
		return f, nil
	}
	vals := p.Choices
	if p.Kind == space.KindBool {
		vals = []any{false, true}
	}
	for i, x := range vals {
		if fmt.Sprint(x) == fmt.Sprint(v) {
			return float64(i), nil
		}
	}
	return 0, fmt.Errorf("value %v is not one of the choices", v)
}

// nopLogger silences goptuna, whose default logger writes to stdout.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}

// tpeStartupTrials is how many random proposals TPE makes before modelling.
const tpeStartupTrials = 10

// startupSampler proposes with random until startup trials are complete,
// then hands over to next (the TPE).
type startupSampler struct {
	startup int
	random  goptuna.Sampler
	next    goptuna.Sampler
}

func (s *startupSampler) Sample(st *goptuna.Study, t goptuna.FrozenTrial, name string, d any) (float64, error) {
	trials, err := st.GetTrials()
	if err != nil {
		return 0, err
	}
	done := 0
	for _, x := range trials {
		if x.State == goptuna.TrialStateComplete {
			if _, ok := x.InternalParams[name]; ok {
				done++
			}
		}
	}
	if done < s.startup {
		return s.random.Sample(st, t, name, d)
	}
	return s.next.Sample(st, t, name, d)
}

// randomSampler is uniform random search on a seeded math/rand/v2 source.
// goptuna v0.9.0's RandomSampler draws categorical values from the unseeded
// global source and never proposes the upper bound of an integer range.
type randomSampler struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newRandomSampler(seed int64) *randomSampler {
	return &randomSampler{rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed))}
}

func (s *randomSampler) Sample(_ *goptuna.Study, _ goptuna.FrozenTrial, _ string, dist any) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d := dist.(type) {
	case goptuna.UniformDistribution:
		return d.Low + s.rng.Float64()*(d.High-d.Low), nil
	case goptuna.LogUniformDistribution:
		lo, hi := math.Log(d.Low), math.Log(d.High)
		return math.Min(math.Exp(lo+s.rng.Float64()*(hi-lo)), d.High), nil
	case goptuna.IntUniformDistribution:
		return float64(d.Low + s.rng.IntN(d.High-d.Low+1)), nil
	case goptuna.StepIntUniformDistribution:
		return float64(d.Low + d.Step*s.rng.IntN((d.High-d.Low)/d.Step+1)), nil
	case goptuna.DiscreteUniformDistribution:
		n := int(math.Floor((d.High-d.Low)/d.Q+1e-9)) + 1
		return d.Low + d.Q*float64(s.rng.IntN(n)), nil
	case goptuna.CategoricalDistribution:
		return float64(s.rng.IntN(len(d.Choices))), nil
	}
	return 0, goptuna.ErrUnknownDistribution
}

// roundFloat drops float noise such as 0.8500000000000001 from stepped values.
func roundFloat(v float64) float64 { return math.Round(v*1e9) / 1e9 }

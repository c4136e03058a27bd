package sampler

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/c-bata/goptuna"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
)

// optuna is a sampler on a goptuna study (TPE, random, CMA-ES): it
// proposes through the study's samplers, and keeps a configuration from
// being measured twice.
type optuna struct {
	mu     sync.Mutex
	kind   string
	params []space.Param
	study  *goptuna.Study
	asked  int
	seen   map[string]bool // configurations proposed or replayed
	random *randomSampler  // fallback when the model repeats itself
}

// newOptuna builds kind's goptuna study over searchSpace with opts.
func newOptuna(kind string, searchSpace space.Space, seed int64, opts ...goptuna.StudyOption) (*optuna, error) {
	// goptuna minimises; values are negated on the way in (CMA-ES ignores
	// the study direction, so minimising is the one convention all share).
	opts = append(opts, goptuna.StudyOptionDirection(goptuna.StudyDirectionMinimize),
		goptuna.StudyOptionLogger(nopLogger{}))
	study, err := goptuna.CreateStudy("servetune", opts...)
	if err != nil {
		return nil, fmt.Errorf("sampler %s: %w", kind, err)
	}
	return &optuna{kind: kind, params: searchSpace.Params, study: study, seen: map[string]bool{},
		random: newRandomSampler(seed ^ 0x7ea5)}, nil
}

// Kind returns the sampler's kind.
func (s *optuna) Kind() string { return s.kind }

// Ask proposes the next settings. A configuration already proposed is not
// measured twice: ask again (the duplicate stays an unfinished goptuna
// trial, which the samplers ignore), and after maxDuplicates tries take a
// random new one.
func (s *optuna) Ask() (Proposal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

func (s *optuna) askOnce() (Proposal, error) {
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
func (s *optuna) askRandom() (Proposal, error) {
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
			return RoundInt(ir, p)
		}
		return int(math.Round(ir))
	case space.KindFloat:
		if p.Step > 0 {
			return RoundFloat(ir)
		}
		return ir
	case space.KindBool:
		return ir >= 0.5
	}
	return p.Choices[int(ir)]
}

// Observe ignores the result: Tell's value is all the model learns from.
func (s *optuna) Observe(int, trial.Result) {}

// Summary says nothing: the model has no decisions to report.
func (s *optuna) Summary() string { return "" }

// Tell reports the value of a proposal (higher is better), or that it
// failed.
func (s *optuna) Tell(id int, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tell(id, value, failed)
}

// failureLoss is what a failure is told: worse than any success, yet finite
// so CMA-ES's spread test (max - min of recent values) stays a number.
const failureLoss = math.MaxFloat64 / 8

func (s *optuna) tell(id int, value float64, failed bool) error {
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
func (s *optuna) Replay(set space.Settings, value float64, failed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// Reserve marks set as proposed, so Ask does not propose it again.
func (s *optuna) Reserve(set space.Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[set.Key()] = true
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
			return RoundInt(f, p), err
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
			return RoundFloat(v), err
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

// RoundInt rounds a log-sampled value to the parameter's integer grid.
func RoundInt(f float64, p space.Param) int {
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

// RoundFloat drops float noise such as 0.8500000000000001 from stepped values.
func RoundFloat(v float64) float64 { return math.Round(v*1e9) / 1e9 }

// Package samplerbench measures samplers against the exhaustive optimum of
// a discrete study space: how many trials each needs to reach a share of
// the best value, over seeds. `make sampler-bench` runs its command
// (cmd/) on examples/sampler-bench.yaml, every configuration evaluated by
// the simulated engine in virtual time.
package samplerbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// ParseVirtualSpec parses the study spec at path for a benchmark, named
// bench in its errors, whose trials run in virtual time: the spec's
// launcher must be of kind virtual.
func ParseVirtualSpec(path, bench string) (*spec.Spec, *simulated.Virtual, error) {
	study, l, err := tuner.ParseSpecFile(path)
	if err != nil {
		return nil, nil, err
	}
	v, ok := l.(*simulated.Virtual)
	if !ok {
		return nil, nil, fmt.Errorf("%s: the %s benchmark needs launcher kind virtual, not %s", path, bench, study.Launcher.Kind)
	}
	return study, v, nil
}

// ObjectiveFunc scores one configuration: higher is better; failed means
// the configuration does not run (out of memory, infeasible).
type ObjectiveFunc func(space.Settings) (value float64, failed bool)

// Memo caches an ObjectiveFunc per configuration, so exhaustive search and
// many sampler runs evaluate each configuration once. Safe for concurrent use.
type Memo struct {
	mu    sync.Mutex
	f     ObjectiveFunc
	cache map[string][2]float64
}

// NewMemo wraps f.
func NewMemo(f ObjectiveFunc) *Memo { return &Memo{f: f, cache: map[string][2]float64{}} }

// Eval returns f(s), computing it at most once per configuration.
func (m *Memo) Eval(s space.Settings) (float64, bool) {
	key := s.Key()
	m.mu.Lock()
	if r, ok := m.cache[key]; ok {
		m.mu.Unlock()
		return r[0], r[1] != 0
	}
	m.mu.Unlock()
	v, failed := m.f(s)
	f := 0.0
	if failed {
		f = 1
	}
	m.mu.Lock()
	m.cache[key] = [2]float64{v, f}
	m.mu.Unlock()
	return v, failed
}

// Optimum is the exhaustive search of a discrete space.
type Optimum struct {
	Value   float64 // best value over every configuration
	Configs int     // configurations in the space
	Failed  int     // configurations that do not run (or meet the SLOs at no level)
	OOM     int     // configurations whose engine does not start for memory
	Near    int     // configurations within Frac of Value
	Frac    float64 // e.g. 0.99
}

// Exhaustive evaluates every configuration of searchSpace. parallel bounds the
// evaluations in flight.
func Exhaustive(ctx context.Context, searchSpace space.Space, f *Memo, frac float64, parallel int) (Optimum, error) {
	grid, err := searchSpace.Grid()
	if err != nil {
		return Optimum{}, err
	}
	vals := make([]float64, len(grid))
	fails := make([]bool, len(grid))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				vals[i], fails[i] = f.Eval(grid[i])
			}
		}()
	}
	for i := range grid {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Optimum{}, err
	}
	o := Optimum{Configs: len(grid), Value: math.Inf(-1), Frac: frac}
	for i := range grid {
		if fails[i] {
			o.Failed++
		} else if vals[i] > o.Value {
			o.Value = vals[i]
		}
	}
	if math.IsInf(o.Value, -1) || o.Value <= 0 {
		return o, errors.New("no configuration of the space runs with a positive objective")
	}
	for i := range grid {
		if !fails[i] && vals[i] >= frac*o.Value {
			o.Near++
		}
	}
	return o, nil
}

// TrialsToReach runs a fresh sampler of kind with seed against f and
// returns how many trials it needed to reach target; budget+1 when it did
// not within budget.
func TrialsToReach(kind string, searchSpace space.Space, seed int64, f *Memo, target float64, budget int) (int, error) {
	s, err := sampler.New(kind, searchSpace, seed)
	if err != nil {
		return 0, err
	}
	for n := 1; n <= budget; n++ {
		p, err := s.Ask()
		if errors.Is(err, sampler.ErrExhausted) {
			break
		}
		if err != nil {
			return 0, err
		}
		v, failed := f.Eval(p.Settings)
		if !failed && v >= target {
			return n, nil
		}
		if err := s.Tell(p.ID, v, failed); err != nil {
			return 0, err
		}
	}
	return budget + 1, nil
}

// memoFile is the on-disk form of a Memo.
type memoFile struct {
	Values map[string][2]float64 `json:"values"`
}

// Save writes the cached evaluations to path (creating its directory).
func (m *Memo) Save(path string) error {
	m.mu.Lock()
	data, err := json.Marshal(memoFile{Values: m.cache})
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Load adds the evaluations cached at path and returns how many it read.
func (m *Memo) Load(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var f memoFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range f.Values {
		m.cache[k] = v
	}
	return len(f.Values), nil
}

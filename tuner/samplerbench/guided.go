package samplerbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner"
	_ "github.com/servetune/servetune/tuner/guided" // the guided sampler SearchReality measures
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// Reality is a stand-in for a real engine in the guided benchmark: the
// simulated engine with every constant (efficiencies, overheads and the
// memory model's reservations) moved by a seeded factor, so its optimum
// and its out-of-memory boundary are not where the stock simulator, which
// the guided sampler starts from, puts them; a structural reality also
// deviates from the model in kind (sim.Deviation).
type Reality struct {
	Seed      int64
	Constants sim.Constants
	Kind      string     // the structural kind ("" = constants only)
	spec      *spec.Spec // the study spec, no precheck
	// launcher is the perturbed virtual engine the reality's trials run on.
	launcher *simulated.Virtual

	mu      sync.Mutex
	results map[string]trial.Result
}

// NewReality perturbs engine e's stock constants: each is multiplied by a
// factor drawn uniformly from [1-spread, 1+spread] (seeded), within its
// range.
func NewReality(study *spec.Spec, seed int64, spread float64) (*Reality, error) {
	return newReality(study, seed, spread, Structural{})
}

// Structural is one kind of structural reality: an effect the simulator's
// model lacks or weighs differently (sim.Deviation).
type Structural struct {
	Name      string
	Deviation sim.Deviation
}

// StructuralKinds are the structural realities' kinds, in the order the
// benchmark cycles through them. The figures are sized for
// examples/guided-bench.yaml's workload (prompts of median 512 tokens,
// lognormal sigma 0.6, plus 128 to 512 output tokens):
//   - long-attention: attention 25% slower past 1,024 tokens of context.
//     About 21% of that workload's decoding sequences and 38% of its
//     attention work lie past 1,024: a share that changes which settings
//     win, where at 512 (87% of the work) the slowdown would be nearly
//     uniform, one attention efficiency a refit of the constants absorbs,
//     and at 1,536 (13%) it would hardly show.
//   - admit-every-4: new requests join the batch every 4th step only.
//   - shared-prefix: the first 256 tokens of every prompt are one cached
//     prefix (prefix caching on, where the model sees no shared prefix).
//   - seq-reserve: 24 MiB per GPU per request slot reserved at start-up,
//     so the KV cache shrinks as max_running_requests grows (160 slots:
//     3.75 GiB).
//   - sync-host: the host's step work does not overlap the GPU's.
func StructuralKinds() []Structural {
	return []Structural{
		{"long-attention", sim.Deviation{LongAttention: 1.25, LongContext: 1024}},
		{"admit-every-4", sim.Deviation{AdmitEvery: 4}},
		{"shared-prefix", sim.Deviation{SharedPrefix: 256}},
		{"seq-reserve", sim.Deviation{SeqReserveMiB: 24}},
		{"sync-host", sim.Deviation{SyncHost: true}},
	}
}

// NewStructuralReality is reality seed (perturbed as NewReality does)
// with the structural kind seed-1 (mod the kinds) of StructuralKinds.
func NewStructuralReality(study *spec.Spec, seed int64, spread float64) (*Reality, error) {
	kinds := StructuralKinds()
	return newReality(study, seed, spread, kinds[int((seed-1)%int64(len(kinds)))])
}

func newReality(study *spec.Spec, seed int64, spread float64, kind Structural) (*Reality, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7ea1))
	c := sim.StockConstants(study.Engine)
	for _, name := range sim.ConstantNames() {
		v, _ := c.Get(name)
		lo, hi, _ := sim.ConstantRange(name)
		f := 1 + spread*(2*rng.Float64()-1)
		if err := c.Set(name, math.Min(math.Max(v*f, lo), hi)); err != nil {
			return nil, err
		}
	}
	rs := *study
	rs.Tuner.Precheck = false
	rs.Quality = nil
	v := &simulated.Virtual{GPU: study.Hardware.GPU, ModelConfig: study.Launcher.ModelConfig, Constants: c, Deviation: kind.Deviation}
	return &Reality{Seed: seed, Constants: c, Kind: kind.Name, spec: &rs, launcher: v, results: map[string]trial.Result{}}, nil
}

// Run measures set on the reality (once; later calls return the same
// result).
func (r *Reality) Run(ctx context.Context, set space.Settings) trial.Result {
	k := set.Key()
	r.mu.Lock()
	res, ok := r.results[k]
	r.mu.Unlock()
	if ok {
		return res
	}
	res = (&tuner.TrialRunner{Spec: r.spec, Launcher: r.launcher, Memory: memory.Model{}, Bootstrap: 1}).Evaluate(ctx, 0, set, nil)
	// Keep the levels' summaries only (all the guided sampler's refit
	// reads): the per-request records, each with its token times, of
	// every configuration of a space take gigabytes per reality.
	for i := range res.Levels {
		res.Levels[i].Records = nil
	}
	res.GPU, res.LogTail = nil, ""
	r.mu.Lock()
	r.results[k] = res
	r.mu.Unlock()
	return res
}

// Value is the objective's value of a result (ok false: failed or no level
// met the SLOs).
func (r *Reality) Value(set space.Settings, res trial.Result) (float64, bool) {
	if res.Status != measure.StatusOK {
		return 0, false
	}
	study := r.spec
	return recommend.TrialValue(recommend.PointsOf(0, set, study.Hardware.PricePerGPUHour, res.Levels), study.Tuner.Objective, study.SLO)
}

// Optimum measures every configuration of the space on the reality.
func (r *Reality) Optimum(ctx context.Context, frac float64) (Optimum, error) {
	grid, err := r.spec.Space.Grid()
	if err != nil {
		return Optimum{}, err
	}
	jobs := make(chan space.Settings)
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Go(func() {
			for s := range jobs {
				r.Run(ctx, s)
			}
		})
	}
	for _, s := range grid {
		jobs <- s
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Optimum{}, err
	}
	obj := r.spec.Tuner.Objective
	o := Optimum{Configs: len(grid), Frac: frac}
	vals := make([]float64, 0, len(grid))
	for _, s := range grid {
		res := r.Run(ctx, s)
		if res.Failure == engine.FailOOM {
			o.OOM++
		}
		v, ok := r.Value(s, res)
		if !ok {
			o.Failed++
			continue
		}
		if !obj.Maximize {
			v = 1 / v // higher is better from here on
		}
		vals = append(vals, v)
		o.Value = math.Max(o.Value, v)
	}
	if o.Value <= 0 {
		return o, errors.New("no configuration of the space runs with a positive objective on this reality")
	}
	for _, v := range vals {
		if v >= frac*o.Value {
			o.Near++
		}
	}
	return o, nil
}

// Search is one sampler's run against a reality.
type Search struct {
	Trials     int // launches until a measurement reached the target (budget+1: never)
	OOM        int // of those launches, engines that did not start for memory
	Prechecked int // proposals the memory precheck refused without launching
	Stopped    bool
}

// SearchReality runs sampler kind (seeded) on the reality until a launch
// measures at least target (in "higher is better" units) or budget
// launches. With precheck, samplers other than guided get the stock
// memory model's precheck (a refused proposal is not a launch); without
// it they launch every proposal, as a tuner without a model of the engine
// does. The guided sampler decides with its learned boundary and launches
// what it proposes.
func SearchReality(ctx context.Context, study *spec.Spec, r *Reality, kind string, seed int64, target float64, budget int, precheck bool, note func(string)) (Search, error) {
	ss := *study
	ss.Tuner.Sampler, ss.Tuner.Seed = kind, seed
	s, err := sampler.ForStudy(ctx, &ss, sampler.Hooks{Note: note})
	if err != nil {
		return Search{}, err
	}
	var pre *tuner.TrialRunner
	if kind != spec.SamplerGuided && precheck {
		pre = &tuner.TrialRunner{Spec: &ss, Memory: memory.Model{}}
	}
	var out Search
	for proposals := 0; out.Trials < budget && proposals < 4*budget; proposals++ {
		p, err := s.Ask()
		if errors.Is(err, sampler.ErrExhausted) {
			out.Stopped = true
			break
		}
		if err != nil {
			return out, err
		}
		if pre != nil && pre.Refuses(p.Settings) {
			out.Prechecked++
			if err := s.Tell(p.ID, 0, true); err != nil {
				return out, err
			}
			continue
		}
		out.Trials++
		res := r.Run(ctx, p.Settings)
		if note != nil {
			v, _ := r.Value(p.Settings, res)
			note(fmt.Sprintf("%s launch %d: %s -> %s %s %.4g (target %.4g)", kind, out.Trials, p.Settings.Key(), res.Status, res.Failure, v, target))
		}
		if res.Failure == engine.FailOOM {
			out.OOM++
		}
		v, ok := r.Value(p.Settings, res)
		u := v
		if ok && !study.Tuner.Objective.Maximize {
			u = 1 / v
		}
		if ok && u >= target {
			return out, nil
		}
		score := v
		if !study.Tuner.Objective.Maximize {
			score = -v
		}
		s.Observe(p.ID, res)
		if err := s.Tell(p.ID, score, !ok); err != nil {
			return out, err
		}
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	out.Trials = budget + 1
	return out, nil
}

// String is a search's figures for the per-reality lines.
func (s Search) String() string {
	return fmt.Sprintf("%d (oom %d)", s.Trials, s.OOM)
}

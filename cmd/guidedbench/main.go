// Command guidedbench measures the guided sampler against TPE and random
// search on "realities": the simulated engine with every constant moved by
// up to ±30% (seeded), so the real optimum and the out-of-memory boundary
// are not where the stock simulator, the guided sampler's prior, puts
// them; and structural realities, which besides deviate from the model in
// kind (samplerbench.StructuralKinds: attention slower past a context
// length, a different admission cadence, a shared cached prefix, a memory
// reservation that grows with the batch, a host that does not overlap the
// GPU). `make guided-bench` runs it on examples/guided-bench.yaml; its
// last lines are
//
//	guided-bench: guided=N tpe=M random=R p90_guided=P oom_launches_guided=A oom_launches_tpe=B
//	guided-bench structural: guided=N tpe=M random=R p90_guided=P oom_launches_guided=A oom_launches_tpe=B
//
// with N, M, R the median launches (over the realities) until a
// measurement reached 99% of the reality's optimum, P the guided sampler's
// 90th percentile, and A, B the engines that did not start for memory,
// summed over the realities. -sets, -from and -realities run a part (the
// whole takes tens of minutes on two cores): the lines of parts are not
// summed, the per-reality lines are.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/tuner/samplerbench"
	"github.com/servetune/servetune/tuner/spec"
)

func main() {
	realities := flag.Int("realities", 10, "realities per set (seeds from..from+N-1)")
	from := flag.Int64("from", 1, "first reality's seed")
	sets := flag.String("sets", "perturbed,structural", "comma-separated sets of realities: perturbed (constants only), structural (constants and one deviation in kind)")
	spread := flag.Float64("spread", 0.3, "largest relative change of each simulator constant")
	budget := flag.Int("budget", 100, "most launches per search")
	frac := flag.Float64("frac", 0.99, "target as a fraction of the reality's optimum")
	samplers := flag.String("samplers", "guided,tpe,random", "comma-separated samplers")
	precheck := flag.Bool("precheck", false, "give TPE and random search the stock memory model's precheck")
	verbose := flag.Bool("v", false, "print every launch and the guided sampler's notes")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: guidedbench [flags] STUDY.yaml")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b := bench{from: *from, realities: *realities, spread: *spread, budget: *budget, frac: *frac,
		kinds: strings.Split(*samplers, ","), precheck: *precheck, verbose: *verbose, out: os.Stdout}
	if err := b.run(ctx, flag.Arg(0), strings.Split(*sets, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "guided-bench:", err)
		os.Exit(1)
	}
}

// bench is one invocation's settings.
type bench struct {
	from              int64
	realities, budget int
	spread, frac      float64
	kinds             []string // samplers
	precheck, verbose bool
	out               io.Writer
}

func (b bench) run(ctx context.Context, path string, sets []string) error {
	study, _, err := samplerbench.ParseVirtualSpec(path, "guided")
	if err != nil {
		return err
	}
	for _, set := range sets {
		var (
			newReality func(*spec.Spec, int64, float64) (*samplerbench.Reality, error)
			label      string
		)
		switch set {
		case "perturbed":
			newReality, label = samplerbench.NewReality, "guided-bench"
		case "structural":
			newReality, label = samplerbench.NewStructuralReality, "guided-bench structural"
		default:
			return fmt.Errorf("-sets: unknown set %q (want perturbed or structural)", set)
		}
		if err := b.runSet(ctx, study, newReality, label); err != nil {
			return err
		}
	}
	return nil
}

// runSet searches each reality of one set and prints its lines.
func (b bench) runSet(ctx context.Context, study *spec.Spec, newReality func(*spec.Spec, int64, float64) (*samplerbench.Reality, error), label string) error {
	out := b.out
	start := time.Now()
	trials := map[string][]int{}
	oom := map[string]int{}
	for seed := b.from; seed < b.from+int64(b.realities); seed++ {
		r, err := newReality(study, seed, b.spread)
		if err != nil {
			return err
		}
		opt, err := r.Optimum(ctx, b.frac)
		if err != nil {
			return fmt.Errorf("reality %d: %w", seed, err)
		}
		name := fmt.Sprintf("reality %2d", seed)
		if r.Kind != "" {
			name += " " + r.Kind
		}
		line := fmt.Sprintf("%s: %d configs, %d do not start, %d fail or miss the SLOs, optimum %.4g, %d (%.1f%%) within %.0f%%:",
			name, opt.Configs, opt.OOM, opt.Failed, opt.Value, opt.Near, 100*float64(opt.Near)/float64(opt.Configs), 100*(1-b.frac))
		for _, kind := range b.kinds {
			var note func(string)
			if b.verbose {
				note = func(m string) { fmt.Fprintf(out, "  %s %s\n", name, m) }
			}
			s, err := samplerbench.SearchReality(ctx, study, r, kind, seed, b.frac*opt.Value, b.budget, b.precheck, note)
			if err != nil {
				return fmt.Errorf("reality %d, %s: %w", seed, kind, err)
			}
			trials[kind] = append(trials[kind], s.Trials)
			oom[kind] += s.OOM
			line += fmt.Sprintf("  %s %s", kind, s)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "%d realities in %s\n", b.realities, time.Since(start).Round(time.Second))
	fmt.Fprintln(out, setLine(label, trials, oom))
	return nil
}

// setLine is a set's last line: each sampler's median launches, the guided
// sampler's 90th percentile (measure's one definition: linear
// interpolation between the closest ranks), each to 3 significant digits
// (an interpolated percentile printed whole read 3.3999999999999986), and
// the launches that did not start for memory.
func setLine(label string, trials map[string][]int, oom map[string]int) string {
	return fmt.Sprintf("%s: guided=%s tpe=%s random=%s p90_guided=%s oom_launches_guided=%d oom_launches_tpe=%d",
		label, sig3(measure.Median(trials["guided"])), sig3(measure.Median(trials["tpe"])), sig3(measure.Median(trials["random"])),
		sig3(measure.PercentileOf(trials["guided"], 90)), oom["guided"], oom["tpe"])
}

// sig3 prints x rounded to 3 significant digits, without an exponent below
// 10^21 (NaN, for a sampler not run, as NaN).
func sig3(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

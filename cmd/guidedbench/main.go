// Command guidedbench measures the guided sampler against TPE and random
// search on "realities": the simulated engine with every constant moved by
// up to ±30% (seeded), so the real optimum and the out-of-memory boundary
// are not where the stock simulator, the guided sampler's prior, puts
// them. `make guided-bench` runs it on examples/guided-bench.yaml; its last
// line is
//
//	guided-bench: guided=N tpe=M random=R p90_guided=P oom_launches_guided=A oom_launches_tpe=B
//
// with N, M, R the median launches (over the realities) until a
// measurement reached 99% of the reality's optimum, P the guided sampler's
// 90th percentile, and A, B the engines that did not start for memory,
// summed over the realities.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/samplerbench"
	"github.com/servetune/servetune/launcher/simulated"
	"github.com/servetune/servetune/tuner/spec"
)

func main() {
	realities := flag.Int("realities", 10, "perturbed realities (seeds 1..N)")
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
	if err := run(ctx, flag.Arg(0), *realities, *spread, *budget, *frac, strings.Split(*samplers, ","), *precheck, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "guided-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, path string, realities int, spread float64, budget int, frac float64, kinds []string, precheck, verbose bool, out io.Writer) error {
	sp, err := spec.ParseSpecFile(path)
	if err != nil {
		return err
	}
	if _, ok := sp.Launcher.Launcher.(*simulated.Virtual); !ok {
		return fmt.Errorf("%s: the guided benchmark needs launcher kind virtual, not %s", path, sp.Launcher.Kind)
	}
	start := time.Now()
	trials := map[string][]int{}
	oom := map[string]int{}
	for seed := int64(1); seed <= int64(realities); seed++ {
		r, err := samplerbench.NewReality(sp, seed, spread)
		if err != nil {
			return err
		}
		opt, err := r.Optimum(ctx, frac)
		if err != nil {
			return fmt.Errorf("reality %d: %w", seed, err)
		}
		line := fmt.Sprintf("reality %2d: %d configs, %d do not start, %d fail or miss the SLOs, optimum %.4g, %d (%.1f%%) within %.0f%%:",
			seed, opt.Configs, opt.OOM, opt.Failed, opt.Value, opt.Near, 100*float64(opt.Near)/float64(opt.Configs), 100*(1-frac))
		for _, kind := range kinds {
			var note func(string)
			if verbose {
				note = func(m string) { fmt.Fprintf(out, "  reality %d %s\n", seed, m) }
			}
			s, err := samplerbench.SearchReality(ctx, sp, r, kind, seed, frac*opt.Value, budget, precheck, note)
			if err != nil {
				return fmt.Errorf("reality %d, %s: %w", seed, kind, err)
			}
			trials[kind] = append(trials[kind], s.Trials)
			oom[kind] += s.OOM
			line += fmt.Sprintf("  %s %s", kind, s)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "%d realities in %s\n", realities, time.Since(start).Round(time.Second))
	fmt.Fprintf(out, "guided-bench: guided=%g tpe=%g random=%g p90_guided=%g oom_launches_guided=%d oom_launches_tpe=%d\n",
		measure.Median(trials["guided"]), measure.Median(trials["tpe"]), measure.Median(trials["random"]),
		measure.PercentileOf(trials["guided"], 90), oom["guided"], oom["tpe"])
	return nil
}

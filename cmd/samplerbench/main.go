// Command samplerbench measures how many trials each sampler needs to reach
// 99% of the exhaustive optimum of a discrete study space, evaluating every
// configuration with the simulated engine in virtual time. `make
// sampler-bench` runs it on examples/sampler-bench.yaml; its last line is
//
//	sampler-bench: tpe=N random=M optimum=V configs=C near=P
//
// with N and M the median trials over 30 seeds and P the percentage of
// configurations within 99% of the optimum (how hard the space is).
//
// The exhaustive search takes under a minute on two cores; its evaluations
// are cached in .servetune/ keyed by the spec and this binary, so a rerun
// of unchanged code is instant.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/samplerbench"
)

func main() {
	seeds := flag.Int("seeds", 30, "sampler seeds per sampler")
	budget := flag.Int("budget", 400, "most trials per sampler run")
	frac := flag.Float64("frac", 0.99, "target as a fraction of the optimum")
	cacheDir := flag.String("cache", ".servetune", "directory for cached evaluations (\"\" = none)")
	samplers := flag.String("samplers", "tpe,random", "comma-separated samplers to compare")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: samplerbench [flags] STUDY.yaml")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, flag.Arg(0), *seeds, *budget, *frac, *cacheDir, strings.Split(*samplers, ","), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sampler-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, path string, seeds, budget int, frac float64, cacheDir string, kinds []string, out io.Writer) error {
	study, l, err := samplerbench.ParseVirtualSpec(path, "sampler")
	if err != nil {
		return err
	}
	// Ranking needs no confidence intervals: one bootstrap resample.
	ev := &tuner.TrialRunner{Spec: study, Launcher: l, Memory: memory.Model{}, Bootstrap: 1}
	memo := samplerbench.NewMemo(func(s space.Settings) (float64, bool) {
		res := ev.Evaluate(ctx, 0, s, nil)
		if res.Status != measure.StatusOK {
			return 0, true
		}
		v, ok := recommend.TrialValue(recommend.PointsOf(0, s, study.Hardware.PricePerGPUHour, res.Levels), study.Tuner.Objective, study.SLO)
		return v, !ok
	})
	cache := ""
	if cacheDir != "" {
		cache = cachePath(cacheDir, study.Text)
		if n, err := memo.Load(cache); err == nil {
			fmt.Fprintf(out, "loaded %d cached evaluations from %s\n", n, cache)
		}
	}
	start := time.Now()
	opt, err := samplerbench.Exhaustive(ctx, study.Space, memo, frac, 2)
	if err != nil {
		return err
	}
	near := 100 * float64(opt.Near) / float64(opt.Configs)
	fmt.Fprintf(out, "space: %d configurations, %d infeasible, optimum %s=%.4g, %d (%.2f%%) within %g%% (%s)\n",
		opt.Configs, opt.Failed, study.Tuner.Objective.Metric, opt.Value, opt.Near, near, frac*100, time.Since(start).Round(time.Millisecond))
	if cache != "" {
		if err := memo.Save(cache); err != nil {
			fmt.Fprintf(out, "cache not saved: %v\n", err)
		}
	}
	medians := map[string]float64{}
	for _, kind := range kinds {
		counts := make([]int, 0, seeds)
		for seed := 1; seed <= seeds; seed++ {
			n, err := samplerbench.TrialsToReach(kind, study.Space, int64(seed), memo, frac*opt.Value, budget)
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", kind, seed, err)
			}
			counts = append(counts, n)
		}
		medians[kind] = measure.Median(counts)
		fmt.Fprintf(out, "%-7s trials to reach %g%% by seed: %v  median %g\n", kind, frac*100, counts, medians[kind])
	}
	var b strings.Builder
	b.WriteString("sampler-bench:")
	for _, kind := range kinds {
		fmt.Fprintf(&b, " %s=%g", kind, medians[kind])
	}
	fmt.Fprintf(&b, " optimum=%.4g configs=%d near=%.2f", opt.Value, opt.Configs, near)
	fmt.Fprintln(out, b.String())
	return nil
}

// cachePath keys the cache by the spec and this executable, so a change to
// the simulator (a new binary) never reads stale evaluations.
func cachePath(dir, spec string) string {
	h := sha256.New()
	h.Write([]byte(spec))
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			_, _ = io.Copy(h, f)
			f.Close()
		}
	}
	return filepath.Join(dir, "sampler-bench-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")
}

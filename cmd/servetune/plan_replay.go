package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/fleet/replay"
)

// maxReplaySpeed bounds --replay-speed: past it a replica's engine step
// is shorter on the real clock than this machine can emit its tokens.
const maxReplaySpeed = 1000

// replayTolerance is how far, in points of SLO attainment, a replay may
// land from its plan and still agree with it.
const replayTolerance = 5.0

// replayPlan runs the plan's policy p for real (internal/fleet/replay)
// and prints what it measured beside the plan's row. Only a failure to
// run is an error; a replay that disagrees with its plan says so.
func replayPlan(cmd *cobra.Command, f *planFlags, q planQuestion, rep planReport, p fleet.Result, kvTokens int, engineArgs []string) error {
	exe, err := os.Executable()
	if err != nil {
		return failedError(fmt.Errorf("--replay: the servetune binary: %w", err))
	}
	stderr := cmd.ErrOrStderr()
	span := q.reqs[len(q.reqs)-1].At
	every := time.Duration(min(60, max(5, span/f.replaySpeed/10)) * float64(time.Second))
	label := fmt.Sprintf("plan-replay-%d", os.Getpid())
	fmt.Fprintf(stderr, "replay: %s at %gx: %d requests over %.1f min of traffic, about %.1f min here; replicas labelled %s\n",
		p.Policy.Name(), f.replaySpeed, len(q.reqs), span/60, span/f.replaySpeed/60, label)
	res, err := replay.Run(cmd.Context(), q.reqs, replay.Options{
		Binary: exe, EngineArgs: engineArgs, Speed: f.replaySpeed, Policy: p.Policy, UpDelay: rep.UpDelay,
		SLO: q.slo, KVTokens: kvTokens, Label: label, Seed: f.seed, Log: stderr, Every: every})
	if err != nil {
		if errors.Is(err, cmd.Context().Err()) {
			return failedError(fmt.Errorf("replay: interrupted; every replica stopped"))
		}
		return failedError(fmt.Errorf("replay: %w", err))
	}
	printReplay(cmd.OutOrStdout(), f.replaySpeed, planLine(p, rep.GPUs, rep.Price), p.Policy.Name(), res, rep.GPUs)
	return nil
}

// printReplay prints the plan's row and the replay's, and how far apart
// their attainments are.
func printReplay(w io.Writer, speed float64, plan planResult, name string, res replay.Result, gpus int) {
	fmt.Fprintf(w, "replay of %s at %gx on this machine: %d replicas started, %.1f s of wall time for %.1f min of traffic\n",
		name, speed, res.Replicas, res.Wall.Seconds(), res.Duration/60)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tSLO met\tpeak\tmean\tGPU-h\tprefix hits\trequests\tfailed\t")
	fmt.Fprintf(tw, "plan\t%.2f%%\t%d\t%.1f\t%.2f\t%.1f%%\t%d\t%d\t\n", 100*plan.Attainment, plan.PeakReplicas, plan.MeanReplicas,
		plan.GPUHours, 100*plan.PrefixHitRate, plan.Requests, plan.Failed)
	fmt.Fprintf(tw, "replay\t%.2f%%\t%d\t%.1f\t%.2f\t%.1f%%\t%d\t%d\t\n", 100*res.Attainment, res.PeakReplicas, res.MeanReplicas,
		res.ReplicaHours*float64(gpus), 100*res.PrefixHitRate(), res.Requests, res.Failed)
	tw.Flush()
	d := 100 * (res.Attainment - plan.Attainment)
	if math.Abs(d) <= replayTolerance {
		fmt.Fprintf(w, "difference: %+.2f points of SLO attainment: the replay agrees with the plan (within %g points)\n", d, replayTolerance)
		return
	}
	fmt.Fprintf(w, "difference: %+.2f points of SLO attainment: the replay DISAGREES with the plan (more than %g points apart)\n", d, replayTolerance)
}

package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/load/gpu"
)

// newGPUsCmd lists the local GPUs NVML sees, with one live reading each,
// or (--watch) samples them for a while.
func newGPUsCmd() *cobra.Command {
	var jsonOut string
	var watch, every time.Duration
	cmd := &cobra.Command{
		Use:   "gpus [--watch DURATION]",
		Short: "List local GPUs seen by NVML (power, memory, utilisation), or sample them (--watch)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if watch < 0 || every <= 0 {
				return usageErrorf("--watch %v / --interval %v: want a duration >= 0 and an interval > 0", watch, every)
			}
			if watch > 0 && jsonOut != "" {
				return usageErrorf("--json and --watch: --watch prints its readings as they come, not as JSON")
			}
			out := tableOut(cmd, jsonOut)
			n, err := gpu.Open()
			if err != nil {
				// Not a failure: the tool works without telemetry.
				if jsonOut != "" {
					if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, map[string]any{"gpus": []any{}, "error": err.Error()}); err != nil {
						return err
					}
				}
				fmt.Fprintln(out, err)
				return nil
			}
			defer n.Close()
			devs, err := n.Devices()
			if err != nil {
				return failedError(err)
			}
			if watch > 0 {
				return gpusWatch(cmd.Context(), out, n, devs, watch, every)
			}
			type row struct {
				Device gpu.Device `json:"device"`
				Sample gpu.Sample `json:"sample"`
			}
			rows := make([]row, 0, len(devs))
			for _, d := range devs {
				s, err := n.Read(d.Index)
				if err != nil {
					return failedError(err)
				}
				rows = append(rows, row{d, s})
			}
			if jsonOut != "" {
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, map[string]any{"gpus": rows}); err != nil {
					return err
				}
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "INDEX\tNAME\tMEMORY USED/TOTAL (GiB)\tPOWER (W)\tUTIL (%)\tSM CLOCK (MHz)\tTEMP (C)")
			for _, r := range rows {
				fmt.Fprintf(tw, "%d\t%s\t%.1f/%.1f\t%.0f\t%.0f\t%d\t%d\n", r.Device.Index, r.Device.Name,
					gpusGiB(r.Sample.MemUsed), gpusGiB(r.Device.MemTotal), r.Sample.PowerW, r.Sample.UtilGPU, r.Sample.SMClockMHz, r.Sample.TempC)
			}
			return tw.Flush()
		},
	}
	addJSONFlag(cmd.Flags(), &jsonOut, `the GPUs and a reading of each ({"gpus":[{"device","sample"}]})`)
	cmd.Flags().DurationVar(&watch, "watch", 0, "sample every GPU for this long, one line per reading, then a summary per GPU (Ctrl-C ends it early)")
	cmd.Flags().DurationVar(&every, "interval", time.Second, "with --watch: time between readings")
	return cmd
}

// gpusWatch samples devs every interval for d, printing each reading as it
// comes and, at the end, what each GPU drew: energy, mean utilisation,
// peak power and temperature (gpu.Usage).
func gpusWatch(ctx context.Context, w io.Writer, r gpu.Reader, devs []gpu.Device, d, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fmt.Fprintf(w, "%-8s %4s %9s %9s %11s %7s %8s %12s\n", "TIME", "GPU", "UTIL (%)", "MEM (%)", "MEM (GiB)", "POWER", "TEMP (C)", "SM (MHz)")
	start := time.Now()
	var all []gpu.Sample
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, dev := range devs {
			s, err := r.Read(dev.Index)
			if err != nil {
				return failedError(err)
			}
			s.Time = time.Now()
			all = append(all, s)
			fmt.Fprintf(w, "%-8s %4d %9.0f %9.0f %11.1f %6.0fW %8d %12d\n", time.Since(start).Round(time.Millisecond*100),
				s.GPU, s.UtilGPU, s.UtilMem, gpusGiB(s.MemUsed), s.PowerW, s.TempC, s.SMClockMHz)
		}
		select {
		case <-ctx.Done():
			for _, dev := range devs {
				var mine []gpu.Sample
				for _, s := range all {
					if s.GPU == dev.Index {
						mine = append(mine, s)
					}
				}
				if u := gpu.Usage(mine, 0); u != nil {
					fmt.Fprintf(w, "gpu %d (%s): %d readings over %s, energy %.0f J, mean util %.0f%%, mean power %.0f W, peak %.0f W, peak %.0f C\n",
						dev.Index, dev.Name, u.Samples, time.Since(start).Round(time.Millisecond), u.EnergyJ, u.MeanUtilPct, u.MeanPowerW, u.PeakPowerW, u.PeakTempC)
				}
			}
			return nil
		case <-t.C:
		}
	}
}

func gpusGiB(b uint64) float64 { return float64(b) / (1 << 30) }

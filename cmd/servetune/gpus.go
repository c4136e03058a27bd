package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/gpu"
)

func init() { subcommands = append(subcommands, newGPUsCmd) }

// newGPUsCmd lists the local GPUs NVML sees, with one live reading each.
func newGPUsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "List local GPUs seen by NVML (power, memory, utilisation)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			n, err := gpu.Open()
			if err != nil {
				// Not a failure: the tool works without telemetry.
				if asJSON {
					return gpusWriteJSON(out, map[string]any{"gpus": []any{}, "error": err.Error()})
				}
				fmt.Fprintln(out, err)
				return nil
			}
			defer n.Close()
			devs, err := n.Devices()
			if err != nil {
				return failedError(err)
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
			if asJSON {
				return gpusWriteJSON(out, map[string]any{"gpus": rows})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "INDEX\tNAME\tMEMORY USED/TOTAL (GiB)\tPOWER (W)\tUTIL (%)\tSM CLOCK (MHz)")
			for _, r := range rows {
				fmt.Fprintf(tw, "%d\t%s\t%.1f/%.1f\t%.0f\t%.0f\t%d\n", r.Device.Index, r.Device.Name,
					gpusGiB(r.Sample.MemUsed), gpusGiB(r.Device.MemTotal), r.Sample.PowerW, r.Sample.UtilGPU, r.Sample.SMClockMHz)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func gpusGiB(b uint64) float64 { return float64(b) / (1 << 30) }

func gpusWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

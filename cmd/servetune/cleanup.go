package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/launcher"
)

func init() { subcommands = append(subcommands, newCleanupCmd) }

// newCleanupCmd removes the containers a crashed or interrupted study left on
// a Docker host (launcher.Reap).
func newCleanupCmd() *cobra.Command {
	var (
		study, host string
		all         bool
	)
	cmd := &cobra.Command{
		Use:   "cleanup (--study S | --all)",
		Short: "Remove servetune's leftover engine containers from a Docker host",
		Long: "Remove the containers labelled servetune.managed=true (of one study with --study)\n" +
			"that a crash or Ctrl-C left behind, running or not. The Docker host is --docker-host,\n" +
			"else DOCKER_HOST, else the local daemon; ssh:// hosts work as with the docker CLI.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			study = strings.TrimSpace(study)
			switch {
			case study == "" && !all:
				return usageErrorf("cleanup: say which containers: --study NAME or --all")
			case study != "" && all:
				return usageErrorf("cleanup: --study and --all exclude each other")
			}
			c, err := launcher.NewDockerClient(host)
			if err != nil {
				return usageError(err)
			}
			defer c.Close()
			removed, err := launcher.Reap(cmd.Context(), c, study, nil)
			out := cmd.OutOrStdout()
			for _, r := range removed {
				fmt.Fprintf(out, "removed %s %s (study %q, trial %d, %s)\n", r.ID[:min(12, len(r.ID))], strings.TrimPrefix(r.Name, "/"), r.Study, r.Trial, r.State)
			}
			if err != nil {
				return failedError(err)
			}
			if len(removed) == 0 {
				fmt.Fprintln(out, "nothing to remove")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&study, "study", "", "remove the containers of this study")
	cmd.Flags().BoolVar(&all, "all", false, "remove every servetune container")
	cmd.Flags().StringVar(&host, "docker-host", "", "Docker daemon (unix://, tcp://, ssh://); default DOCKER_HOST")
	return cmd
}

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner"
)

func init() { subcommands = append(subcommands, newCleanupCmd) }

// newCleanupCmd removes the containers a crashed or interrupted study left on
// a Docker host (launcher.Reap).
func newCleanupCmd() *cobra.Command {
	var (
		study, host, specFile string
		all                   bool
	)
	cmd := &cobra.Command{
		Use:   "cleanup (--study S | --all | --spec STUDY.yaml)",
		Short: "Remove servetune's leftover engine containers from a Docker host",
		Long: "Remove the containers labelled servetune.managed=true (of one study with --study)\n" +
			"that a crash or Ctrl-C left behind, running or not. The Docker host is --docker-host,\n" +
			"else DOCKER_HOST, else the local daemon; ssh:// hosts work as with the docker CLI.\n" +
			"--spec reaps the study a spec names on every Docker host it lists (launcher.hosts).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			study = strings.TrimSpace(study)
			switch {
			case specFile != "" && (study != "" || all || host != ""):
				return usageErrorf("cleanup: --spec excludes --study, --all and --docker-host (the spec names them)")
			case specFile == "" && study == "" && !all:
				return usageErrorf("cleanup: say which containers: --study NAME or --all")
			case study != "" && all:
				return usageErrorf("cleanup: --study and --all exclude each other")
			}
			var removed []launcher.Reaped
			if specFile != "" {
				sp, err := tuner.ParseSpecFile(specFile)
				if err != nil {
					return usageError(err)
				}
				if sp.Launcher.Kind != tuner.LauncherDocker {
					return usageErrorf("cleanup: %s: launcher kind %s starts no containers", specFile, sp.Launcher.Kind)
				}
				removed, err = tuner.ReapStudy(cmd.Context(), sp)
				return reportReaped(cmd.OutOrStdout(), removed, err)
			}
			c, err := launcher.NewDockerClient(host)
			if err != nil {
				return usageError(err)
			}
			defer c.Close()
			removed, err = launcher.Reap(cmd.Context(), c, study, nil)
			return reportReaped(cmd.OutOrStdout(), removed, err)
		},
	}
	cmd.Flags().StringVar(&study, "study", "", "remove the containers of this study")
	cmd.Flags().BoolVar(&all, "all", false, "remove every servetune container")
	cmd.Flags().StringVar(&host, "docker-host", "", "Docker daemon (unix://, tcp://, ssh://); default DOCKER_HOST")
	cmd.Flags().StringVar(&specFile, "spec", "", "remove the containers of the study this spec names, on each of its Docker hosts")
	return cmd
}

// reportReaped prints what Reap removed, one line each.
func reportReaped(out io.Writer, removed []launcher.Reaped, err error) error {
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
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

// newCleanupCmd removes the engines a crashed or interrupted study left
// running, through each launcher kind that can (launcher.Kind.Cleanup,
// launcher.Capabilities.Reap).
func newCleanupCmd() *cobra.Command {
	var (
		study, host, specFile string
		all, force            bool
	)
	cmd := &cobra.Command{
		Use:   "cleanup (--study S | --all | --spec STUDY.yaml)",
		Short: "Remove servetune's leftover engine containers and Slurm jobs",
		Long: "Remove the containers labelled servetune.io/managed=true (of one study with --study)\n" +
			"that a crash or Ctrl-C left behind, running or not. The Docker host is --docker-host,\n" +
			"else DOCKER_HOST, else the local daemon; ssh:// hosts work as with the docker CLI.\n" +
			"Where Slurm's commands are, cancel this user's servetune jobs (of the study) too.\n" +
			"The engines of runs still alive are spared unless --force.\n" +
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
			if specFile != "" {
				studySpec, l, err := tuner.ParseSpecFile(specFile)
				if err != nil {
					return usageError(err)
				}
				reap := reaperOf(studySpec, l)
				if reap == nil {
					return usageErrorf("cleanup: %s: launcher kind %s leaves nothing behind to remove", specFile, studySpec.Launcher.Kind)
				}
				removed, err := reap(cmd.Context(), studySpec.Name, keep(force))
				return reportReaped(cmd.OutOrStdout(), removed, err)
			}
			var removed []launcher.Reaped
			var errs []error
			for _, k := range launcher.Kinds() {
				if k.Cleanup == nil {
					continue
				}
				got, err := k.Cleanup(cmd.Context(), host, study, keep(force))
				removed = append(removed, got...)
				if err != nil {
					errs = append(errs, err)
				}
			}
			err := errors.Join(errs...)
			if errors.Is(err, launcher.ErrBadSpec) {
				return usageError(err)
			}
			return reportReaped(cmd.OutOrStdout(), removed, err)
		},
	}
	cmd.Flags().StringVar(&study, "study", "", "remove the containers of this study")
	cmd.Flags().BoolVar(&all, "all", false, "remove every servetune container")
	cmd.Flags().StringVar(&host, "docker-host", "", "Docker daemon (unix://, tcp://, ssh://); default DOCKER_HOST")
	cmd.Flags().BoolVar(&force, "force", false, "remove the engines of runs that are still alive too")
	cmd.Flags().StringVar(&specFile, "spec", "", "remove the containers of the study this spec names, on each of its Docker hosts")
	return cmd
}

// reaperOf is the Reap capability of the spec's launcher l (as its kind
// built it), nil when it has nothing to reap.
func reaperOf(studySpec *spec.Spec, base launcher.Launcher) func(ctx context.Context, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	l := tuner.LauncherOf(studySpec, base) // a disaggregated study's routers too
	if l == nil {
		return nil
	}
	return l.Capabilities().Reap
}

// reportReaped prints what Reap removed, one line each.
func reportReaped(out io.Writer, removed []launcher.Reaped, err error) error {
	for _, r := range removed {
		fmt.Fprintf(out, "removed %s %s %s (study %q, trial %d, %s)\n", r.Kind, r.ID[:min(12, len(r.ID))], strings.TrimPrefix(r.Name, "/"), r.Study, r.Trial, r.State)
	}
	if err != nil {
		return failedError(err)
	}
	if len(removed) == 0 {
		fmt.Fprintln(out, "nothing to remove")
	}
	return nil
}

// keep spares the engines of live runs unless forced.
func keep(force bool) func(launcher.Reaped) bool {
	if force {
		return nil
	}
	return tuner.KeepLive(proc.Owner{})
}

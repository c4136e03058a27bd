package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/present/report"
	"github.com/servetune/servetune/store"
)

func newReportCmd() *cobra.Command {
	var dbPath, out, format string
	cmd := &cobra.Command{
		Use:   "report STUDY",
		Short: "Write a study's report: one self-contained HTML file (or Markdown)",
		Long: `Write the report of a stored study: the recommendation with the serve command,
its figures with 95% intervals and the runner-up; the Pareto front; latency
against load; the search history and each parameter's effect; failures with
the engine's messages; and what was run. The HTML file has its charts inline
(SVG) and loads nothing: mail it, attach it, open it offline.`,
		Example: `  servetune report quickstart -o report.html
  servetune report quickstart --format md > report.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "html" && format != "md" {
				return usageErrorf("--format %q: want html or md", format)
			}
			ctx := cmd.Context()
			return withDB(ctx, dbPath, func(db *store.Store) error {
				s, err := report.Load(ctx, db, args[0])
				if errors.Is(err, report.ErrNoStudy) {
					return usageErrorf("no study %q in %s (see servetune studies)", args[0], dbPath)
				}
				if err != nil {
					return failedError(err)
				}
				s.Tool, s.Source = "servetune "+version, dbPath
				write := s.WriteHTML
				if format == "md" {
					write = s.WriteMarkdown
				}
				if out == "" {
					out = stdoutPath
				}
				return writeOutput(cmd.OutOrStdout(), out, write)
			})
		},
	}
	addDBFlag(cmd, &dbPath)
	addOutputFlag(cmd.Flags(), &out, "output", "o", "file to write (default: standard output)")
	cmd.Flags().StringVar(&format, "format", "html", "html or md")
	return cmd
}

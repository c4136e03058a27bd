package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
	"github.com/spf13/cobra"
)

// newDiagnoseCmd is `servetune diagnose`: the findings tune, recommend and
// bench --scrape-metrics print, for a stored study or a bench result file.
func newDiagnoseCmd() *cobra.Command {
	var dbPath, prefer, jsonOut string
	var trialN int
	cmd := &cobra.Command{
		Use:   "diagnose STUDY|RESULT.json",
		Short: "Print the findings (why a configuration performs as it does) for a stored study or a bench result",
		Long: `Run the diagnosis rules (the findings tune, recommend and bench --scrape-metrics
print) on measurements already taken. For a study: its recommended
configuration at the recommended level (as recommend shows it), or with
--trial N every measured level of trial N. For a file written by
'servetune bench --json': every level in it. Rules that need the engine's
metrics stay silent on results measured without them.`,
		Example: `  servetune diagnose quickstart
  servetune diagnose quickstart --trial 3
  servetune diagnose result.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var findings []diagnose.Finding
			var head string
			var err error
			if isResultFile(args[0]) {
				if cmd.Flags().Changed("trial") || cmd.Flags().Changed("prefer") {
					return usageErrorf("--trial and --prefer apply to a study, not to the result file %s", args[0])
				}
				head, findings, err = diagnoseResult(args[0])
			} else {
				head, findings, err = diagnoseStudy(cmd, dbPath, args[0], trialN, prefer)
			}
			if err != nil {
				return err
			}
			if jsonOut != "" {
				js := findings
				if js == nil {
					js = []diagnose.Finding{}
				}
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, js); err != nil {
					return err
				}
			}
			w := tableOut(cmd, jsonOut)
			fmt.Fprintln(w, head)
			if len(findings) == 0 {
				fmt.Fprintln(w, "No findings: no rule saw a setting binding or a figure out of place.")
				return nil
			}
			printFindings(w, findings)
			return nil
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().IntVar(&trialN, "trial", -1, "diagnose this trial's levels instead of the recommended configuration")
	cmd.Flags().StringVar(&prefer, "prefer", "objective", preferHelp)
	addJSONFlag(cmd.Flags(), &jsonOut, "the findings (an array)")
	return cmd
}

// isResultFile tells a bench result from a study name: a name ending in
// .json, or an existing file.
func isResultFile(arg string) bool {
	if strings.HasSuffix(strings.ToLower(arg), ".json") {
		return true
	}
	st, err := os.Stat(arg)
	return err == nil && st.Mode().IsRegular()
}

// diagnoseResult runs the rules on each level of a bench --json file, as
// bench did when it wrote it.
func diagnoseResult(path string) (string, []diagnose.Finding, error) {
	sums, err := readSummaries(path)
	if err != nil {
		return "", nil, usageError(err)
	}
	var out []diagnose.Finding
	for _, s := range sums {
		load := measure.Load{Rate: s.RequestRate, MaxConcurrency: s.MaxConcurrency}
		out = append(out, benchFindings(load, s, "", nil)...)
	}
	return fmt.Sprintf("%s: %d level(s)", path, len(sums)), out, nil
}

// diagnoseStudy runs the rules on a stored study's recommended
// configuration at its recommended level, or on every level of trial n
// (n >= 0).
func diagnoseStudy(cmd *cobra.Command, dbPath, name string, n int, prefer string) (string, []diagnose.Finding, error) {
	pref, err := recommend.ParsePreference(prefer)
	if err != nil {
		return "", nil, usageErrorf("--prefer: %v", err)
	}
	ss, err := loadStudy(cmd.Context(), dbPath, name)
	if err != nil {
		return "", nil, err
	}
	study := ss.spec
	if n < 0 {
		rec, err := recommend.RecommendStudy(ss.trials, study.Terms(), pref)
		if err != nil {
			return "", nil, failedError(fmt.Errorf("study %s: %w (name one with --trial N)", name, err))
		}
		p := rec.Best.Point
		head := fmt.Sprintf("%s: trial %d at %s, recommended, prefer %s:  %s", name, p.Trial, p.Label, pref.For(study.Tuner.Objective).Describe(study.Tuner.Objective), settingsLine(p.Settings))
		return head, diagnose.Level(recommendedInput(study, p)), nil
	}
	for _, t := range ss.trials {
		if t.Number != n {
			continue
		}
		if len(t.LoadPoints) == 0 {
			status := string(t.Status)
			if t.Failure != "" {
				status += "/" + string(t.Failure)
			}
			return "", nil, usageErrorf("study %s: trial %d has no measured level (%s)", name, n, status)
		}
		head := fmt.Sprintf("%s: trial %d, %d level(s)  %s", name, n, len(t.LoadPoints), settingsLine(t.Settings))
		return head, diagnose.Levels(study.Engine, t.Settings, t.LoadPoints), nil
	}
	return "", nil, usageErrorf("study %s has no trial %d (see servetune trials %s)", name, n, name)
}

// recommendedInput is the rules' input for a study's recommended point:
// its settings and level, whether its prompts share prefixes, and what
// the study searched of each setting.
func recommendedInput(study *spec.Spec, p recommend.Point) diagnose.Input {
	searched := map[string]string{}
	for _, param := range study.Space.Params {
		if param.Searches() {
			searched[param.Name] = param.Describe()
		}
	}
	return diagnose.Input{Engine: study.Engine, Settings: p.Settings, Level: p.Level,
		CacheCold: cacheCold(map[string]any{"dataset": study.Workload.Dataset}), Searched: searched}
}

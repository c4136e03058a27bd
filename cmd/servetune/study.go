package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/engine"
	"github.com/servetune/servetune/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
)

// The read-only study commands: studies, trials, pareto, recommend.

func init() {
	subcommands = append(subcommands, newStudiesCmd, newTrialsCmd, newParetoCmd, newRecommendCmd)
}

// openDB opens an existing study database; it never creates one.
func openDB(ctx context.Context, path string) (*store.Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, usageErrorf("no study database at %s (give --db)", path)
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		return nil, failedError(fmt.Errorf("open %s: %w", path, err))
	}
	return db, nil
}

// storedStudy is one study read back with its spec and trials.
type storedStudy struct {
	study  store.Study
	spec   *tuner.Spec
	trials []store.Trial
}

func loadStudy(ctx context.Context, dbPath, name string) (*storedStudy, error) {
	db, err := openDB(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	st, err := db.GetStudy(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, usageErrorf("no study %q in %s (see servetune studies)", name, dbPath)
	}
	if err != nil {
		return nil, failedError(err)
	}
	sp, err := tuner.ParseSpec([]byte(st.Spec), name+".yaml (stored)")
	if err != nil {
		return nil, failedError(fmt.Errorf("stored spec of %s: %w", name, err))
	}
	trials, err := db.Trials(ctx, st.ID)
	if err != nil {
		return nil, failedError(err)
	}
	return &storedStudy{study: st, spec: sp, trials: trials}, nil
}

func addDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", studyDBDefault(), "SQLite database of studies (env SERVETUNE_DB)")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newStudiesCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "studies",
		Short: "List the stored tuning studies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			db, err := openDB(ctx, dbPath)
			if err != nil {
				return err
			}
			defer db.Close()
			studies, err := db.ListStudies(ctx)
			if err != nil {
				return failedError(err)
			}
			type row struct {
				Name     string    `json:"name"`
				Status   string    `json:"status"`
				Trials   int       `json:"trials"`
				OK       int       `json:"ok"`
				Failed   int       `json:"failed"`
				Seed     uint64    `json:"seed"`
				Started  time.Time `json:"started"`
				Finished time.Time `json:"finished,omitzero"`
			}
			rows := make([]row, 0, len(studies))
			for _, s := range studies {
				trials, err := db.Trials(ctx, s.ID)
				if err != nil {
					return failedError(err)
				}
				r := row{Name: s.Name, Status: s.Status, Trials: len(trials), Seed: s.Seed, Started: s.Started, Finished: s.Finished}
				for _, t := range trials {
					switch t.Status {
					case measure.StatusOK:
						r.OK++
					case measure.StatusFailed:
						r.Failed++
					}
				}
				rows = append(rows, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, map[string]any{"studies": rows})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATUS\tTRIALS\tOK\tFAILED\tSTARTED")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", r.Name, r.Status, r.Trials, r.OK, r.Failed, r.Started.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// trialJSON is one trial of `trials --json`.
type trialJSON struct {
	Number     int            `json:"number"`
	Status     string         `json:"status"`
	Failure    string         `json:"failure"`
	FailureMsg string         `json:"failure_msg,omitempty"`
	Settings   space.Settings `json:"settings"`
	GPUs       []int          `json:"gpus"`
	Objective  *float64       `json:"objective"`
	Started    time.Time      `json:"started"`
	Finished   time.Time      `json:"finished,omitzero"`
	Levels     []levelJSON    `json:"levels"`
}

type levelJSON struct {
	Level                  string  `json:"level"`
	Completed              int     `json:"completed"`
	Failed                 int     `json:"failed"`
	OutputThroughput       float64 `json:"output_throughput"`
	OutputThroughputPerGPU float64 `json:"output_throughput_per_gpu"`
	RequestGoodput         float64 `json:"request_goodput"`
	P99TTFTms              float64 `json:"p99_ttft_ms"`
	P99TPOTms              float64 `json:"p99_tpot_ms"`
}

func newTrialsCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trials STUDY",
		Short: "List a study's trials: status, failure class, settings, objective",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			rows := make([]trialJSON, 0, len(ss.trials))
			for _, t := range ss.trials {
				r := trialJSON{Number: t.Number, Status: string(t.Status), Failure: string(t.Failure), FailureMsg: t.FailureMsg,
					Settings: t.Settings, GPUs: t.GPUs, Objective: t.Objective, Started: t.Started, Finished: t.Finished,
					Levels: []levelJSON{}}
				if r.GPUs == nil {
					r.GPUs = []int{}
				}
				n := float64(tuner.GPUsFor(t.Settings))
				for _, lp := range t.LoadPoints {
					s := lp.Summary
					r.Levels = append(r.Levels, levelJSON{Level: lp.Label, Completed: s.Completed, Failed: s.Failed,
						OutputThroughput: s.OutputThroughput, OutputThroughputPerGPU: s.OutputThroughput / n,
						RequestGoodput: s.RequestGoodput, P99TTFTms: s.TTFT.P99, P99TPOTms: s.TPOT.P99})
				}
				rows = append(rows, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, map[string]any{"study": ss.study.Name, "trials": rows})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "#\tSTATUS\tOBJECTIVE (%s)\tGPUS\tSETTINGS\n", ss.spec.Tuner.Objective)
			for _, r := range rows {
				status := r.Status
				if r.Failure != "" {
					status += "/" + r.Failure
				}
				obj := "-"
				if r.Objective != nil {
					obj = fmt.Sprintf("%.4g", *r.Objective)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%s\n", r.Number, status, obj, r.GPUs, settingsLine(r.Settings))
			}
			return tw.Flush()
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"trials":[{"number","status","failure","settings",...}]}`)
	return cmd
}

// pointJSON is one Pareto point of `pareto --json` and `recommend --format json`.
type pointJSON struct {
	Trial    int                `json:"trial"`
	Level    string             `json:"level"`
	GPUs     int                `json:"gpus"`
	Settings space.Settings     `json:"settings"`
	Metrics  map[string]float64 `json:"metrics"`
	MeetsSLO bool               `json:"meets_slo"`
}

// pointMetrics are the metrics shown for a point.
var pointMetrics = []string{"output_throughput_per_gpu", "tokens_per_user", "request_goodput", "goodput_per_gpu",
	"ttft_p99", "tpot_p99", "e2el_p99", "cost_per_mtok"}

func toPointJSON(p tuner.Point, sp *tuner.Spec) pointJSON {
	label := p.Label
	m := map[string]float64{}
	names := append([]string(nil), pointMetrics...)
	for _, o := range sp.Objectives {
		names = append(names, o.Metric)
	}
	for _, name := range names {
		if v, ok := p.Metric(name); ok {
			m[name] = v
		}
	}
	return pointJSON{Trial: p.Trial, Level: label, GPUs: p.GPUs, Settings: p.Settings, Metrics: m, MeetsSLO: sp.SLO.Met(p)}
}

func newParetoCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pareto STUDY",
		Short: "Print the Pareto front over every measured (trial, load level) point",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			sp := ss.spec
			front := tuner.Front(tuner.StoredPoints(ss.trials, sp.Hardware.PricePerGPUHour), sp.Objectives)
			rows := make([]pointJSON, 0, len(front))
			for _, p := range front {
				rows = append(rows, toPointJSON(p, sp))
			}
			objs := make([]string, len(sp.Objectives))
			for i, o := range sp.Objectives {
				objs[i] = o.String()
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, map[string]any{"study": sp.Name, "objectives": objs, "slo": sp.SLO.String(), "front": rows})
			}
			fmt.Fprintf(out, "Pareto front of %s (%s); SLO %s\n", sp.Name, strings.Join(objs, ", "), sp.SLO)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprint(tw, "TRIAL\tLEVEL\tSLO")
			for _, o := range sp.Objectives {
				fmt.Fprintf(tw, "\t%s", strings.ToUpper(o.Metric))
			}
			fmt.Fprintln(tw, "\tSETTINGS")
			for _, r := range rows {
				ok := "miss"
				if r.MeetsSLO {
					ok = "ok"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s", r.Trial, r.Level, ok)
				for _, o := range sp.Objectives {
					fmt.Fprintf(tw, "\t%.4g", r.Metrics[o.Metric])
				}
				fmt.Fprintf(tw, "\t%s\n", settingsLine(r.Settings))
			}
			return tw.Flush()
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newRecommendCmd() *cobra.Command {
	var dbPath, prefer, format string
	cmd := &cobra.Command{
		Use:   "recommend STUDY",
		Short: "Print the best measured configuration under the SLOs as a serve command",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pref, err := tuner.ParsePreference(prefer)
			if err != nil {
				return usageErrorf("--prefer: %v", err)
			}
			switch format {
			case "", "vllm", "sglang", "docker", "yaml", "json":
			default:
				return usageErrorf("--format %q: want vllm, sglang, docker, yaml or json", format)
			}
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			sp := ss.spec
			if format == "" {
				format = string(sp.Engine)
			}
			rec, err := tuner.Recommend(tuner.StoredPoints(ss.trials, sp.Hardware.PricePerGPUHour), sp.Objectives, sp.SLO, pref)
			if err != nil {
				return failedError(fmt.Errorf("study %s: %w", sp.Name, err))
			}
			return writeRecommendation(cmd.OutOrStdout(), sp, rec, pref, format)
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVar(&prefer, "prefer", "throughput", "throughput | cost | latency")
	cmd.Flags().StringVar(&format, "format", "", "vllm | sglang | docker | yaml | json (default: the study's engine)")
	return cmd
}

// serveArgv returns the command that serves the recommendation. The
// extra flags are the spec engine's, so another engine's command leaves
// them out.
func serveArgv(sp *tuner.Spec, p tuner.Point, format string) []string {
	extra := func(e engine.Engine) []string {
		if sp.Engine == e {
			return sp.Space.Extra
		}
		return nil
	}
	switch format {
	case "sglang":
		return engine.ServeCommand(engine.SGLang, sp.Model, p.Settings, extra(engine.SGLang))
	case "docker":
		image := ""
		if d, ok := sp.Launcher.Launcher.(interface{ Image() string }); ok {
			image = d.Image()
		}
		return engine.DockerRun(sp.Engine, image, sp.Model, p.Settings, sp.Space.Extra, p.GPUs)
	}
	return engine.ServeCommand(engine.VLLM, sp.Model, p.Settings, extra(engine.VLLM))
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	if strings.HasPrefix(s, `"device=`) || strings.HasPrefix(s, "$HOME/") {
		return s // already written for the shell
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeRecommendation(w io.Writer, sp *tuner.Spec, p tuner.Point, pref tuner.Preference, format string) error {
	pj := toPointJSON(p, sp)
	switch format {
	case "json", "yaml":
		doc := map[string]any{
			"study": sp.Name, "model": sp.Model, "engine": string(sp.Engine), "prefer": string(pref),
			"trial": pj.Trial, "level": pj.Level, "gpus": pj.GPUs, "settings": pj.Settings, "metrics": pj.Metrics,
			"command": serveArgv(sp, p, string(sp.Engine)),
		}
		if format == "json" {
			return writeJSON(w, doc)
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return err
		}
		return enc.Close()
	}
	argv := serveArgv(sp, p, format)
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	fmt.Fprintf(w, "# %s: trial %d at %s, best %s under SLO %s:", sp.Name, p.Trial, pj.Level, pref, sp.SLO)
	for _, name := range []string{"output_throughput_per_gpu", "ttft_p99", "tpot_p99", "cost_per_mtok"} {
		if v, ok := pj.Metrics[name]; ok {
			fmt.Fprintf(w, " %s=%.4g", name, v)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, strings.Join(q, " "))
	return nil
}

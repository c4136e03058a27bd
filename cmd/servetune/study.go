package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
	"github.com/servetune/servetune/internal/term"
	"github.com/servetune/servetune/internal/yamlenc"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// The read-only study commands: studies, trials, pareto, recommend.

// openDB opens an existing study database for reading; it never creates
// or changes one, so it works on a read-only mount.
func openDB(ctx context.Context, path string) (*store.Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, usageErrorf("no study database at %s (give --db)", path)
	}
	db, err := store.OpenReadOnly(ctx, path)
	return db, openError(path, err)
}

// withDB runs f on the study database at path, opened for reading
// (openDB), and closes it after.
func withDB(ctx context.Context, path string, f func(*store.Store) error) error {
	db, err := openDB(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	return f(db)
}

// openDBForWrite opens (or creates) the database a study writes to; a new
// file and its directory are private to the user (specs and logs may say
// more than they should).
func openDBForWrite(ctx context.Context, path string) (*store.Store, error) {
	if path != store.Memory {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, failedError(err)
		}
		if err := writable(path); err != nil {
			return nil, usageError(err)
		}
	}
	db, err := store.Open(ctx, path)
	return db, openError(path, err)
}

// openError is the command's error for opening the database at path
// with err: a usage error for a file that is not one, nil for none.
func openError(path string, err error) error {
	if errors.Is(err, store.ErrNotDatabase) {
		return usageErrorf("--db %s: not a servetune study database (SQLite: file is not a database)", path)
	}
	if err != nil {
		return failedError(fmt.Errorf("open %s: %w", path, err))
	}
	return nil
}

// writable says in one line why the database at path cannot be written,
// nil when it can: SQLite's own words are "attempt to write a readonly
// database" or, for a new file in a read-only directory, "no such file or
// directory". The directory must be writable as well: SQLite creates the
// -wal and -shm files beside the database.
func writable(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(path); err == nil && syscall.Access(path, 2) != nil { // 2: W_OK
		return fmt.Errorf("the database %s is read-only for this user (read commands such as trials and recommend work on it; tune needs to write it: change its permissions or copy it)", path)
	}
	if err := syscall.Access(dir, 2|1); err != nil { // W_OK|X_OK
		return fmt.Errorf("cannot write in %s (%v): tune creates the database and its -wal and -shm files there; give --db in a writable directory", dir, err)
	}
	return nil
}

// storedStudy is one study read back with its spec and trials.
type storedStudy struct {
	study  store.Study
	spec   *spec.Spec
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
	study, _, err := tuner.ParseSpec([]byte(st.Spec), name+".yaml (stored)")
	if err != nil {
		return nil, failedError(fmt.Errorf("stored spec of %s: %w", name, err))
	}
	trials, err := db.Trials(ctx, st.ID)
	if err != nil {
		return nil, failedError(err)
	}
	return &storedStudy{study: st, spec: study, trials: trials}, nil
}

func addDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", studyDBDefault(), "SQLite database of studies (env SERVETUNE_DB)")
}

func newStudiesCmd() *cobra.Command {
	var dbPath, jsonOut string
	cmd := &cobra.Command{
		Use:   "studies",
		Short: "List the stored tuning studies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return withDB(ctx, dbPath, func(db *store.Store) error {
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
				if jsonOut != "" {
					if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, map[string]any{"studies": rows}); err != nil {
						return err
					}
				}
				tw := tabwriter.NewWriter(tableOut(cmd, jsonOut), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATUS\tTRIALS\tOK\tFAILED\tSTARTED")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", r.Name, r.Status, r.Trials, r.OK, r.Failed, r.Started.Local().Format(time.DateTime))
				}
				return tw.Flush()
			})
		},
	}
	addDBFlag(cmd, &dbPath)
	addJSONFlag(cmd.Flags(), &jsonOut, `the studies ({"studies":[{"name","status","trials","ok","failed",...}]})`)
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
	Confirms   *int           `json:"confirms,omitempty"` // the trial this confirmation run measures again
	// PendingS is how long the engine's job waited in a batch scheduler's
	// queue (null when the launcher has none); LaunchS is from its start to
	// healthy (null when it never was). Seconds.
	PendingS *float64    `json:"pending_s"`
	LaunchS  *float64    `json:"launch_s"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished,omitzero"`
	Levels   []levelJSON `json:"levels"`
	// Quality is the quality gate's verdict, with both scores.
	Quality *measure.Quality `json:"quality,omitempty"`
	// Unreadable says why a stored value of the trial did not parse.
	Unreadable string `json:"unreadable,omitempty"`
}

type levelJSON struct {
	Level                  string            `json:"level"`
	Completed              int               `json:"completed"`
	Failed                 int               `json:"failed"`
	OutputThroughput       float64           `json:"output_throughput"`
	OutputThroughputPerGPU float64           `json:"output_throughput_per_gpu"`
	RequestGoodput         float64           `json:"request_goodput"`
	P99TTFTms              float64           `json:"p99_ttft_ms"`
	P99TPOTms              float64           `json:"p99_tpot_ms"`
	Errors                 map[string]int    `json:"errors,omitempty"`         // failed requests by class
	ErrorMessages          map[string]string `json:"error_messages,omitempty"` // the first message of each class
	// EngineMetrics is what the engine reported during the level (its
	// /metrics, or the simulator's state).
	EngineMetrics *measure.EngineMetrics `json:"engine_metrics,omitempty"`
	GPU           *measure.GPUUsage      `json:"gpu,omitempty"` // NVML telemetry of the level
	// Client is the benchmark client's lateness and CPU during the
	// level, with its suspect mark.
	Client *measure.Client `json:"client,omitempty"`
}

func newTrialsCmd() *cobra.Command {
	var dbPath, jsonOut string
	cmd := &cobra.Command{
		Use:   "trials STUDY",
		Short: "List a study's trials: status, failure class, settings, objective",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			rows := trialRows(ss.trials)
			if jsonOut != "" {
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, map[string]any{"study": ss.study.Name, "trials": rows}); err != nil {
					return err
				}
			}
			out := tableOut(cmd, jsonOut)
			// Failed requests in a trial that is ok: a column, and the
			// words below, where any trial has them.
			failures := map[int]string{}
			for _, t := range ss.trials {
				if f := recommend.RequestFailures(t.LoadPoints); f != "" && t.Status != measure.StatusFailed {
					failures[t.Number] = f
				}
			}
			if err := writeTrialTable(out, ss.spec.Tuner.Objective, rows, failures); err != nil {
				return err
			}
			writeTrialNotes(out, ss.trials, rows, failures)
			return nil
		},
	}
	addDBFlag(cmd, &dbPath)
	addJSONFlag(cmd.Flags(), &jsonOut, `the trials ({"trials":[{"number","status","failure","settings",...}]})`)
	return cmd
}

// trialRows are a study's trials as `trials --json` writes them.
func trialRows(trials []store.Trial) []trialJSON {
	rows := make([]trialJSON, 0, len(trials))
	for _, t := range trials {
		r := trialJSON{Number: t.Number, Status: string(t.Status), Failure: string(t.Failure), FailureMsg: t.FailureMsg,
			Settings: t.Settings, GPUs: t.GPUs, Objective: t.Objective, Confirms: t.Confirms, Started: t.Started, Finished: t.Finished,
			PendingS: seconds(t.Pending), LaunchS: seconds(t.Launch), Levels: []levelJSON{}, Quality: t.Quality,
			Unreadable: t.Unreadable}
		if r.GPUs == nil {
			r.GPUs = []int{}
		}
		n := float64(spec.GPUsFor(t.Settings))
		for _, lp := range t.LoadPoints {
			s := lp.Summary
			r.Levels = append(r.Levels, levelJSON{Level: lp.Label, Completed: s.Completed, Failed: s.Failed,
				OutputThroughput: s.OutputThroughput, OutputThroughputPerGPU: s.OutputThroughput / n,
				RequestGoodput: s.RequestGoodput, P99TTFTms: s.TTFT.P99, P99TPOTms: s.TPOT.P99,
				Errors: nonZero(s.Errors), ErrorMessages: s.ErrorMessages, EngineMetrics: s.Engine, GPU: s.GPU, Client: s.Client})
		}
		rows = append(rows, r)
	}
	return rows
}

// writeTrialTable writes the trials table: a PENDING column only for
// launchers with a queue, energy and failed requests only where a trial
// has them.
func writeTrialTable(out io.Writer, obj recommend.Objective, rows []trialJSON, failures map[int]string) error {
	queued := false
	for _, r := range rows {
		queued = queued || r.PendingS != nil
	}
	energy := anyEnergy(rows)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "#\tSTATUS\tOBJECTIVE (%s, %s)\tCONFIRMS\tGPUS\t", obj, recommend.Unit(obj.Metric))
	if len(failures) > 0 {
		fmt.Fprint(tw, "FAILED REQUESTS\t")
	}
	if energy {
		fmt.Fprint(tw, "BEST TOK/J\tENERGY (J)\t")
	}
	if queued {
		fmt.Fprint(tw, "PENDING\t")
	}
	fmt.Fprint(tw, "LAUNCH\tSETTINGS\n")
	for _, r := range rows {
		status := r.Status
		if r.Failure != "" {
			status += "/" + r.Failure
		}
		if suspectLevels(r) != nil {
			status += "(suspect)" // one field, as scripts split the table
		}
		if r.Unreadable != "" {
			status += " (unreadable)"
		}
		val, of := "-", ""
		if r.Objective != nil {
			val = fmt.Sprintf("%.4g", *r.Objective)
		}
		if r.Confirms != nil {
			of = fmt.Sprintf("trial %d", *r.Confirms)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t", r.Number, status, val, of, r.GPUs)
		if len(failures) > 0 {
			fmt.Fprintf(tw, "%s\t", failedRequests(r.Levels))
		}
		if energy {
			tpj, joules := trialEnergy(r)
			fmt.Fprintf(tw, "%s\t%s\t", tpj, joules)
		}
		if queued {
			fmt.Fprintf(tw, "%s\t", secondsText(r.PendingS))
		}
		fmt.Fprintf(tw, "%s\t%s\n", secondsText(r.LaunchS), term.Line(settingsLine(r.Settings)))
	}
	return tw.Flush()
}

// writeTrialNotes writes what the table cannot hold: suspect levels, and
// whole failure messages wrapped (the engine's own words are the point).
func writeTrialNotes(out io.Writer, trials []store.Trial, rows []trialJSON, failures map[int]string) {
	blank := "\n"
	for _, r := range rows {
		for _, l := range suspectLevels(r) {
			fmt.Fprintf(out, "%strial %d at %s is suspect: %s (send lateness p50 %.1f ms, p99 %.1f ms, loop lag p99 %.1f ms, client CPU %.2f cores)\n",
				blank, r.Number, l.Level, l.Client.Why, l.Client.SendLatenessP50, l.Client.SendLatenessP99, l.Client.LoopLagP99, l.Client.CPU)
			blank = ""
		}
	}
	for i, r := range rows {
		if r.FailureMsg != "" {
			fmt.Fprintf(out, "\ntrial %d %s/%s:\n%s", r.Number, r.Status, r.Failure, wrap(term.Clean(r.FailureMsg), 96, "    "))
		}
		if r.Unreadable != "" {
			fmt.Fprintf(out, "\ntrial %d (id %d) is unreadable: %s\n", r.Number, trials[i].ID, term.Line(r.Unreadable))
		}
		if f := failures[r.Number]; f != "" {
			fmt.Fprintf(out, "\ntrial %d %s, but %s\n", r.Number, r.Status, f)
		}
	}
}

// suspectLevels are r's levels whose client fell behind (measure.Client).
func suspectLevels(r trialJSON) []levelJSON {
	var out []levelJSON
	for _, l := range r.Levels {
		if l.Client != nil && l.Client.Suspect {
			out = append(out, l)
		}
	}
	return out
}

// failedRequests is a trial's failed share of its measured requests for
// the trials table: "4/8", "-" when none failed.
func failedRequests(levels []levelJSON) string {
	failed, total := 0, 0
	for _, l := range levels {
		failed += l.Failed
		total += l.Completed + l.Failed
	}
	if failed == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", failed, total)
}

// anyEnergy reports whether some level of rows has GPU energy figures.
func anyEnergy(rows []trialJSON) bool {
	for _, r := range rows {
		for _, l := range r.Levels {
			if l.GPU != nil && l.GPU.EnergyJ > 0 {
				return true
			}
		}
	}
	return false
}

// trialEnergy is a trial's best output tokens per joule over its levels and
// the energy its levels drew, for the trials table ("-" without NVML).
func trialEnergy(r trialJSON) (string, string) {
	best, joules, n := 0.0, 0.0, 0
	for _, l := range r.Levels {
		if l.GPU != nil && l.GPU.EnergyJ > 0 {
			best = max(best, l.GPU.OutputTokensPerJoule)
			joules += l.GPU.EnergyJ
			n++
		}
	}
	if n == 0 {
		return "-", "-"
	}
	return fmt.Sprintf("%.3g", best), fmt.Sprintf("%.0f", joules)
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
	"ttft_p99", "tpot_p99", "e2el_p99", "cost_per_mtok", "output_tokens_per_joule"}

func toPointJSON(p recommend.Point, study *spec.Spec) pointJSON {
	label := p.Label
	m := map[string]float64{}
	names := append([]string(nil), pointMetrics...)
	for _, o := range study.Objectives {
		names = append(names, o.Metric)
	}
	for _, name := range names {
		if v, ok := p.Metric(name); ok {
			m[name] = v
		}
	}
	return pointJSON{Trial: p.Trial, Level: label, GPUs: p.GPUs, Settings: p.Settings, Metrics: m, MeetsSLO: study.SLO.Met(p)}
}

func newParetoCmd() *cobra.Command {
	var dbPath, jsonOut string
	var all bool
	cmd := &cobra.Command{
		Use:   "pareto STUDY",
		Short: "Print the Pareto front over every measured (trial, load level) point",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			study := ss.spec
			pts := recommend.StoredPoints(ss.trials, study.Hardware.PricePerGPUHour)
			if !all {
				// The one definition: a point that misses the SLOs is no
				// candidate (--all shows them, marked).
				kept := pts[:0]
				for _, p := range pts {
					if study.SLO.Met(p) {
						kept = append(kept, p)
					}
				}
				pts = kept
			}
			front := recommend.Front(pts, study.Objectives)
			rows := make([]pointJSON, 0, len(front))
			for _, p := range front {
				rows = append(rows, toPointJSON(p, study))
			}
			objs := make([]string, len(study.Objectives))
			for i, o := range study.Objectives {
				objs[i] = o.String()
			}
			if jsonOut != "" {
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, map[string]any{"study": study.Name, "objectives": objs, "slo": study.SLO.String(), "front": rows}); err != nil {
					return err
				}
			}
			out := tableOut(cmd, jsonOut)
			fmt.Fprintf(out, "Pareto front of %s (%s); SLO %s\n", study.Name, strings.Join(objs, ", "), study.SLO)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprint(tw, "TRIAL\tLEVEL\tSLO")
			for _, o := range study.Objectives {
				fmt.Fprintf(tw, "\t%s (%s)", strings.ToUpper(o.Metric), recommend.Unit(o.Metric))
			}
			// Energy where NVML measured it (and no objective shows it already).
			energy := false
			for _, r := range rows {
				if _, ok := r.Metrics["output_tokens_per_joule"]; ok {
					energy = true
				}
			}
			for _, o := range study.Objectives {
				if o.Metric == "output_tokens_per_joule" {
					energy = false
				}
			}
			if energy {
				fmt.Fprint(tw, "\tTOK/J")
			}
			fmt.Fprintln(tw, "\tSETTINGS")
			for _, r := range rows {
				ok := "miss"
				if r.MeetsSLO {
					ok = "ok"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s", r.Trial, r.Level, ok)
				for _, o := range study.Objectives {
					fmt.Fprintf(tw, "\t%.4g", r.Metrics[o.Metric])
				}
				if energy {
					if v, ok := r.Metrics["output_tokens_per_joule"]; ok {
						fmt.Fprintf(tw, "\t%.3g", v)
					} else {
						fmt.Fprint(tw, "\t-")
					}
				}
				fmt.Fprintf(tw, "\t%s\n", settingsLine(r.Settings))
			}
			return tw.Flush()
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&all, "all", false, "include the points that miss the SLOs (marked miss)")
	addJSONFlag(cmd.Flags(), &jsonOut, `the front ({"study","objectives","slo","front":[...]})`)
	return cmd
}

// preferHelp is --prefer's help on every command that ranks a study.
const preferHelp = "what to rank by: objective (the study's tuner.objective) | throughput | cost | latency | any metric (goodput_per_gpu, ttft_p99, ...) | \"max METRIC\" | \"min METRIC\""

func newRecommendCmd() *cobra.Command {
	var dbPath, prefer, format, hfSecret, modelClaim, routerImage, engineVersion string
	cmd := &cobra.Command{
		Use:   "recommend STUDY",
		Short: "Print the best measured configuration under the SLOs as a serve command",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pref, err := recommend.ParsePreference(prefer)
			if err != nil {
				return usageErrorf("--prefer: %v", err)
			}
			switch format {
			case "", "vllm", "sglang", "docker", "yaml", "json", "k8s", "kserve":
			default:
				return usageErrorf("--format %q: want vllm, sglang, docker, yaml, json, k8s or kserve", format)
			}
			if routerImage != "" {
				if err := kube.ValidImage(routerImage); err != nil {
					return usageErrorf("--router-image: %v", err)
				}
			}
			ss, err := loadStudy(cmd.Context(), dbPath, args[0])
			if err != nil {
				return err
			}
			study := ss.spec
			if format == "" {
				format = string(study.Engine)
			}
			var ver engine.Version
			if engineVersion == "" && engineFor(study, format) == study.Engine {
				ver = engine.Release(study.Engine, study.Image()) // its image's release, which it measured
			}
			if engineVersion != "" {
				if ver, err = engine.ParseVersion(engineVersion); err == nil {
					err = engine.CheckVersion(engineFor(study, format), ver)
				}
				if err != nil {
					return usageErrorf("--engine-version: %v", err)
				}
			}
			if e := engineFor(study, format); e != study.Engine {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: study %s was measured on %s; this %s command carries its settings over unmeasured (%s's memory, scheduler and defaults differ): tune it on %s before serving it\n",
					study.Name, study.Engine, e, e, e)
			}
			rec, err := recommend.RecommendStudy(ss.trials, study.Terms(), pref)
			if err != nil {
				return failedError(fmt.Errorf("study %s: %w", study.Name, err))
			}
			warnSuspect(cmd.ErrOrStderr(), rec)
			alt := shapeAlternative(ss.trials, study, pref, rec.Best)
			if format == "k8s" || format == "kserve" {
				return writeManifests(cmd.OutOrStdout(), study, rec, alt, pref, format, hfSecret, modelClaim, routerImage, ver)
			}
			q := recommendedQuality(study, ss.study, ss.trials, rec.Best.Point.Trial)
			return writeRecommendation(cmd.OutOrStdout(), study, rec, alt, pref, format, q, ver)
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVar(&prefer, "prefer", "objective", preferHelp)
	cmd.Flags().StringVar(&engineVersion, "engine-version", "", "the engine release the command is for, e.g. 0.11.0 (default: the newest the flag table knows); its flags are checked against it")
	cmd.Flags().StringVar(&format, "format", "", "vllm | sglang | docker | yaml | json | k8s (Deployment + Service) | kserve (ServingRuntime + InferenceService) (default: the study's engine)")
	cmd.Flags().StringVar(&modelClaim, "model-claim", "", "with k8s or kserve and a local model: the PersistentVolumeClaim holding its files (default: NAME-model)")
	cmd.Flags().StringVar(&routerImage, "router-image", "", "with k8s and a disaggregated recommendation: the image of the router's command (default: the printed router's own: vllm/vllm-router for vLLM's vllm-router, the engine's for SGLang's router and a study's own router)")
	cmd.Flags().StringVar(&hfSecret, "hf-secret", "hf-token", `with k8s or kserve: the Secret whose key "token" holds the Hugging Face token ("" for none)`)
	return cmd
}

// nonNil is xs, or an empty list for JSON's [] where there is none.
func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// warnSuspect warns, on stderr so that every format's output stays
// whole, when a run of the recommended point was measured by a client
// that fell behind (measure.Client): its figures are partly the client's.
func warnSuspect(w io.Writer, rec recommend.Recommendation) {
	for _, p := range rec.Best.Levels {
		if c := p.Summary.Client; c != nil && c.Suspect {
			fmt.Fprintf(w, "warning: trial %d at %s is suspect: %s; measure it again on a machine the client has to itself\n", p.Trial, p.Label, c.Why)
		}
	}
}

// writeManifests writes the recommendation as Kubernetes manifests (k8s:
// a Deployment and a Service; kserve: a ServingRuntime and an
// InferenceService), headed by comments on where it comes from.
func writeManifests(w io.Writer, study *spec.Spec, rec recommend.Recommendation, alt *recommend.Recommendation, pref recommend.Preference, format, hfSecret, modelClaim, routerImage string, ver engine.Version) error {
	p := rec.Best.Point
	s := kube.Serve{Engine: study.Engine, Model: study.Model, Settings: p.Settings, Extra: study.Space.Extra, GPUs: p.GPUs,
		GPU: study.Hardware.GPU, HFSecret: hfSecret, Study: study.Name, Trial: p.Trial,
		// A local model (its config.json was read) is a directory on this host.
		Local: study.ModelConfig != "", ModelClaim: modelClaim}
	if s.Local && s.ModelClaim == "" {
		s.ModelClaim = kube.DefaultClaim(s)
	}
	if ver == (engine.Version{}) {
		ver = engine.NewestVersion(study.Engine)
	}
	s.Image = engine.Image(study.Engine, ver)
	if image := study.Image(); image != "" && !engine.IsSimImage(image) {
		s.Image = image
	}
	var objs []any
	var err error
	disagg := study.PartCommands(p) != nil
	switch {
	case disagg && format == "kserve":
		return usageErrorf("--format kserve: the recommendation is disaggregated; --format k8s writes its parts' Deployments")
	case disagg:
		var image string
		objs, image, err = disaggManifests(study, s, p, routerImage, ver)
		routerImage = image
	case format == "kserve":
		rt, isvc, e := kube.KServe(s)
		objs, err = []any{rt, isvc}, e
	case s.GPUs > hostGPUs(study.Hardware.GPU):
		// One replica spans hosts: a LeaderWorkerSet, a pod per host.
		set, svc, e := kube.LeaderWorkerSet(s, hostGPUs(study.Hardware.GPU))
		objs, err = []any{set, svc}, e
	default:
		d, svc, e := kube.Deployment(s)
		objs, err = []any{d, svc}, e
	}
	if err != nil {
		return usageError(fmt.Errorf("study %s: %w", study.Name, err))
	}
	// Every line of the header is a comment (kube.Comment): the names and
	// the command come from the spec.
	var cmdText string
	if disagg {
		cmdText = strings.Join(spec.Script(study.PartCommandsFor(p, ver)), "\n  ")
	} else {
		cmdText = engine.ShellJoin(serveArgv(study, p, string(study.Engine)))
	}
	head := fmt.Sprintf("%s: trial %d at %s, best %s under SLO %s; as commands on one host:\n  %s\nfor %s %s: the image %s", study.Name, p.Trial, p.Label, pref.For(study.Tuner.Objective).Describe(study.Tuner.Objective), study.SLO, cmdText,
		study.Engine, ver, s.Image)
	if disagg {
		head += "; the router's image " + routerImage
	}
	for _, r := range rec.Best.SLORisks(study.SLO) {
		head += "\ncaution: " + r
	}
	if alt != nil {
		var b strings.Builder
		writeAlternative(&b, study, rec.Best, alt.Best)
		head += "\n" + strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "# ", "")
	}
	if s.Local {
		head += fmt.Sprintf("\nthe model's files, from %s on this host, at the root of the PersistentVolumeClaim %s", study.Model, s.ModelClaim)
	}
	if hfSecret != "" {
		head += fmt.Sprintf("\nthe Hugging Face token: kubectl create secret generic %s --from-literal=%s=\"$HF_TOKEN\"",
			engine.ShellQuote(hfSecret), kube.HFSecretKey)
	}
	if err := kube.Comment(w, head); err != nil {
		return err
	}
	return kube.Write(w, objs...)
}

// disaggManifests are the manifests of disaggregated point p: per role a
// Deployment of its engines and a Service, the router's Deployment in
// front of the roles' Services and the Service clients use. The router is
// the recipe's for release ver (spec.RecipeRouter), in routerImage, else
// in an image that has its command (a packaged router's), else the
// engine's; the image is returned beside the manifests.
func disaggManifests(study *spec.Spec, s kube.Serve, p recommend.Point, routerImage string, ver engine.Version) ([]any, string, error) {
	d := study.Disaggregation
	router, packaged := study.RecipeRouter(ver)
	if routerImage == "" {
		routerImage = s.Image
		if packaged != nil {
			routerImage = packaged.Image
		}
	}
	var parts []kube.Part
	for _, part := range p.Settings.Parts() {
		if part.Index > 0 { // the role's engines are one Deployment's replicas
			parts[len(parts)-1].Replicas++
			continue
		}
		parts = append(parts, kube.Part{Role: part.Role, Replicas: 1, Settings: part.Settings, GPUs: part.GPUs(),
			Extra: append(engine.RoleArgs(study.Engine, part.Role, d.KV), study.Space.Extra...)})
	}
	urls := map[engine.Role][]string{}
	for _, part := range parts {
		urls[part.Role] = []string{kube.PartURL(s, part.Role)}
	}
	argv, err := engine.RouterArgv(router.Command, router.EachPrefill, router.EachDecode, urls, "servetune")
	if err != nil {
		return nil, "", err
	}
	argv = launcher.ExpandCommand(argv, study.Model, nil, "0.0.0.0", engine.ContainerPort)
	objs, err := kube.Disaggregated(s, parts, kube.Router{Argv: redact.Args(argv), Image: routerImage, HealthPath: router.HealthPath})
	return objs, routerImage, err
}

// serveArgv returns the command that serves the recommendation, secret
// flags' values redacted (spec.Spec.ServeArgv).
func serveArgv(study *spec.Spec, p recommend.Point, format string) []string {
	return study.ServeArgv(p, format)
}

// metricCI is one figure of a recommendation.
type metricCI struct {
	Mean float64    `json:"mean"`
	CI95 [2]float64 `json:"ci95"`
	Unit string     `json:"unit"`
}

func candidateMetrics(c recommend.Candidate) map[string]metricCI {
	out := map[string]metricCI{}
	for _, name := range recommend.Figures() {
		if m, ci, ok := c.MetricCI(name); ok {
			out[name] = metricCI{Mean: m, CI95: ci, Unit: recommend.Unit(name)}
		}
	}
	return out
}

// recommendedQuality is what the study's quality gate said of the
// recommended trial: its verdict, or why the gate scored nothing (the
// simulated engine); nil without a gate.
func recommendedQuality(study *spec.Spec, st store.Study, trials []store.Trial, number int) *measure.Quality {
	if study.Quality == nil {
		return nil
	}
	for _, t := range trials {
		if t.Number == number && t.Quality != nil {
			return t.Quality
		}
	}
	if b, ok, _ := tuner.ParseQualityBaseline(st.QualityBaseline); ok && b.NotApplied != "" {
		return &measure.Quality{Reason: "the gate was not applied: " + b.NotApplied}
	}
	return &measure.Quality{Reason: "this trial was not checked (measured before the study had its gate)"}
}

// recommendationDoc is the recommendation as recommend's JSON and YAML
// write it: the point, its figures over its runs, the command, findings,
// the quality verdict, the runner-up, and for a study with a
// disaggregation section its shape, parts and the other shape's best.
func recommendationDoc(study *spec.Spec, rec recommend.Recommendation, alt *recommend.Recommendation, pref recommend.Preference, verdict *measure.Quality, findings []diagnose.Finding) map[string]any {
	best := rec.Best
	p := best.Point
	pj := toPointJSON(p, study)
	doc := map[string]any{
		"study": study.Name, "model": study.Model, "engine": string(study.Engine), "prefer": string(pref.For(study.Tuner.Objective)), "slo_risks": nonNil(rec.Best.SLORisks(study.SLO)),
		"trial": pj.Trial, "level": pj.Level, "gpus": pj.GPUs, "settings": pj.Settings, "metrics": pj.Metrics,
		"runs": best.Runs(), "metrics_ci95": candidateMetrics(best),
		"command":  serveArgv(study, p, string(study.Engine)),
		"findings": findings,
	}
	if verdict != nil {
		doc["quality"] = verdict
	}
	if f := recommend.RequestFailures([]measure.Level{p.Level}); f != "" {
		doc["failed_requests"] = f
	}
	if findings == nil {
		doc["findings"] = []diagnose.Finding{}
	}
	if ru := rec.RunnerUp; ru != nil {
		doc["runner_up"] = map[string]any{"trial": ru.Trial, "settings": ru.Settings, "runs": ru.Runs(),
			"metrics_ci95": candidateMetrics(*ru), "separated": rec.Separated}
	}
	if study.Disaggregation != nil {
		doc["shape"] = p.Settings.Shape()
		if parts := partsJSON(study, p); parts != nil {
			doc["parts"] = parts
		}
		if alt != nil {
			a := alt.Best
			ad := map[string]any{"shape": a.Point.Settings.Shape(), "trial": a.Trial, "settings": a.Settings,
				"gpus": a.Point.GPUs, "metrics_ci95": candidateMetrics(a), "difference_pct": best.Difference(a, recommend.Figures())}
			if parts := partsJSON(study, a.Point); parts != nil {
				ad["parts"] = parts
			} else {
				ad["command"] = serveArgv(study, a.Point, string(study.Engine))
			}
			doc["alternative"] = ad
		}
	}
	return doc
}

// engineFor is the engine a recommend format's command runs: the study's
// for vllm-less formats (docker, yaml, json), else the format's.
func engineFor(study *spec.Spec, format string) engine.Engine {
	switch format {
	case string(engine.VLLM):
		return engine.VLLM
	case string(engine.SGLang):
		return engine.SGLang
	}
	return study.Engine
}

// versionLines are the comment lines that say which release of its
// engine a printed command is for, and every flag of it that release
// does not take (engine.CheckFlags).
func versionLines(e engine.Engine, v engine.Version, argvs ...[]string) []string {
	lines := []string{fmt.Sprintf("for %s %s (the flags servetune knows for it; --engine-version picks another release)", e, v)}
	seen := map[string]bool{}
	for _, argv := range argvs {
		for _, p := range engine.CheckFlags(e, v, argv) {
			if !seen[p] {
				seen[p] = true
				lines = append(lines, "warning: "+p+"; remove it (a spec's extra_args) before running this command")
			}
		}
	}
	return lines
}

func writeRecommendation(w io.Writer, study *spec.Spec, rec recommend.Recommendation, alt *recommend.Recommendation, pref recommend.Preference, format string, verdict *measure.Quality, ver engine.Version) error {
	best := rec.Best
	p := best.Point
	pj := toPointJSON(p, study)
	// Why it performs as it does, at the recommended level.
	findings := diagnose.Level(recommendedInput(study, p))
	switch format {
	case "json", "yaml":
		doc := recommendationDoc(study, rec, alt, pref, verdict, findings)
		v := ver
		if v == (engine.Version{}) {
			v = engine.NewestVersion(study.Engine)
		}
		doc["engine_version"] = v.String()
		doc["flag_problems"] = nonNil(engine.CheckFlags(study.Engine, v, serveArgv(study, p, string(study.Engine))))
		if format == "json" {
			return writeJSON(w, doc)
		}
		return yamlenc.Encode(w, doc) // the command holds the spec's strings
	}
	e := engineFor(study, format)
	if ver == (engine.Version{}) {
		ver = engine.NewestVersion(e)
	}
	argv := study.ServeArgvFor(p, format, ver)
	runs := "1 run"
	if best.Runs() > 1 {
		runs = fmt.Sprintf("%d runs, 95%% CI", best.Runs())
	}
	fmt.Fprintf(w, "# %s: trial %d at %s, best %s under SLO %s (%s):\n", study.Name, p.Trial, pj.Level, pref.For(study.Tuner.Objective).Describe(study.Tuner.Objective), study.SLO, runs)
	var parts []string
	for _, name := range recommend.Figures() {
		if value, ci, ok := best.Figure(name); ok {
			parts = append(parts, name+"="+strings.TrimSpace(value+" "+ci))
		}
	}
	fmt.Fprintf(w, "#   %s\n", strings.Join(parts, "  "))
	if f := recommend.RequestFailures([]measure.Level{p.Level}); f != "" {
		// Within slo.error_rate, yet the user serves a configuration
		// that fails requests at this load.
		fmt.Fprintf(w, "#   at this level %s\n", f)
	}
	for _, r := range best.SLORisks(study.SLO) {
		fmt.Fprint(w, "# "+wrap("caution: "+r, 100, "#   ")[4:])
	}
	if ru := rec.RunnerUp; ru != nil {
		sep := "cannot be separated from the best at 95%: either will do"
		if rec.Separated {
			sep = "the best is better at 95%"
		}
		// The report writes the same figure (Candidate.Figure).
		value, ci, _ := ru.Figure(best.Metric)
		fmt.Fprintf(w, "# runner-up: trial %d, %s=%s; %s\n#   %s\n", ru.Trial, best.Metric, strings.TrimSpace(value+" "+ci), sep, term.Line(settingsLine(ru.Settings)))
	}
	for _, c := range []*recommend.Candidate{&rec.Best, rec.RunnerUp} {
		if c == nil {
			continue
		}
		if d := c.Disagreement(); d != "" {
			fmt.Fprint(w, "# "+wrap(fmt.Sprintf("trial %d: %s", c.Trial, d), 100, "#   ")[4:])
		}
	}
	if verdict != nil {
		fmt.Fprint(w, "# "+wrap(verdict.String(), 100, "#   ")[4:])
	}
	for _, f := range findings {
		fmt.Fprint(w, "# - "+wrap(f.String(), 100, "#   ")[4:])
	}
	if alt != nil {
		writeAlternative(w, study, best, alt.Best)
	}
	partsVer := engine.Version{} // the parts are the study's engine's: another engine's release is not theirs
	if e == study.Engine {
		partsVer = ver
	}
	argvs := [][]string{argv}
	for _, c := range study.PartCommandsFor(p, partsVer) {
		argvs = append(argvs, c.Argv)
	}
	for _, l := range versionLines(e, ver, argvs...) {
		fmt.Fprint(w, "# "+wrap(l, 100, "#   ")[4:])
	}
	if parts := study.PartCommandsFor(p, partsVer); parts != nil {
		fmt.Fprintf(w, "# disaggregated on one host: %d engines in the background, each on its GPUs, and the router in front (on several hosts, each engine's host in the router's)\n", len(parts)-1)
		for _, line := range spec.Script(parts) {
			fmt.Fprintln(w, line)
		}
		return nil
	}
	fmt.Fprintln(w, engine.ShellJoin(argv))
	return nil
}

// shapeAlternative is the other shape's recommendation beside best's
// (recommend.OtherShape), nil for a study without a disaggregation
// section.
func shapeAlternative(trials []store.Trial, study *spec.Spec, pref recommend.Preference, best recommend.Candidate) *recommend.Recommendation {
	if study.Disaggregation == nil {
		return nil
	}
	return recommend.OtherShape(trials, study.Terms(), pref, best)
}

// writeAlternative writes the other shape's best measured configuration
// as comments: its figures, the measured difference and its commands.
func writeAlternative(w io.Writer, study *spec.Spec, best, alt recommend.Candidate) {
	p := alt.Point
	var figs []string
	for _, name := range recommend.Figures() {
		if value, ci, ok := alt.Figure(name); ok {
			figs = append(figs, name+"="+strings.TrimSpace(value+" "+ci))
		}
	}
	fmt.Fprintf(w, "# %s alternative: trial %d at %s (GPUs: %d):\n#   %s\n", p.Settings.Shape(), alt.Trial, p.Label, p.GPUs, strings.Join(figs, "  "))
	diff := best.Difference(alt, recommend.Figures())
	var ds []string
	for _, name := range recommend.Figures() {
		if d, ok := diff[name]; ok {
			ds = append(ds, fmt.Sprintf("%s %+.1f%%", name, d))
		}
	}
	if len(ds) > 0 {
		fmt.Fprintf(w, "# measured, %s against %s: %s\n", best.Point.Settings.Shape(), p.Settings.Shape(), strings.Join(ds, ", "))
	}
	if parts := study.PartCommands(p); parts != nil {
		for _, line := range spec.Script(parts) {
			fmt.Fprintln(w, "#   "+line)
		}
		return
	}
	fmt.Fprintln(w, "#   "+engine.ShellJoin(serveArgv(study, p, string(study.Engine))))
}

// partJSON is one process of a disaggregated recommendation: the
// router's with the line that installs it and the stand-in the study
// measured in its place (spec.PartCommand).
type partJSON struct {
	Name     string   `json:"name"`
	Role     string   `json:"role,omitempty"`
	GPUs     []int    `json:"gpus,omitempty"`
	Env      []string `json:"env,omitempty"`
	Port     int      `json:"port"`
	Command  []string `json:"command"`
	Install  string   `json:"install,omitempty"`
	Measured []string `json:"measured,omitempty"`
}

func partsJSON(study *spec.Spec, p recommend.Point) []partJSON {
	var out []partJSON
	for _, c := range study.PartCommands(p) {
		out = append(out, partJSON{Name: c.Name, Role: string(c.Role), GPUs: c.GPUs, Env: c.Env, Port: c.Port, Command: c.Argv, Install: c.Install, Measured: c.Measured})
	}
	return out
}

// seconds is a duration in seconds, nil for nil.
func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}

// secondsText shows seconds as "1.24s", "-" for none.
func secondsText(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fs", *s)
}

// nonZero drops the zero counts of a by-class map.
func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// wrap breaks text into lines of at most width (words longer than it stay
// whole), each with indent, ending in a newline.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	if len(line) > len(indent) {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// hostGPUs is the GPUs one host of the catalog GPU id holds (8 where the
// catalog does not know it).
func hostGPUs(id string) int {
	if g, err := catalog.LookupGPU(id); err == nil {
		return g.HostSize()
	}
	return 8
}

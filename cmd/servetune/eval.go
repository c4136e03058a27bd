package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/load/quality"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/term"
)

// evalFile is what `eval --json` writes and `eval --baseline` reads.
type evalFile struct {
	Tool    string         `json:"tool"`
	BaseURL string         `json:"base_url"` // without user information or query
	Model   string         `json:"model"`
	Seed    uint64         `json:"seed"`
	Result  quality.Result `json:"result"`
}

type evalFlags struct {
	baseURL, model, endpoint, apiKeyEnv string
	items, concurrency                  int
	seed                                uint64
	jsonOut, baseline                   string
	maxDrop                             float64
}

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval --base-url URL --model NAME [--baseline BASE.json]",
		Short: "Score a server's answers on a built-in exact-answer task set (the quality gate)",
		Long: `Ask an OpenAI-compatible server a seeded set of questions with exact answers
(arithmetic, copying, counting, date arithmetic; no download) with greedy
decoding, and score exact matches. With --baseline (an earlier --json of the
reference configuration, same --seed and --items) it also reports the drop in
accuracy and how many answers agree with the baseline's, and exits 3 when the
drop exceeds --max-drop-pct. servetune's simulated engine answers with
placeholder text and says so: it is reported as not scorable (exit 1).`,
		Example: `  servetune eval --base-url http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B-Instruct --json bf16.json
  servetune eval --base-url http://127.0.0.1:8001 --model meta-llama/Llama-3.1-8B-Instruct --baseline bf16.json --max-drop-pct 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEval(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "server base URL, e.g. http://127.0.0.1:8000 (required)")
	fl.StringVar(&f.model, "model", "", "model name sent in requests (required)")
	fl.StringVar(&f.endpoint, "endpoint-type", "completions", "completions (/v1/completions) or chat (/v1/chat/completions)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (sent as Bearer; never written anywhere)")
	fl.IntVar(&f.items, "items", quality.DefaultItems, "tasks to ask (the kinds in turn)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the task set: the same seed asks the same questions")
	fl.IntVar(&f.concurrency, "concurrency", 16, "requests in flight")
	addJSONFlag(fl, &f.jsonOut, "the result, with every answer,")
	fl.StringVar(&f.baseline, "baseline", "", "an earlier --json of the reference configuration to compare with")
	fl.Float64Var(&f.maxDrop, "max-drop-pct", 1.0, "with --baseline: the accuracy drop, in points, past which the gate fails (exit 3)")
	return cmd
}

func runEval(cmd *cobra.Command, f *evalFlags) error {
	t := openai.Target{BaseURL: f.baseURL, Model: f.model, Endpoint: f.endpoint}
	switch {
	case f.baseURL == "":
		return usageErrorf("--base-url is required")
	case f.model == "":
		return usageErrorf("--model is required")
	case f.items < len(quality.Kinds):
		return usageErrorf("--items %d: want at least %d (one of each kind)", f.items, len(quality.Kinds))
	case f.concurrency < 1:
		return usageErrorf("--concurrency %d: must be >= 1", f.concurrency)
	case f.maxDrop < 0 || math.IsNaN(f.maxDrop) || math.IsInf(f.maxDrop, 0):
		return usageErrorf("--max-drop-pct %g: must be a number >= 0", f.maxDrop)
	}
	if err := t.Validate(); err != nil {
		return usageErrorf("--base-url/--endpoint-type: %v: %v", bench.ErrBadConfig, err)
	}
	if f.apiKeyEnv != "" {
		if t.APIKey = os.Getenv(f.apiKeyEnv); t.APIKey == "" {
			return usageErrorf("--api-key-env: environment variable %s is empty or unset", f.apiKeyEnv)
		}
	}
	var base *evalFile
	if f.baseline != "" {
		b, err := readEvalFile(f.baseline)
		if err != nil {
			return usageError(err)
		}
		if b.Seed != f.seed || b.Result.Items != f.items {
			return usageErrorf("--baseline %s asked %d tasks of seed %d; this run asks %d of seed %d (give the same --seed and --items)",
				f.baseline, b.Result.Items, b.Seed, f.items, f.seed)
		}
		base = &b
	}
	tasks := quality.Tasks(f.seed, f.items)
	res, err := quality.Run(cmd.Context(), t,
		tasks, quality.Options{Concurrency: f.concurrency})
	if err != nil {
		return failedError(fmt.Errorf("eval %s: %w", t.RedactedURL(), err))
	}
	w := tableOut(cmd, f.jsonOut)
	if f.jsonOut != "" {
		ef := evalFile{Tool: "servetune " + version, BaseURL: t.RedactedURL(), Model: t.Model, Seed: f.seed, Result: res}
		if err := writeJSONOutput(cmd.OutOrStdout(), f.jsonOut, ef); err != nil {
			return err
		}
	}
	if res.Simulated {
		return failedError(errors.New("not scored: " + quality.SimulatedReason))
	}
	printEval(w, t, f.seed, res)
	if base == nil {
		return nil
	}
	v := quality.Judge(res, base.Result, f.maxDrop)
	fmt.Fprintf(w, "against %s (%s): %s\n", f.baseline, term.Line(redact.URL(base.BaseURL)), v)
	if v.Scored && !v.Pass {
		return &exitError{code: exitSLOMiss, err: fmt.Errorf("quality gate: accuracy dropped %.1f points, more than the %.1f allowed", v.DropPct, f.maxDrop)}
	}
	return nil
}

func readEvalFile(path string) (evalFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return evalFile{}, fmt.Errorf("--baseline: %w", err)
	}
	var e evalFile
	if err := json.Unmarshal(raw, &e); err != nil || e.Result.Items == 0 || len(e.Result.Outputs) != e.Result.Items {
		return evalFile{}, fmt.Errorf("--baseline %s: not a servetune eval --json file", path)
	}
	if e.Result.Simulated {
		return evalFile{}, fmt.Errorf("--baseline %s: %s", path, quality.SimulatedReason)
	}
	return e, nil
}

func printEval(w io.Writer, t openai.Target, seed uint64, r quality.Result) {
	fmt.Fprintf(w, "Quality of %s at %s: %d tasks (seed %d), greedy decoding, exact match\n", t.Model, t.RedactedURL(), r.Items, seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tACCURACY")
	for _, k := range quality.Kinds {
		if v, ok := r.ByKindPct[k]; ok {
			fmt.Fprintf(tw, "%s\t%.1f%%\n", k, v)
		}
	}
	fmt.Fprintf(tw, "all\t%.1f%% (%d of %d)\n", r.AccuracyPct, r.Correct, r.Items)
	tw.Flush()
	if r.Errors > 0 {
		fmt.Fprintf(w, "%d tasks unanswered (counted wrong), the first: %s\n", r.Errors, term.Line(r.FirstError))
	}
}

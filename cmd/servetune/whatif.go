package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/registry"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
	"github.com/servetune/servetune/tuner/whatif"
)

type whatifFlags struct {
	bench                     benchFlags
	spec                      string
	model, gpus, engines, slo string
	maxGPUs                   int
	targetRPS, perDay, peak   float64
	prices                    []string
	reserved                  float64
	maxReplicas               int
	maxMonthly                float64
	calibrations              []string
	force                     bool
	quant, kv                 string
	shapes, kvLink            string
	maxModelLen, trials       int
	requests                  int
	jsonOut                   string
	noProgress                bool
	specAccept                float64
	specTokens                int
	specMethod, specDraft     string
}

func newWhatifCmd() *cobra.Command { return whatifCmd(&whatifFlags{}) }

// whatifCmd is the command, its flags parsed into f.
func whatifCmd(f *whatifFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "whatif --model M --gpus G1,G2 --slo LIMITS [--target-rps R | --requests-per-day N --peak-factor F] [flags]",
		Short: "Which GPU, how many, at what cost: search every GPU type and count in virtual time and rank them by cost",
		Long: `For a model and its traffic, search every GPU type of --gpus with 1, 2, 4, 8 GPUs per
replica (up to --max-gpus) and every engine of --engine: the tuner searches each
candidate's settings (tensor/pipeline split, running requests, batched tokens, memory
fraction, KV cache type, the weight quantizations --quantizations allows) in virtual
time, each trial finding the highest Poisson request rate whose p99 latencies meet
--slo with no failed request. Rows say what one replica serves, how many replicas
the target needs, what they cost a month (on-demand and reserved) and per million
output tokens, and the serve command; rows that cannot hold the model say why.
Every row carries the simulator's expected error band for its regime, and rows
within each other's band are marked as ties. --spec reads the question from a
study spec's model, workload, slo and whatif: section (docs/spec.md); flags win.`,
		Example: `  servetune whatif --model meta-llama/Llama-3.3-70B-Instruct --gpus H100-SXM,H200,B200,L40S,A100-80G \
    --input-len 2048 --output-len 256 --slo ttft_p99_ms=2000,tpot_p99_ms=50 --target-rps 20
  servetune whatif --model ./my-model --gpus H100-SXM --calibration h100.json --slo tpot_p99_ms=40 --json out.json
  servetune whatif --spec examples/whatif.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWhatif(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.spec, "spec", "", "read the question from a study spec (model, workload.dataset, slo, whatif:)")
	fl.StringVar(&f.model, "model", "", "model: a catalog id, or a Hugging Face config.json or a directory holding one")
	fl.StringVar(&f.gpus, "gpus", "", "GPU types to consider, comma-separated (catalog ids, e.g. H100-SXM,H200,B200)")
	fl.IntVar(&f.maxGPUs, "max-gpus", 8, "most GPUs per replica (1, 2, 4, ... up to this)")
	fl.StringVar(&f.engines, "engine", "vllm", "engines, comma-separated: vllm, sglang")
	datasetFlags(fl, &f.bench)
	fl.StringVar(&f.slo, "slo", "", "latency limits per request level: ttft_p99_ms=2000,tpot_p99_ms=50 (required)")
	fl.Float64Var(&f.targetRPS, "target-rps", 0, "peak requests per second to serve (rows rank by $/month); without a target they rank by $/Mtok")
	fl.Float64Var(&f.perDay, "requests-per-day", 0, "requests a day, instead of --target-rps (target = N / 86400 x --peak-factor)")
	fl.Float64Var(&f.peak, "peak-factor", 2, "peak over average rate, with --requests-per-day")
	fl.IntVar(&f.maxReplicas, "max-replicas", whatif.DefaultMaxReplicas, "most replicas a row may need for the target; rows past it are marked unusable, not ranked")
	fl.Float64Var(&f.maxMonthly, "max-monthly-cost", 0, "most $ per month a row may cost; rows past it are marked unusable, not ranked (0: no limit)")
	fl.StringSliceVar(&f.prices, "price", nil, "on-demand $/GPU-hour overriding the catalog's, e.g. H100-SXM=2.5,H200=3.8")
	fl.Float64Var(&f.reserved, "reserved-discount", 0.4, "share a reservation takes off the on-demand price")
	fl.StringSliceVar(&f.calibrations, "calibration", nil, "calibration profiles (servetune calibrate); each applies to the rows of its GPU and engine")
	fl.BoolVar(&f.force, "force-calibration", false, "apply the one --calibration profile to every row, whatever it was measured on")
	fl.StringVar(&f.quant, "quantizations", "none", "weight quantizations allowed, comma-separated: none (the checkpoint's), fp8, awq, gptq")
	fl.StringVar(&f.kv, "kv-cache-dtypes", "auto,fp8", "KV cache types allowed, comma-separated: auto, fp8")
	fl.IntVar(&f.maxModelLen, "max-model-len", 0, "the engine's context length (default: the workload's longest request, rounded up to 1024)")
	fl.StringVar(&f.shapes, "shapes", whatif.ShapeAggregated, "deployment shapes to compare, comma-separated: aggregated (one engine per replica), disaggregated (prefill and decode engines behind a router, their split searched within --max-gpus)")
	fl.StringVar(&f.kvLink, "kv-link", sim.DefaultLink, "disaggregated rows: the link the KV cache crosses from prefill to decode ("+strings.Join(sim.LinkNames(), ", ")+")")
	fl.IntVar(&f.trials, "trials", 12, "tuner trials per candidate")
	fl.IntVar(&f.requests, "requests", 200, "requests per probe of the capacity search")
	fl.Uint64Var(&f.bench.seed, "seed", 0, "random seed of the samplers and the workload")
	fl.Float64Var(&f.specAccept, "spec-acceptance", 0, "also try speculative decoding whose draft tokens are each accepted at this rate (the simulator takes it as given); rows take it where it wins")
	fl.IntVar(&f.specTokens, "spec-tokens", 3, "with --spec-acceptance: draft tokens per step")
	fl.StringVar(&f.specMethod, "spec-method", "eagle3", "with --spec-acceptance: eagle, eagle3, mtp, ngram or draft_model")
	fl.StringVar(&f.specDraft, "spec-draft", "", "with --spec-acceptance: the draft head or model (eagle, eagle3, draft_model)")
	addJSONFlag(fl, &f.jsonOut, "the report")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no live progress line")
	return cmd
}

// whatifOptions builds the question from the flags (and --spec); every
// error is a usage error.
// whatifSpecOptions reads the options of a study spec's model, workload,
// SLOs and whatif section (`whatif --spec`); flags override them.
func whatifSpecOptions(path string) (whatif.Options, *spec.Spec, error) {
	var o whatif.Options
	study, _, err := tuner.ParseSpecFile(path)
	if err != nil {
		return o, nil, err
	}
	o.Model = study.Model
	if study.ModelConfig != "" {
		o.Model = study.ModelConfig
	}
	o.Engines = []engine.Engine{study.Engine}
	o.Dataset, o.SLO, o.Seed = study.Workload.Dataset, study.SLO, study.Tuner.Seed
	// The flags' defaults, so a spec gives the options its flags would.
	o.Shapes, o.KVLink, o.ReservedDiscount = []string{whatif.ShapeAggregated}, sim.DefaultLink, 0.4
	if d := study.Disaggregation; d != nil && d.KVLink != "" {
		o.KVLink = d.KVLink
	}
	w := study.Whatif
	if w == nil {
		return o, study, nil
	}
	if len(w.Shapes) > 0 {
		o.Shapes = w.Shapes
	}
	if w.KVLink != "" {
		o.KVLink = w.KVLink
	}
	if s := w.Speculative; s != nil {
		o.Spec = &whatif.Speculation{Method: s.Method, Tokens: s.Tokens, Draft: s.Draft, Acceptance: s.Acceptance}
	}
	o.GPUs, o.MaxGPUs, o.TargetRPS, o.Prices = w.GPUs, w.MaxGPUs, w.TargetRPS, w.Prices
	if len(w.Engines) > 0 {
		o.Engines = w.Engines
	}
	if w.RequestsPerDay > 0 {
		peak := w.PeakFactor
		if peak == 0 {
			peak = 2
		}
		o.TargetRPS = w.RequestsPerDay / 86400 * peak
	}
	if w.ReservedDiscount != nil {
		o.ReservedDiscount = *w.ReservedDiscount
	}
	o.Quantizations, o.KVCacheDTypes, o.MaxModelLen, o.Trials = w.Quantization, w.KVCacheDTypes, w.MaxModelLen, w.Trials
	o.Force = w.ForceCalibration
	for _, c := range w.Calibration {
		p, err := sim.LoadProfile(c)
		if err != nil {
			return o, nil, err
		}
		o.Calibrations = append(o.Calibrations, whatif.Calibration{Name: c, Profile: p})
	}
	return o, study, nil
}

// whatifLoadAndPrices applies the target load and price flags to o.
func whatifLoadAndPrices(fl *pflag.FlagSet, f *whatifFlags, o *whatif.Options) error {
	if fl.Changed("target-rps") && fl.Changed("requests-per-day") {
		return errors.New("--target-rps and --requests-per-day: give one")
	}
	if fl.Changed("target-rps") {
		if !(f.targetRPS > 0) {
			return fmt.Errorf("--target-rps %g: must be positive", f.targetRPS)
		}
		o.TargetRPS = f.targetRPS
	}
	if fl.Changed("requests-per-day") {
		if !(f.perDay > 0) || !(f.peak >= 1) {
			return fmt.Errorf("--requests-per-day %g --peak-factor %g: want a positive count and a factor of at least 1", f.perDay, f.peak)
		}
		o.TargetRPS = f.perDay / 86400 * f.peak
	}
	if len(f.prices) > 0 {
		if o.Prices == nil {
			o.Prices = map[string]float64{}
		}
		for _, p := range f.prices {
			id, v, ok := strings.Cut(p, "=")
			price, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if !ok || err != nil || !(price > 0) {
				return fmt.Errorf("--price %q: want GPU=$/GPU-hour, e.g. H100-SXM=2.5", p)
			}
			g, err := catalog.LookupGPU(strings.TrimSpace(id))
			if err != nil {
				return fmt.Errorf("--price: %w", err)
			}
			o.Prices[g.ID] = price
		}
	}
	return nil
}

func whatifOptions(fl *pflag.FlagSet, f *whatifFlags) (whatif.Options, error) {
	var o whatif.Options
	var study *spec.Spec
	if f.spec != "" {
		var err error
		if o, study, err = whatifSpecOptions(f.spec); err != nil {
			return o, err
		}
	}
	set := func(name string) bool { return study == nil || fl.Changed(name) }
	if set("model") {
		o.Model = f.model
	}
	if o.Model == "" {
		return o, errors.New("--model: give a model (a catalog id, or a config.json or a directory holding one)")
	}
	if set("gpus") {
		o.GPUs = splitList(f.gpus)
	}
	if set("max-gpus") {
		o.MaxGPUs = f.maxGPUs
	}
	if set("engine") {
		o.Engines = nil
		for _, e := range splitList(f.engines) {
			eng, err := engine.Parse(e)
			if err != nil {
				return o, fmt.Errorf("--engine: %w", err)
			}
			o.Engines = append(o.Engines, eng)
		}
	}
	if err := whatifDataset(fl, f, study != nil, &o); err != nil {
		return o, err
	}
	if set("slo") {
		if f.slo == "" {
			return o, errors.New("--slo: give the latency limits, e.g. ttft_p99_ms=2000,tpot_p99_ms=50")
		}
		slo, err := recommend.ParseSLO(f.slo)
		if err != nil {
			return o, fmt.Errorf("--slo: %w", err)
		}
		o.SLO = slo
	}
	if err := whatifLoadAndPrices(fl, f, &o); err != nil {
		return o, err
	}
	if set("reserved-discount") {
		o.ReservedDiscount = f.reserved
	}
	o.MaxReplicas, o.MaxMonthlyCost = f.maxReplicas, f.maxMonthly
	if err := whatifSearch(fl, f, set, &o); err != nil {
		return o, err
	}
	o.RequestsPerLevel = f.requests
	if fl.Changed("seed") || study == nil {
		o.Seed = int64(f.bench.seed)
	}
	return o, nil
}

// whatifDataset sets o's workload from the dataset flags: always without
// a spec, and with one only when a dataset flag was given.
func whatifDataset(fl *pflag.FlagSet, f *whatifFlags, fromSpec bool, o *whatif.Options) error {
	datasetChanged := false
	fl.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "dataset", "dataset-path", "input-len", "output-len", "range-ratio", "input-dist", "output-dist", "prefix-groups", "prefix-len",
			"trace-format", "trace-speed", "trace-start", "trace-duration", "sessions", "turns", "think-time":
			datasetChanged = true
		}
	})
	if !fromSpec || datasetChanged {
		ds, err := benchDataset(&f.bench)
		if err != nil {
			return err
		}
		o.Dataset = ds
	}
	return nil
}

// whatifSearch sets what each candidate's search may try: calibration
// profiles, quantizations and KV cache types, context length, trials,
// speculation, shapes and the KV link (set: whether a flag overrides the
// spec's value).
func whatifSearch(fl *pflag.FlagSet, f *whatifFlags, set func(string) bool, o *whatif.Options) error {
	if len(f.calibrations) > 0 {
		o.Calibrations = nil
		for _, c := range f.calibrations {
			p, err := sim.LoadProfile(c)
			if err != nil {
				return err
			}
			o.Calibrations = append(o.Calibrations, whatif.Calibration{Name: c, Profile: p})
		}
	}
	if fl.Changed("force-calibration") {
		o.Force = f.force
	}
	if set("quantizations") {
		o.Quantizations = splitList(f.quant)
	}
	if set("kv-cache-dtypes") {
		o.KVCacheDTypes = splitList(f.kv)
	}
	if set("max-model-len") {
		o.MaxModelLen = f.maxModelLen
	}
	if set("trials") {
		o.Trials = f.trials
	}
	if err := whatifSpeculation(fl, f, o); err != nil {
		return err
	}
	if set("shapes") {
		o.Shapes = splitList(f.shapes)
	}
	if set("kv-link") {
		o.KVLink = f.kvLink
	}
	return nil
}

// whatifSpeculation sets o.Spec from --spec-acceptance and its companions,
// which say nothing without it or the spec's whatif.speculative; each
// flag given overrides that field of the spec's.
func whatifSpeculation(fl *pflag.FlagSet, f *whatifFlags, o *whatif.Options) error {
	s := o.Spec
	if s == nil {
		if !fl.Changed("spec-acceptance") {
			for _, name := range []string{"spec-tokens", "spec-method", "spec-draft"} {
				if fl.Changed(name) {
					return fmt.Errorf("--%s needs --spec-acceptance (the rate the simulator takes as given) or a spec's whatif.speculative", name)
				}
			}
			return nil
		}
		s = &whatif.Speculation{Method: f.specMethod, Tokens: f.specTokens, Draft: f.specDraft}
	}
	c := *s
	if fl.Changed("spec-acceptance") {
		c.Acceptance = f.specAccept
	}
	if fl.Changed("spec-tokens") {
		c.Tokens = f.specTokens
	}
	if fl.Changed("spec-method") {
		c.Method = f.specMethod
	}
	if fl.Changed("spec-draft") {
		c.Draft = f.specDraft
	}
	o.Spec = &c
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runWhatif(cmd *cobra.Command, f *whatifFlags) error {
	o, err := whatifOptions(cmd.Flags(), f)
	if err != nil {
		return usageError(err)
	}
	stderr := cmd.ErrOrStderr()
	var last time.Time
	tty := isTerminal(stderr)
	if !f.noProgress {
		o.Progress = whatifProgress(stderr, tty, &last)
	}
	rep, err := whatif.Run(cmd.Context(), o)
	if tty && !last.IsZero() {
		fmt.Fprintln(stderr)
	}
	if errors.Is(err, whatif.ErrInput) {
		return usageError(errors.New(strings.TrimPrefix(err.Error(), whatif.ErrInput.Error()+": ")))
	}
	if err != nil {
		return failedError(err)
	}
	printWhatif(tableOut(cmd, f.jsonOut), rep)
	if f.jsonOut != "" {
		return writeJSONOutput(cmd.OutOrStdout(), f.jsonOut, rep)
	}
	return nil
}

// whatifProgress reports the search's progress on w. On a terminal it is
// one line redrawn in place (at most every 200 ms, and at the end); on
// anything else (a file, a pipe, a CI log) a plain line per finished
// candidate, with no terminal escape codes. last is when it last wrote.
func whatifProgress(w io.Writer, tty bool, last *time.Time) func(whatif.Progress) {
	done := -1
	return func(p whatif.Progress) {
		line := fmt.Sprintf("whatif: %d/%d candidates  %s  %s", p.Done, p.Total, p.Running, p.Elapsed.Truncate(100*time.Millisecond))
		now := time.Now()
		switch {
		case tty:
			if now.Sub(*last) >= 200*time.Millisecond || p.Done == p.Total {
				*last = now
				fmt.Fprintf(w, "\r\033[K%s", line)
			}
		case p.Done != done:
			done, *last = p.Done, now
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
}

// printWhatif writes the ranked table, the prices and their dates, the
// ties and the serve commands.
func printWhatif(w io.Writer, rep *whatif.Report) {
	engines := registry.Strings(rep.Engines)
	weights := ""
	if rep.Weights != "" {
		weights = fmt.Sprintf("; weights %s (the checkpoint's, rows without %s)", rep.Weights, engine.Flag(engine.VLLM, "quantization"))
	}
	fmt.Fprintf(w, "%s, %s; %s; SLO %s; max-model-len %d%s\n", rep.Model, strings.Join(engines, "+"), rep.Workload, rep.SLO, rep.MaxModelLen, weights)
	if rep.Conversation {
		fmt.Fprintln(w, "capacity is the highest session arrival rate (sess/s) meeting the SLO; req/s counts the turns those sessions send")
	}
	if rep.TargetRPS > 0 {
		fmt.Fprintf(w, "target %.3g req/s: ranked by $/month (%d h), on-demand and reserved (-%.0f%%)\n", rep.TargetRPS, whatif.HoursPerMonth, 100*rep.ReservedDiscount)
	} else {
		fmt.Fprintf(w, "no target: ranked by $ per million output tokens at one replica's capacity; $/month is one replica (%d h)\n", whatif.HoursPerMonth)
	}
	fmt.Fprintln(w)
	unfit := printWhatifTable(w, rep)
	if v := rep.Verdict(); v != "" {
		fmt.Fprintf(w, "\nshape: %s\n", v)
	}
	short := func(r whatif.Row) string { return whatifShortName(rep, r) }
	if d, ok := rep.Decide(); ok {
		fmt.Fprintf(w, "\nbest: %s (±%.0f%%); %d of the %d other rows that fit stand apart from it beyond the model's error\n",
			short(d.Best), 100*d.Best.ErrorBand, d.Separable, d.Fitting-1)
		if len(d.Tied) > 0 {
			names := make([]string, len(d.Tied))
			for i, r := range d.Tied {
				names[i] = short(r)
			}
			fmt.Fprintf(w, "measure before choosing: %s %s within its error (or calibrate)\n", joinAnd(names), map[bool]string{true: "is", false: "are"}[len(names) == 1])
		}
	}
	var unusable []whatif.Row
	for _, r := range unfit {
		if r.Unusable != "" {
			unusable = append(unusable, r)
		}
	}
	if len(unusable) > 0 {
		fmt.Fprintln(w, "\nunusable (serves, but past a limit; not ranked):")
		for _, r := range unusable {
			fmt.Fprintf(w, "  %s: %s\n", r.Name(), r.Unusable)
		}
	}
	if len(unfit) > len(unusable) {
		fmt.Fprintln(w, "\ncannot serve:")
		for _, r := range unfit {
			if r.Unusable == "" {
				fmt.Fprintf(w, "  %s: %s\n", r.Name(), r.Reason)
			}
		}
	}
	printWhatifSources(w, rep)
	shown := 0
	for _, r := range rep.Rows {
		if r.Rank == 0 || shown == 3 {
			break
		}
		if shown == 0 {
			fmt.Fprintf(w, "\nserve commands (per replica), for %s:\n", releasesOf(rep.Rows))
		}
		shown++
		if r.Prefill != nil && r.Decode != nil {
			fmt.Fprintf(w, "  #%d %s (%s KV link):\n", r.Rank, short(r), r.KVLink)
			fmt.Fprintf(w, "      prefill x%d (%d GPUs each): %s\n", r.Prefill.Replicas, r.Prefill.GPUsPerEngine, r.Prefill.ServeCommand)
			fmt.Fprintf(w, "      decode x%d (%d GPUs each): %s\n", r.Decode.Replicas, r.Decode.GPUsPerEngine, r.Decode.ServeCommand)
			fmt.Fprintf(w, "      router: %s\n", r.RouterCommand)
			continue
		}
		if len(r.Hosts) > 0 {
			fmt.Fprintf(w, "  #%d %s: %d hosts (HEAD_IP = host 0's address; %s):\n", r.Rank, short(r), len(r.Hosts), engine.DefaultImage(r.Engine))
			for _, h := range r.Hosts {
				fmt.Fprintf(w, "      host %d (%d GPUs): %s\n", h.Rank, h.GPUs, h.Command)
			}
			continue
		}
		fmt.Fprintf(w, "  #%d %s: %s\n", r.Rank, short(r), r.ServeCommand)
	}
	for _, r := range rep.Rows {
		if r.Calibration != "" {
			fmt.Fprintf(w, "\ncalibrated rows use their GPU's profile (%s); the others the stock constants\n", r.Calibration)
			break
		}
	}
	fmt.Fprintf(w, "\nsearched %d candidates, %d trials, in %.1f s\n", rep.Candidates, rep.TrialsRun, rep.Wall.Seconds())
}

// printWhatifTable prints the ranked rows as a table and returns the rows
// that cannot serve.
func printWhatifTable(w io.Writer, rep *whatif.Report) []whatif.Row {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// MoE rows name their parallel shape (TP8, TP8+EP8, DP8+EP8): a
	// column of its own, absent for dense models.
	// Compared deployment shapes name an aggregated dense row's too.
	shaped := slices.ContainsFunc(rep.Rows, func(r whatif.Row) bool { return r.Shape != "" })
	shapeCol := func(r whatif.Row) string {
		if !shaped {
			return ""
		}
		if r.Shape == "" && r.Deployment != "" {
			return r.Deployment + "\t"
		}
		return r.Shape + "\t"
	}
	head := "#\tGPU\tGPUs\tengine\t"
	if shaped {
		head += "shape\t"
	}
	// A conversation's capacity is its sessions' arrival rate: a column
	// of its own before the requests/s their turns make.
	sessions := func(whatif.Row) string { return "" }
	if rep.Conversation {
		head += "sess/s\t"
		sessions = func(r whatif.Row) string { return fmt.Sprintf("%.3g\t", r.CapacitySessions) }
	}
	fmt.Fprintln(tw, head+"req/s\ttok/s/GPU\tTTFT p99\tTPOT p99\treplicas\t$/month\treserved\t$/Mtok\terror\t")
	var unfit []whatif.Row
	for _, r := range rep.Rows {
		if r.Rank == 0 {
			unfit = append(unfit, r)
			continue
		}
		repl := "-"
		if rep.TargetRPS > 0 {
			repl = fmt.Sprintf("%d (+%.0f%%)", r.Replicas, 100*r.Headroom)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s%s%.3g\t%.0f\t%.0f ms\t%.1f ms\t%s\t%s\t%s\t%.2f\t±%.0f%%\t\n",
			r.Rank, r.GPU, r.GPUsPerReplica, engineCell(r), shapeCol(r), sessions(r), r.CapacityRPS, r.OutputTokensPerSPerGPU, r.TTFTP99, r.TPOTP99,
			repl, dollars(r.MonthlyCost), dollars(r.MonthlyCostReserved), r.CostPerMTok, 100*r.ErrorBand)
	}
	tw.Flush()
	return unfit
}

// engineCell is a row's engine, with the speculative method it took
// ("vllm +eagle3").
func engineCell(r whatif.Row) string {
	if f := strings.Fields(r.Speculative); len(f) > 0 {
		return string(r.Engine) + " +" + f[0]
	}
	return string(r.Engine)
}

// whatifShortName names a row in the lines under the table: its GPU,
// count and shape (and speculation), or its whole name when several
// engines compete.
func whatifShortName(rep *whatif.Report, r whatif.Row) string {
	if len(rep.Engines) > 1 {
		return r.Name()
	}
	n := fmt.Sprintf("%s x%d", r.GPU, r.GPUsPerReplica)
	if r.Shape != "" {
		n += " " + r.Shape
	}
	if f := strings.Fields(r.Speculative); len(f) > 0 {
		n += " +" + f[0]
	}
	return n
}

// printWhatifSources prints where the rows' error bands and prices come
// from.
func printWhatifSources(w io.Writer, rep *whatif.Report) {
	fmt.Fprintln(w, "\nerror bands (the simulator's expected error in each row's regime, internal/model/sim/doc.go):")
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		if r.Rank > 0 && !seen[r.BandBasis] {
			seen[r.BandBasis] = true
			fmt.Fprintf(w, "  ±%.0f%% %s\n", 100*r.ErrorBand, r.BandBasis)
		}
	}
	fmt.Fprintln(w, "\nprices used (on-demand $/GPU-hour):")
	for _, id := range slices.Sorted(maps.Keys(rep.Prices)) {
		p := rep.Prices[id]
		fmt.Fprintf(w, "  %-9s %.2f  %s, %s\n", id, p.PerGPUHour, p.Date, p.Source)
	}
}

// dollars is measure.Dollars: money is written one way everywhere.
func dollars(v float64) string { return measure.Dollars(v) }

func joinAnd(v []string) string {
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	}
	return strings.Join(v[:len(v)-1], ", ") + " and " + v[len(v)-1]
}

// releasesOf names the release of each engine of rows that printed
// commands are for: the newest the flag table knows, whose image
// (engine.DefaultImage) the multi-host recipes name.
func releasesOf(rows []whatif.Row) string {
	var out []string
	seen := map[engine.Engine]bool{}
	for _, r := range rows {
		if r.Rank > 0 && !seen[r.Engine] {
			seen[r.Engine] = true
			out = append(out, fmt.Sprintf("%s %s", r.Engine, engine.NewestVersion(r.Engine)))
		}
	}
	return joinAnd(out)
}

package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/trace"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/tuner/recommend"
)

// planFlags are plan's own flags; the rest of its command line is the
// engine's (sim.ParseArgs).
type planFlags struct {
	tracePath                string
	trace                    traceWindow
	curvePath, synth         string
	meanRate, hours          float64
	seed                     uint64
	slo                      string
	goal, headroom           float64
	routers, signal          string
	target                   float64
	minReplicas, maxReplicas int
	interval, upDelay, cool  time.Duration
	price                    float64
	jsonOut, format, out     string
	prometheus, autoscaler   string
	fromStudy, db, htmlOut   string
	replay                   bool
	replaySpeed              float64
}

func planFlagSet(f *planFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.tracePath, "trace", "", "the traffic: a trace file (the formats bench --dataset trace reads)")
	f.trace.addFlags(fs, "plan")
	fs.StringVar(&f.curvePath, "rate-curve", "", "the traffic: a rate curve file (SECONDS,RATE lines), single-turn requests with the Azure conversation trace's lengths")
	fs.StringVar(&f.synth, "synth", "", "the traffic: generated on the daily shape of the Azure LLM inference trace: day (single-turn) or conversation (multi-turn sessions sharing their history)")
	fs.Float64Var(&f.meanRate, "mean-rate", 20, "--synth, --rate-curve: mean requests per second (a curve's rates are scaled to it)")
	fs.Float64Var(&f.hours, "hours", 24, "--synth: hours of traffic, from midnight")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the generated traffic and the capacity probe")
	fs.StringVar(&f.slo, "slo", "", "per-request latency limits, e.g. ttft_p99_ms=2000,tpot_p99_ms=50 (each request is held to the limit)")
	fs.Float64Var(&f.goal, "goal", 0.99, "share of requests that must meet the SLO for a replica's capacity")
	fs.Float64Var(&f.headroom, "headroom", fleet.DefaultHeadroom, "share of its capacity the autoscaler runs a replica at (the target's source)")
	fs.StringVar(&f.routers, "router", strings.Join(fleet.RouterNames, ","), "routers to compare, comma-separated: "+strings.Join(fleet.RouterNames, ", "))
	fs.StringVar(&f.signal, "scale-on", string(fleet.SignalRunning), "the autoscaler's engine signal: running, waiting or kv (KV-cache usage)")
	fs.Float64Var(&f.target, "target", 0, "the signal's target per replica (0: the simulated replica's at --headroom of its capacity)")
	fs.IntVar(&f.minReplicas, "min-replicas", 1, "fewest replicas")
	fs.IntVar(&f.maxReplicas, "max-replicas", 64, "most replicas")
	fs.DurationVar(&f.interval, "interval", time.Duration(fleet.DefaultInterval*float64(time.Second)), "how often the autoscaler evaluates")
	fs.DurationVar(&f.upDelay, "scale-up-delay", -1, "how long a new replica takes to serve (default: --sim-load-time when given, else fleet.StartupSeconds of its weights)")
	fs.DurationVar(&f.cool, "cooldown", time.Duration(fleet.DefaultCooldown*float64(time.Second)), "scale-down stabilization window")
	fs.Float64Var(&f.price, "price", 0, "$ per GPU-hour (default: the catalog's on-demand price)")
	fs.StringVar(&f.fromStudy, "from-study", "", "the replica's configuration: the one this stored study recommends (its objective's pick), instead of engine flags")
	fs.StringVar(&f.db, "db", studyDBDefault(), "--from-study: SQLite database of studies (env SERVETUNE_DB)")
	addJSONFlag(fs, &f.jsonOut, "the plan")
	addOutputFlag(fs, &f.htmlOut, "html", "", "also write the plan as a page with its charts (traffic, replicas over time, SLO attainment by hour) to this file")
	fs.StringVar(&f.format, "format", "table", "table, or k8s (manifests: Deployment, Service, the autoscaler, router config)")
	fs.StringVar(&f.autoscaler, "autoscaler", "hpa", "--format k8s: hpa (autoscaling/v2, needs prometheus-adapter) or keda (a KEDA ScaledObject, needs KEDA's CRDs)")
	addOutputFlag(fs, &f.out, "output", "", "--format k8s: write the manifests to this file (default stdout)")
	fs.BoolVar(&f.replay, "replay", false, "then run the first router's autoscaled fleet for real here (sim serve replicas behind a router, the autoscaler on their /metrics) and print its measured SLO attainment beside the plan's")
	fs.Float64Var(&f.replaySpeed, "replay-speed", 60, "--replay: how many times faster than the traffic everything runs (60: a day in 24 min)")
	fs.StringVar(&f.prometheus, "prometheus", "http://prometheus-operated.monitoring.svc:9090", "--format k8s: the Prometheus server KEDA's trigger queries")
	return fs
}

func newPlanCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plan [engine flags | --from-study S] (--trace FILE --trace-format F | --rate-curve FILE | --synth day|conversation) --slo LIMITS [flags]",
		Short: "Plan a fleet over a day of traffic: replicas, routers and autoscaling compared in virtual time, with their cost",
		Long: `Simulate, in virtual time, a fleet of replicas of one serve configuration (the
engine's command line, as sim run takes it) serving a day of traffic: a trace, a
rate curve, or traffic generated on a published daily shape. Each replica is the
simulated engine (its scheduler, KV and prefix cache, step times). For every
router of --router the fleet is scaled by target tracking on an engine signal
(--scale-on: running or waiting requests, KV-cache usage), each new replica
serving after the scale-up delay; static provisioning at the traffic's peak
5-minute rate is planned beside them. Each policy's SLO attainment (overall and
its worst hour), peak and mean replicas, GPU-hours, cost per day and prefix-cache
hit rate (share of prompt tokens served from cache) are printed. --replay then
runs the first router's autoscaled fleet for real here (sim serve replicas, a
router, the autoscaler on their /metrics, the traffic at --replay-speed) and
prints its measured attainment, replicas and GPU-hours beside the plan's.

` + catalogHelp(),
		Example: `  servetune plan --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-SXM ` + engineFlag("max_model_len") + ` 16384 \
    --synth conversation --mean-rate 20 --slo ttft_p99_ms=2000,tpot_p99_ms=50 --json plan.json
  servetune plan --model llama-3.1-8b --trace azure_conv_2023.csv --trace-format azure --slo tpot_p99_ms=50 --router least-load,prefix
  servetune plan --from-study quickstart --synth day --mean-rate 5 --slo ttft_p99_ms=2000,tpot_p99_ms=50`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				var f planFlags
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nUsage:\n  servetune %s\n\nExamples:\n%s\n\nFlags:\n%s\n%s", cmd.Long, cmd.Use, cmd.Example, planFlagSet(&f).FlagUsages(), engineFlagsHelp())
				return nil
			}
			var f planFlags
			fs := planFlagSet(&f)
			ours, engineArgs := splitArgs(fs, args)
			if err := parseOwnFlags(fs, ours); err != nil {
				return err
			}
			if err := planStdout(&f); err != nil {
				return err
			}
			cfg, engineArgs, err := planConfig(cmd, &f, engineArgs)
			if err != nil {
				return err
			}
			// The simulator's load time, when given, is the scale-up delay.
			_, loadSet := takeValue(engineArgs, "--sim-load-time")
			loadSet = loadSet || os.Getenv("SERVETUNE_SIM_LOAD_TIME") != ""
			return runPlan(cmd, cfg, engineArgs, &f, fs, loadSet)
		},
	}
}

// planStdout refuses two outputs on standard output: --json - and the
// k8s manifests, or the replay's measurements.
func planStdout(f *planFlags) error {
	if f.jsonOut != stdoutPath {
		return nil
	}
	if f.format == "k8s" && (f.out == "" || f.out == stdoutPath) {
		return usageErrorf("--json - and --format k8s both write standard output: give the manifests --output FILE, or --json a file")
	}
	if f.replay {
		return usageErrorf("--json - and --replay: the replay's measurements are printed on standard output; give --json a file")
	}
	return nil
}

// planQuestion is a plan's checked inputs.
type planQuestion struct {
	reqs    []fleet.Request
	source  string
	slo     fleet.SLO
	routers []string
	signal  fleet.Signal
}

// planInputs checks the flags and builds the traffic; every error is a
// usage error.
func planInputs(f *planFlags) (planQuestion, error) {
	var q planQuestion
	given := 0
	for _, s := range []string{f.tracePath, f.curvePath, f.synth} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return q, fmt.Errorf("give the traffic: one of --trace, --rate-curve or --synth")
	}
	if f.slo == "" {
		return q, fmt.Errorf("--slo: required (e.g. ttft_p99_ms=2000,tpot_p99_ms=50)")
	}
	slo, err := planSLO(f.slo)
	if err != nil {
		return q, err
	}
	q.slo = slo
	for _, r := range strings.Split(f.routers, ",") {
		if _, err := fleet.NewRouter(strings.TrimSpace(r)); err != nil {
			return q, fmt.Errorf("--router: %w", err)
		}
		q.routers = append(q.routers, strings.TrimSpace(r))
	}
	if q.signal, err = fleet.ParseSignal(f.signal); err != nil {
		return q, fmt.Errorf("--scale-on: %w", err)
	}
	switch {
	case !(f.goal > 0 && f.goal <= 1):
		return q, fmt.Errorf("--goal %g: want a share in (0, 1]", f.goal)
	case !(f.headroom > 0 && f.headroom <= 1):
		return q, fmt.Errorf("--headroom %g: want a share in (0, 1]", f.headroom)
	case f.minReplicas < 1 || f.maxReplicas < f.minReplicas || f.maxReplicas > maxPlanReplicas:
		return q, fmt.Errorf("--min-replicas %d --max-replicas %d: want 1 <= min <= max <= %d", f.minReplicas, f.maxReplicas, maxPlanReplicas)
	case f.interval <= 0 || f.cool < 0:
		return q, fmt.Errorf("--interval %v --cooldown %v: want a positive interval and a cooldown of at least 0", f.interval, f.cool)
	case f.target < 0 || math.IsNaN(f.target) || math.IsInf(f.target, 0) || f.price < 0:
		return q, fmt.Errorf("--target %g --price %g: must not be negative", f.target, f.price)
	case f.format != "table" && f.format != "k8s":
		return q, fmt.Errorf("--format %q: want table or k8s", f.format)
	case f.autoscaler != "hpa" && f.autoscaler != "keda":
		return q, fmt.Errorf("--autoscaler %q: want hpa or keda", f.autoscaler)
	case f.replay && f.format == "k8s":
		return q, fmt.Errorf("--replay runs the fleet on this machine and --format k8s writes manifests for a cluster: give one of them")
	case f.replay && !(f.replaySpeed > 0 && f.replaySpeed <= maxReplaySpeed):
		return q, fmt.Errorf("--replay-speed %g: want more than 0 and at most %d", f.replaySpeed, maxReplaySpeed)
	}
	q.reqs, q.source, err = planTraffic(f)
	return q, err
}

// maxPlanReplicas bounds --max-replicas: each replica holds its prefix
// cache's table in memory.
const maxPlanReplicas = 1024

// planSLO turns --slo's limits into per-request limits: each request is
// held to every limit (goodput's reading), whatever its statistic.
func planSLO(expr string) (fleet.SLO, error) {
	var s fleet.SLO
	limits, err := recommend.ParseSLO(expr)
	if err != nil {
		return s, fmt.Errorf("--slo: %w", err)
	}
	var ms measure.SLO
	for _, l := range limits {
		m, ok := measure.LookupMetric(l.Metric)
		lim := ms.Limit(m.Series)
		if !ok || lim == nil {
			return s, fmt.Errorf("--slo %s: plan holds each request to ttft, tpot and e2el limits (vLLM's --goodput keys)", l.Metric)
		}
		*lim = l.Max
	}
	s.TTFT, s.TPOT, s.E2E = ms.TTFTms/1e3, ms.TPOTms/1e3, ms.E2ELms/1e3
	return s, nil
}

// planTraffic builds the requests of --trace, --rate-curve or --synth.
func planTraffic(f *planFlags) ([]fleet.Request, string, error) {
	if !(f.meanRate > 0) || math.IsInf(f.meanRate, 0) {
		return nil, "", fmt.Errorf("--mean-rate %g: want a positive number", f.meanRate)
	}
	switch {
	case f.tracePath != "":
		format, opts, err := f.trace.options(fleet.MaxRequests + 1)
		if err != nil {
			return nil, "", err
		}
		tr, err := trace.Load(f.tracePath, format, opts)
		if err != nil {
			return nil, "", fmt.Errorf("--trace: %w", err)
		}
		if len(tr) == 0 {
			return nil, "", fmt.Errorf("--trace %s: no request in the window", f.tracePath)
		}
		if len(tr) > fleet.MaxRequests {
			return nil, "", fmt.Errorf("--trace %s: over %d requests; narrow it with --trace-duration", f.tracePath, fleet.MaxRequests)
		}
		return fleet.FromTrace(tr), fmt.Sprintf("trace %s (%s)", f.tracePath, format), nil
	case f.curvePath != "":
		file, err := os.Open(f.curvePath)
		if err != nil {
			return nil, "", fmt.Errorf("--rate-curve: %w", err)
		}
		defer file.Close()
		c, err := fleet.ReadCurve(file, f.curvePath)
		if err != nil {
			return nil, "", fmt.Errorf("--rate-curve: %w", err)
		}
		reqs, err := fleet.Independent(c.Scaled(f.meanRate), fleet.AzureConversation, f.seed)
		if err != nil {
			return nil, "", fmt.Errorf("--rate-curve: %w", err)
		}
		return reqs, fmt.Sprintf("rate curve %s at a mean of %g req/s", f.curvePath, f.meanRate), nil
	}
	if !(f.hours > 0 && f.hours <= 24*7) {
		return nil, "", fmt.Errorf("--hours %g: want more than 0 and at most a week (168)", f.hours)
	}
	c := fleet.Day(f.meanRate)
	n := int(math.Ceil(f.hours))
	rates := make([]float64, n+1) // a point past the end, for the last hour's slope
	for h := range rates {
		rates[h] = c.Rates[h%24]
	}
	c = fleet.Curve{Step: 3600, Rates: rates}
	span := f.hours * 3600
	var reqs []fleet.Request
	var err error
	switch f.synth {
	case "day":
		reqs, err = fleet.Independent(c, fleet.AzureConversation, f.seed)
	case "conversation":
		reqs, err = fleet.Conversations(c, fleet.DefaultChat, f.seed)
	default:
		return nil, "", fmt.Errorf("--synth %q: want day or conversation", f.synth)
	}
	if err != nil {
		return nil, "", fmt.Errorf("--synth: %w", err)
	}
	for len(reqs) > 0 && reqs[len(reqs)-1].At >= span {
		reqs = reqs[:len(reqs)-1]
	}
	return reqs, fmt.Sprintf("synthetic %s traffic, %g h of the Azure daily shape at a mean of %g req/s", f.synth, f.hours, f.meanRate), nil
}

// peakRate is the traffic's highest rate over 5 minutes.
func peakRate(reqs []fleet.Request) float64 {
	const win = 300.0
	peak, j := 0, 0
	for i := range reqs {
		for reqs[i].At-reqs[j].At >= win {
			j++
		}
		peak = max(peak, i-j+1)
	}
	span := math.Min(win, math.Max(reqs[len(reqs)-1].At-reqs[0].At, 1))
	return float64(peak) / span
}

// planResult is one policy's line of the plan's JSON.
type planResult struct {
	Router        string       `json:"router"`
	Autoscaler    string       `json:"autoscaler"`
	Target        float64      `json:"target,omitempty"`
	Attainment    float64      `json:"slo_attainment"`
	PeakReplicas  int          `json:"peak_replicas"`
	MeanReplicas  float64      `json:"mean_replicas"`
	GPUHours      float64      `json:"gpu_hours"`
	CostPerDay    float64      `json:"cost_per_day"`
	PrefixHitRate float64      `json:"prefix_hit_rate"`
	Requests      int          `json:"requests"`
	Failed        int          `json:"failed"`
	Hours         []fleet.Hour `json:"hours"`
	WallSeconds   float64      `json:"wall_seconds"`
}

// planReport is the plan's JSON.
type planReport struct {
	Traffic   string         `json:"traffic"`
	Requests  int            `json:"requests"`
	Hours     float64        `json:"hours"`
	PeakRate  float64        `json:"peak_rate"`
	Model     string         `json:"model"`
	GPU       string         `json:"gpu"`
	GPUs      int            `json:"gpus_per_replica"`
	Price     float64        `json:"price_per_gpu_hour"`
	Capacity  fleet.Capacity `json:"capacity"`
	UpDelay   float64        `json:"scale_up_delay_s"`
	Policies  []planResult   `json:"policies"`
	WallTotal float64        `json:"wall_seconds"`
}

// takeValue reports whether args hold flag name (--name V or --name=V).
func takeValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func runPlan(cmd *cobra.Command, cfg sim.Config, engineArgs []string, f *planFlags, fs *pflag.FlagSet, loadSet bool) error {
	wall := time.Now()
	q, err := planInputs(f)
	if err != nil {
		return usageError(err)
	}
	probe, err := sim.NewReplica(cfg)
	if err != nil {
		return failedError(err)
	}
	cfg = probe.Config()
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "plan: %d requests; measuring one replica's capacity...\n", len(q.reqs))
	capacity, err := fleet.MeasureCapacity(cfg, q.reqs, q.slo, f.goal, f.headroom, f.seed)
	if err != nil {
		return failedError(err)
	}
	upDelay := f.upDelay.Seconds()
	switch {
	case fs.Changed("scale-up-delay") && f.upDelay < 0:
		return usageErrorf("--scale-up-delay %v: must not be negative", f.upDelay)
	case !fs.Changed("scale-up-delay") && loadSet:
		upDelay = cfg.LoadTime.Seconds()
	case !fs.Changed("scale-up-delay"):
		upDelay = fleet.StartupSeconds(probe.Estimate().WeightsGiB * (1 << 30))
	}
	price := f.price
	if price == 0 {
		price = cfg.GPU.Price.PerGPUHour
	}
	rep := planReport{Traffic: q.source, Requests: len(q.reqs), Hours: q.reqs[len(q.reqs)-1].At / 3600, PeakRate: peakRate(q.reqs),
		Model: cfg.ModelID, GPU: cfg.GPU.ID, GPUs: cfg.NumGPUs, Price: price, Capacity: capacity, UpDelay: upDelay}
	target := f.target
	if target == 0 {
		target = capacity.Target(q.signal)
		if !(target > 0) {
			return failedError(fmt.Errorf("the simulated replica's %s at %.0f%% of its capacity is 0: give --target", q.signal, 100*f.headroom))
		}
	}
	pols := planPolicies(q, f, capacity, target, upDelay, rep.PeakRate)
	fmt.Fprintf(stderr, "plan: capacity %.2f req/s per replica; simulating %d policies...\n", capacity.Rate, len(pols))
	results, err := simulatePolicies(cfg, q, pols)
	if err != nil {
		return failedError(err)
	}
	for _, r := range results {
		rep.Policies = append(rep.Policies, planLine(r, cfg.NumGPUs, price))
	}
	rep.WallTotal = time.Since(wall).Seconds()
	if f.jsonOut != "" {
		if err := writeJSONOutput(cmd.OutOrStdout(), f.jsonOut, rep); err != nil {
			return err
		}
	}
	if f.htmlOut != "" {
		if err := writePlanHTML(cmd.OutOrStdout(), f.htmlOut, rep, q.reqs, results, f.goal); err != nil {
			return err
		}
	}
	if f.format == "k8s" {
		return planK8s(cmd, cfg, f, q, rep, results)
	}
	printPlan(tableOut(cmd, f.jsonOut), rep, results)
	if f.replay {
		return replayPlan(cmd, f, q, rep, results[0], probe.Estimate().KVCacheTokens, engineArgs)
	}
	return nil
}

// planPolicies are the policies a plan compares: each router autoscaled,
// and static provisioning at the peak with the first router that is not
// round-robin (else round-robin).
func planPolicies(q planQuestion, f *planFlags, c fleet.Capacity, target, upDelay, peak float64) []fleet.Policy {
	first := q.reqs[0].At
	var early int
	for _, r := range q.reqs {
		if r.At-first >= 600 {
			break
		}
		early++
	}
	initial := int(math.Ceil(float64(early) / 600 / c.Rate))
	var pols []fleet.Policy
	for _, r := range q.routers {
		pols = append(pols, fleet.Policy{Router: r, Replicas: max(initial, 1), Scale: &fleet.Autoscaler{
			Signal: q.signal, Target: target, Min: f.minReplicas, Max: f.maxReplicas, Interval: f.interval.Seconds(),
			UpDelay: upDelay, Cooldown: f.cool.Seconds(), Tolerance: fleet.DefaultTolerance}})
	}
	static := q.routers[0]
	for _, r := range q.routers {
		if r != fleet.RouterRoundRobin {
			static = r
			break
		}
	}
	n := min(max(int(math.Ceil(peak/c.Rate)), f.minReplicas), f.maxReplicas)
	return append(pols, fleet.Policy{Router: static, Replicas: n})
}

// simulatePolicies runs the policies, as many at once as there are CPUs.
func simulatePolicies(cfg sim.Config, q planQuestion, pols []fleet.Policy) ([]fleet.Result, error) {
	results := make([]fleet.Result, len(pols))
	errs := make([]error, len(pols))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = fleet.Simulate(cfg, q.reqs, q.slo, p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// planLine is a result as the plan's JSON line.
func planLine(r fleet.Result, gpus int, price float64) planResult {
	l := planResult{Router: r.Policy.Router, Autoscaler: "static", Attainment: r.Attainment, PeakReplicas: r.PeakReplicas,
		MeanReplicas: r.MeanReplicas, GPUHours: r.ReplicaHours * float64(gpus), PrefixHitRate: r.PrefixHitRate(),
		Requests: r.Requests, Failed: r.Failed, Hours: r.Hours, WallSeconds: r.Wall.Seconds()}
	if s := r.Policy.Scale; s != nil {
		l.Autoscaler, l.Target = string(s.Signal), s.Target
	}
	l.CostPerDay = l.GPUHours * price * 86400 / r.Duration
	return l
}

// printPlan prints the plan's table: one line per policy, its replicas
// hour by hour as a bar chart.
func printPlan(w io.Writer, rep planReport, results []fleet.Result) {
	fmt.Fprintf(w, "traffic: %s: %d requests over %.1f h, mean %.1f req/s, peak %.1f req/s (5 min)\n",
		rep.Traffic, rep.Requests, rep.Hours, float64(rep.Requests)/math.Max(rep.Hours*3600, 1), rep.PeakRate)
	c := rep.Capacity
	fmt.Fprintf(w, "replica: %s on %d x %s; capacity %.2f req/s with %.0f%% of requests within the SLO; at %.0f%% of it: running %.1f, waiting %.2f, KV usage %.0f%%; scale-up delay %.0f s\n",
		rep.Model, rep.GPUs, rep.GPU, c.Rate, 100*c.Goal, 100*c.Headroom, c.Running, c.Waiting, 100*c.KV, rep.UpDelay)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "router\tscaling\tSLO met\tworst hour\tpeak\tmean\tGPU-h\t$/day\tprefix hits\treplicas by hour\t")
	for i, l := range rep.Policies {
		scaling := "static (peak)"
		if s := results[i].Policy.Scale; s != nil {
			scaling = s.String()
		}
		worst, wh := 1.0, 0
		for h, hr := range l.Hours {
			if hr.Requests > 0 && hr.Attainment < worst {
				worst, wh = hr.Attainment, h
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.1f%% (h%d)\t%d\t%.1f\t%.1f\t%.0f\t%.1f%%\t%s\t\n", l.Router, scaling, 100*l.Attainment,
			100*worst, wh, l.PeakReplicas, l.MeanReplicas, l.GPUHours, l.CostPerDay, 100*l.PrefixHitRate, bars(l.Hours, rep.Policies))
	}
	tw.Flush()
	fmt.Fprintf(w, "planned in %.1f s (%s)\n", rep.WallTotal, wallLine(rep.Policies))
}

// wallLine is each policy's simulation time.
func wallLine(ls []planResult) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s/%s %.1f s", l.Router, l.Autoscaler, l.WallSeconds)
	}
	return strings.Join(parts, ", ")
}

// bars is the hours' mean replicas as a bar per hour, on one scale for
// every policy.
func bars(hours []fleet.Hour, all []planResult) string {
	top := 0.0
	for _, l := range all {
		for _, h := range l.Hours {
			top = math.Max(top, h.MeanReplicas)
		}
	}
	levels := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for _, h := range hours {
		k := 0
		if top > 0 {
			k = min(int(h.MeanReplicas/top*float64(len(levels))), len(levels)-1)
		}
		b.WriteRune(levels[k])
	}
	return b.String()
}

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The sim subcommands take the engine's own command line (vLLM or SGLang
// flags, which cobra cannot know in advance), so they parse their arguments
// themselves: engine flags go to sim.ParseArgs, the few flags of servetune's
// own (--json, bench's workload and load flags) are split off first.

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The simulated engine: estimate memory, run workloads in virtual time, serve the OpenAI API",
		Long: `The simulated engine stands in for vLLM and SGLang: it takes their command lines
(vllm serve MODEL [flags], or SGLang's launch_server flags) and models
start-up memory, step times on the chosen GPU, and the engine's scheduler.
Sim-only facts come from --gpu, --num-gpus, --time-scale, --sim-load-time,
--engine, --model-config or the SERVETUNE_SIM_* environment variables.`,
	}
	cmd.AddCommand(newSimEstimateCmd(), newSimRunCmd(), newSimServeCmd(), newSimRouterCmd())
	return cmd
}

// wantsHelp reports whether args ask for help; flag parsing is off for the
// sim subcommands, so cobra does not see -h.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

// simConfig parses the engine command line; errors are usage errors.
func simConfig(args []string) (sim.Config, error) {
	cfg, err := sim.ParseArgs(args, os.Getenv)
	if err != nil {
		return cfg, usageError(err)
	}
	return cfg, nil
}

// simEstimate is the JSON of `sim estimate`.
type simEstimate struct {
	Model string `json:"model"`
	TP    int    `json:"tensor_parallel"`
	sim.MemoryEstimate
	StepTimes *sim.StepTimes `json:"step_times,omitempty"`
	Network   simNetwork     `json:"network"`
	Error     string         `json:"error,omitempty"`
	// start is the memory fraction the configuration would start at,
	// when it did not (startHint); the table's "to start" row.
	start string
}

// simNetwork is where a configuration's GPUs sit and what one decode and
// one prefill step send across the scale-out network, per GPU.
type simNetwork struct {
	sim.Topology
	Decode  sim.NetworkStep `json:"decode_step"`
	Prefill sim.NetworkStep `json:"prefill_step"`
}

// networkOf prices cfg's cross-domain traffic at a decode step of 64
// sequences per data-parallel rank and a prefill step of 8,192 tokens.
func networkOf(cfg sim.Config) simNetwork {
	return simNetwork{Topology: cfg.Topology(), Decode: cfg.NetworkStep(64), Prefill: cfg.NetworkStep(8192)}
}

// networkLine is simNetwork in one line.
func networkLine(n simNetwork) string {
	line := fmt.Sprintf("%d domain(s) of %d GPUs, scale-out %.0f GB/s per GPU", n.Nodes, n.Domain, n.ScaleOutGBps)
	if n.Decode.Bytes == 0 {
		return line + "; nothing crosses it"
	}
	var what []string
	if n.TPCrosses {
		what = append(what, "TP all-reduces")
	}
	if n.PPCrossHops > 0 {
		what = append(what, fmt.Sprintf("%d pipeline hop(s)", n.PPCrossHops))
	}
	if n.EPCrossShare > 0 {
		what = append(what, fmt.Sprintf("%.0f%% of the expert exchange", 100*n.EPCrossShare))
	}
	return line + fmt.Sprintf("; crossing: %s; per GPU a decode step of %d tokens sends %.2f MB (%.2f ms), a prefill step of %d %.1f MB (%.2f ms)",
		strings.Join(what, ", "), n.Decode.Tokens, n.Decode.Bytes/1e6, n.Decode.Seconds*1e3, n.Prefill.Tokens, n.Prefill.Bytes/1e6, n.Prefill.Seconds*1e3)
}

func newSimEstimateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "estimate [engine flags] [--gpu NAME] [--num-gpus N] [--json PATH]",
		Short: "Print the engine's start-up memory accounting and step times; exit 1 with the engine's message when it does not fit",
		Long: "Print the engine's start-up memory accounting and step times; exit 1 with the engine's message when it does not fit.\n\n" +
			"Flags:\n" + simEstimateFlags(new(string)).FlagUsages() + "\n" + catalogHelp() + "\n\n" + engineFlagsHelp(),
		Example: "  servetune sim estimate meta-llama/Llama-3.1-8B-Instruct " + engineFlag("max_model_len") + " 16000 --gpu H100-SXM\n" +
			"  servetune sim estimate --model meta-llama/Llama-3.3-70B-Instruct " + engineFlag("quantization") + " fp8 " + engineFlag("tensor_parallel") + " 2 --json -",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			var jsonOut string
			fs := simEstimateFlags(&jsonOut)
			cfg, _, err := parseSimArgs(fs, args)
			if err != nil {
				return err
			}
			est, estErr := sim.Estimate(cfg)
			out := simEstimate{Model: cfg.ModelID, TP: cfg.TP, MemoryEstimate: est, Network: networkOf(cfg)}
			if estErr == nil {
				st, err := sim.EstimateStepTimes(cfg, 1024)
				if err != nil {
					return failedError(err)
				}
				out.StepTimes = &st
			} else {
				out.Error = estErr.Error()
				out.start = startHint(cfg, est, estErr)
			}
			if jsonOut != "" {
				if err := writeJSONOutput(cmd.OutOrStdout(), jsonOut, out); err != nil {
					return err
				}
			}
			printEstimate(tableOut(cmd, jsonOut), cfg, out)
			if estErr != nil {
				return failedError(estErr)
			}
			return nil
		},
	}
}

// simEstimateFlags are sim estimate's own flags; the rest of its command
// line is the engine's.
func simEstimateFlags(jsonOut *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sim estimate", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addJSONFlag(fs, jsonOut, "the memory accounting and step times")
	return fs
}

// catalogHelp lists the catalog's models (with their aliases) and GPUs,
// which is what MODEL and --gpu accept besides a config.json.
func catalogHelp() string {
	var b strings.Builder
	b.WriteString("Models (a Hugging Face id or alias; a config.json or its directory also works):\n")
	for _, m := range catalog.Models() {
		if m.Simulable() != nil {
			continue // sized only: every command refuses it (its own error says why)
		}
		b.WriteString("  " + m.ID)
		if len(m.Aliases) > 0 {
			b.WriteString(" (" + strings.Join(m.Aliases, ", ") + ")")
		}
		b.WriteString("\n")
	}
	ids := make([]string, 0, len(catalog.GPUs()))
	for _, g := range catalog.GPUs() {
		ids = append(ids, g.ID)
	}
	b.WriteString("GPUs (--gpu): " + strings.Join(ids, ", "))
	return b.String()
}

// engineFlagsHelp lists the engine and simulator flags a sim command
// takes (engine.FlagDocs), for the help of the commands that parse their
// own arguments (cobra lists only -h for them).
func engineFlagsHelp() string {
	var eng, simf strings.Builder
	for _, d := range engine.FlagDocs(engine.VLLM) {
		line := fmt.Sprintf("  %-28s %s\n", d.Flag, d.Doc)
		if d.Sim {
			simf.WriteString(line)
		} else {
			eng.WriteString(line)
		}
	}
	return "Engine flags (vLLM's spelling; SGLang's are taken too, with --engine sglang or " + engine.Flag(engine.SGLang, "model") + "):\n" + eng.String() +
		"\nSimulator flags:\n" + simf.String()
}

// benchFlagsHelp lists sim run's workload and load flags.
func benchFlagsHelp() string {
	var f benchFlags
	fs := pflag.NewFlagSet("sim run", pflag.ContinueOnError)
	simBenchFlags(fs, &f)
	return "Workload and load flags:\n" + fs.FlagUsages()
}

// memoryRows writes an estimate's memory accounting, down to the parts
// start-up sized: a model whose weights exceed the GPU stops at them, one
// whose KV pool is short stops at the shortfall.
func memoryRows(row func(k, f string, a ...any), cfg sim.Config, e simEstimate) {
	if e.WeightsGiB > e.TotalGiB {
		// The weights alone exceed the GPU: start-up stops at loading
		// them, so nothing after them was sized.
		row("memory per GPU", "%.2f GiB total (fraction %.2f)", e.TotalGiB, cfg.MemFraction)
		row("weights", "%.2f GiB (%s), %.2f GiB more than the GPU holds", e.WeightsGiB, quantName(cfg.Quantization), e.WeightsGiB-e.TotalGiB)
		return
	}
	row("memory per GPU", "%.2f GiB total, %.2f GiB requested (fraction %.2f)", e.TotalGiB, e.RequestedGiB, cfg.MemFraction)
	if e.ExpertGroup > 0 {
		how := "sliced over"
		if cfg.ExpertParallel {
			how = "whole experts over"
		}
		row("weights", "%.2f GiB (%s; routed experts %.2f GiB of it, %s %d GPUs)", e.WeightsGiB, quantName(cfg.Quantization), e.ExpertWeightsGiB, how, e.ExpertGroup)
	} else {
		row("weights", "%.2f GiB (%s)", e.WeightsGiB, quantName(cfg.Quantization))
	}
	row("activation peak", "%.2f GiB", e.ActivationGiB)
	row("non-torch", "%.2f GiB", e.NonTorchGiB)
	row("CUDA graphs", "%.2f GiB", e.CUDAGraphGiB)
	kind := ""
	if e.MLA {
		kind = "; MLA latent, whole on every TP rank"
	}
	if e.KVCacheGiB < 0 {
		// Estimate leaves the pool's shortfall as a negative size.
		row("KV cache", "none: %.2f GiB short (the %.2f GiB requested does not hold the weights and the engine's reservations)", -e.KVCacheGiB, e.RequestedGiB)
		if e.start != "" {
			row("to start", "%s", e.start)
		}
		return
	}
	row("KV cache", "%.2f GiB, %d tokens (%d blocks of %d, %s%s)", e.KVCacheGiB, e.KVCacheTokens, e.KVBlocks, e.BlockSize, cfg.KVCacheDType, kind)
	if e.start != "" {
		row("to start", "%s", e.start)
	}
	ranks := "1 data-parallel rank"
	if cfg.DP > 1 {
		ranks = fmt.Sprintf("%d data-parallel ranks", cfg.DP)
	}
	row("tokens that fit", "%d per GPU, %d in total (%s)", e.KVCacheTokens, e.KVCacheTokensTotal, ranks)
	row("max concurrency", "%.2fx at %d tokens per request; max running requests %d", e.MaxConcurrency, e.MaxModelLen, e.MaxRunningRequests)
	if cfg.SpecMethod != "" {
		row("speculative", "%s, %d draft tokens, acceptance %.2f: %.2f tokens per decode step expected",
			cfg.SpecMethod, cfg.SpecTokens, cfg.SpecAcceptance, sim.SpecExpectedTokens(cfg.SpecTokens, cfg.SpecAcceptance))
	}
}

// startFraction is the least memory fraction, to the hundredth, above
// cfg's own and up to 1, at which the simulated engine starts (Estimate
// returns no start-up error: every check start-up makes, the KV pool, a
// request of max_model_len under vLLM, a hybrid's state pool, the CUDA
// graphs' room), and whether one does.
func startFraction(cfg sim.Config) (float64, bool) {
	for k := int(math.Floor(cfg.MemFraction*100)) + 1; k <= 100; k++ {
		c := cfg
		c.MemFraction = float64(k) / 100
		if _, err := sim.Estimate(c); err == nil {
			return c.MemFraction, true
		}
	}
	return 0, false
}

// startHint says at which memory fraction a configuration whose start-up
// failed with err (estimate e) would start, or that none would; "" when
// err is no shortage of memory or the weights alone exceed the GPU (no
// fraction is the remedy).
func startHint(cfg sim.Config, e sim.MemoryEstimate, err error) string {
	if !errors.Is(err, sim.ErrOOM) || e.WeightsGiB > e.TotalGiB {
		return ""
	}
	flag := engine.Flag(cfg.Engine, "gpu_memory_fraction")
	frac, ok := startFraction(cfg)
	if cfg.Engine == engine.SGLang {
		if !ok {
			return fmt.Sprintf("no %s up to 1 starts it: fewer weights per GPU (more GPUs, quantization) or a GPU with more memory", flag)
		}
		return fmt.Sprintf("%s %.2f or more (now %.3g); it leaves %.2f GiB of the %.2f GiB for activations and CUDA graphs, against %.2f GiB now",
			flag, frac, cfg.MemFraction, (1-frac)*e.TotalGiB, e.TotalGiB, (1-cfg.MemFraction)*e.TotalGiB)
	}
	lenFlag := engine.Flag(cfg.Engine, "max_model_len")
	if !ok {
		return fmt.Sprintf("no %s up to 1 starts it with %d tokens a request: a lower %s, fewer weights per GPU (more GPUs, quantization) or a GPU with more memory",
			flag, e.MaxModelLen, lenFlag)
	}
	return fmt.Sprintf("%s %.2f or more (now %.3g; the engine then takes %.2f GiB of the %.2f GiB), or a lower %s than %d",
		flag, frac, cfg.MemFraction, frac*e.TotalGiB, e.TotalGiB, lenFlag, e.MaxModelLen)
}

func printEstimate(w io.Writer, cfg sim.Config, e simEstimate) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("engine", "%s (%s), %s x %d, %s", e.Engine, cfg.ModelID, e.GPU, cfg.NumGPUs, parallelLine(cfg))
	memoryRows(row, cfg, e)
	row("network", "%s", networkLine(e.Network))
	row("constants", "%s", constantsName(cfg))
	tw.Flush()
	if e.StepTimes != nil {
		fmt.Fprintf(w, "prefill step (ms):")
		for _, k := range sortedKeys(e.StepTimes.Prefill) {
			fmt.Fprintf(w, "  %d tok %.1f", k, e.StepTimes.Prefill[k])
		}
		fmt.Fprintf(w, "\ndecode step at %d context (ms):", e.StepTimes.DecodeContext)
		for _, k := range sortedKeys(e.StepTimes.Decode) {
			fmt.Fprintf(w, "  bs %d %.1f", k, e.StepTimes.Decode[k])
		}
		fmt.Fprintln(w)
	}
}

// parallelLine writes the parallel layout: TP, PP, DP, and for MoE models
// whether the attention is data-parallel and the experts expert-parallel.
func parallelLine(cfg sim.Config) string {
	line := fmt.Sprintf("TP %d PP %d DP %d", cfg.TP, cfg.PP, cfg.DP)
	if cfg.DPAttentionOn() {
		line += ", data-parallel attention"
	}
	if cfg.Model.MoE() && cfg.ExpertParallel {
		line += fmt.Sprintf(", EP %d", cfg.MoEGroup())
	}
	return line
}

// constantsName says where the simulator's constants came from.
func constantsName(cfg sim.Config) string {
	if cfg.Calibration != "" {
		return "calibration " + cfg.Calibration
	}
	return "stock (internal/model/sim/constants.go)"
}

func quantName(q string) string {
	if q == "" {
		return "bf16"
	}
	return q
}

func sortedKeys(m map[int]float64) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// simBenchFlags registers the workload and load flags `sim run` shares with
// `servetune bench` into fs, with what differs in virtual time.
func simBenchFlags(fs *pflag.FlagSet, f *benchFlags) {
	workloadFlags(fs, f)
	fs.Lookup("duration").Usage = "send for this long (virtual time) instead of a request count"
	fs.Lookup("warmup").Usage = "warm-up requests at the run's concurrency, excluded from metrics (they warm the simulated prefix cache)"
}

// parseSimArgs parses the flags registered in fs from args and builds
// the simulated engine's configuration from the rest (engineArgs), the
// engine's command line.
func parseSimArgs(fs *pflag.FlagSet, args []string) (cfg sim.Config, engineArgs []string, err error) {
	ours, engineArgs := splitArgs(fs, args)
	if err := parseOwnFlags(fs, ours); err != nil {
		return cfg, nil, err
	}
	cfg, err = simConfig(engineArgs)
	return cfg, engineArgs, err
}

// parseOwnFlags parses a command's own flags for the commands that parse
// their arguments themselves, as cobra does for the others: errors are
// usage errors (flagError), and the output paths are checked before any
// work (checkOutputs).
func parseOwnFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	return checkOutputs(fs)
}

// splitArgs separates the flags registered in fs (with their values) from
// the rest, which are engine flags.
func splitArgs(fs *pflag.FlagSet, args []string) (ours, engine []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || fs.Lookup(name) == nil {
			engine = append(engine, a)
			continue
		}
		ours = append(ours, a)
		if !hasVal && fs.Lookup(name).Value.Type() != "bool" && i+1 < len(args) {
			i++
			ours = append(ours, args[i])
		}
	}
	return ours, engine
}

func newSimRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run [engine flags] [--gpu NAME] [--num-gpus N] [workload and load flags] [--json PATH]",
		Short: "Run a bench workload against the simulated engine in virtual time (same result JSON as bench)",
		Long: "Run a bench workload against the simulated engine in virtual time (same result JSON as bench).\n\n" +
			benchFlagsHelp() + "\n" + engineFlagsHelp(),
		Example: "  servetune sim run meta-llama/Llama-3.1-8B-Instruct " + engineFlag("max_model_len") + " 8192 \\\n" +
			"    --input-len 512 --output-len 128 --max-concurrency 256 --num-requests 10000 --json result.json",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			var f benchFlags
			fs := pflag.NewFlagSet("sim run", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			simBenchFlags(fs, &f)
			cfg, _, err := parseSimArgs(fs, args)
			if err != nil {
				return err
			}
			return runSimVirtual(cmd, cfg, &f)
		},
	}
}

func runSimVirtual(cmd *cobra.Command, cfg sim.Config, f *benchFlags) error {
	// Reuse bench's validation; the target is never contacted.
	f.baseURL, f.model, f.endpoint, f.timeout = "http://127.0.0.1:1", cfg.ModelID, openai.EndpointCompletions, bench.DefaultTimeout
	bcfg, levels, err := buildBenchConfig(f)
	if err != nil {
		return usageError(err)
	}
	bcfg.Target.BaseURL = ""
	eng, err := sim.NewVirtual(cfg)
	if err != nil {
		est, _ := sim.Estimate(cfg)
		if h := startHint(cfg, est, err); h != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "servetune: to start: %s\n", h)
		}
		return failedError(err)
	}
	// One engine for every level, as one server serves a sweep: the same
	// path a study's virtual trials take (bench.Run over the simulator's
	// virtual clock).
	bcfg.Transport = eng
	out, err := openBenchOutputs(f, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	defer out.close()
	stdout := tableOut(cmd, f.jsonOut)
	net := networkOf(cfg)
	fmt.Fprintf(stdout, "network: %s\n", networkLine(net))
	var sums []measure.Summary
	for li, l := range levels {
		bcfg.Load = l.load
		res, err := bench.Run(cmd.Context(), bcfg)
		if err != nil {
			return failedError(err)
		}
		s := res.Summary
		for k, v := range map[string]any{
			"tool": "servetune " + version, "level": li, "endpoint": "sim (virtual time)",
			"engine": string(cfg.Engine), "gpu": cfg.GPU.ID, "num_gpus": cfg.NumGPUs,
			"engine_settings": cfg.Settings(), "constants": constantsName(cfg), "network": net,
		} {
			s.Meta[k] = v
		}
		delete(s.Meta, "base_url")
		sums = append(sums, s)
		findings := benchFindings(l.load, s, cfg.Engine, cfg.Settings())
		if len(findings) > 0 {
			s.Meta["findings"] = findings
		}
		sit := simSituation(l.load, s, cfg, f.dataset)
		bands := simBands(sit)
		s.Meta["error_bands"] = bands
		printSummary(stdout, l.name, s)
		printConversation(stdout, s.Conversation)
		printEngine(stdout, s)
		printSimBands(stdout, sit, bands)
		printFindings(stdout, findings)
		if err := out.records(li, res.Records); err != nil {
			return err
		}
	}
	return out.finish(sums)
}

func newSimServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve [engine flags] [--gpu NAME] [--num-gpus N] [--host H] [--port P] [--time-scale F] [--sim-load-time D] [--kv-link LINK]",
		Short: "Serve the engine's OpenAI-compatible API on the real clock (a drop-in for vllm serve)",
		Long: `Serve the engine's OpenAI-compatible API on the real clock (a drop-in for vllm serve).

As a part of a disaggregated deployment it takes the engines' flags: vLLM's
--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
(kv_producer: prefill only, kv_consumer: decode only) or SGLang's
--disaggregation-mode prefill|decode (--disaggregation-transfer-backend is
accepted), and speaks vLLM's kv_transfer_params handshake (servetune sim
router). A decode engine waits for the prompt's KV to cross --kv-link
(` + strings.Join(sim.LinkNames(), ", ") + `; default ` + sim.DefaultLink + `) before it decodes.

` + engineFlagsHelp(),
		Example: "  servetune sim serve meta-llama/Llama-3.1-8B-Instruct " + engineFlag("max_model_len") + " 8192 --port 8000\n" +
			"  " + engine.EnvSimGPU + "=H100-SXM servetune sim serve " + engine.Flag(engine.SGLang, "model") + " Qwen/Qwen2.5-7B-Instruct " +
			engine.Flag(engine.SGLang, "tensor_parallel") + " 1 --port 30000",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			cfg, err := simConfig(args)
			if err != nil {
				return err
			}
			return serveSim(cmd, cfg)
		},
	}
}

func serveSim(cmd *cobra.Command, cfg sim.Config) error {
	log := cmd.ErrOrStderr()
	fmt.Fprintf(log, "INFO servetune-sim: %s engine, model %s, %s x %d, TP %d, time scale %g\n",
		cfg.Engine, cfg.ModelID, cfg.GPU.ID, cfg.NumGPUs, cfg.TP, cfg.TimeScale)
	if cfg.Disaggregated() {
		fmt.Fprintf(log, "INFO disaggregated: role %s, connector %s, KV link %s\n", cfg.KVRole, cfg.KVConnector, cfg.KVLink)
	}
	srv, err := sim.NewServer(cfg)
	if err != nil {
		var se *sim.StartupError
		if errors.As(err, &se) {
			fmt.Fprintf(log, "ERROR %s\n", se.Message)
		}
		return failedError(err)
	}
	est := srv.Estimate()
	fmt.Fprintf(log, "INFO Memory profiling: weights %.2f GiB, peak activation %.2f GiB, non-torch %.2f GiB; KV cache %.2f GiB\n",
		est.WeightsGiB, est.ActivationGiB, est.NonTorchGiB, est.KVCacheGiB)
	fmt.Fprintf(log, "INFO GPU KV cache size: %d tokens\n", est.KVCacheTokens)
	fmt.Fprintf(log, "INFO Maximum concurrency for %d tokens per request: %.2fx\n", est.MaxModelLen, est.MaxConcurrency)
	addr := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	err = srv.ListenAndServe(cmd.Context(), addr, func(a net.Addr) {
		fmt.Fprintf(log, "INFO Uvicorn running on http://%s (Press CTRL+C to quit)\n", a)
	})
	if err != nil {
		return failedError(err)
	}
	return nil
}

// engineFlag is vLLM's flag for a setting, for help texts.
func engineFlag(name string) string { return engine.Flag(engine.VLLM, name) }

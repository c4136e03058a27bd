package fidelity

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// RegimeConcurrency is the load regime of a run at a fixed concurrency:
// a closed-loop client of N workers, each sending its next request when
// its last one ends (aiconfigurator's silicon runs). It is a load of its
// own, neither Poisson (light, moderate, saturation) nor a burst
// (offline): N requests are in flight the whole run. The simulator's
// error bands read it by the same name (sim.RegimeConcurrency).
const RegimeConcurrency = string(sim.RegimeConcurrency)

// SiliconTable names a CSV of runs in aiconfigurator's silicon columns
// (ai-dynamo/aiconfigurator,
// aic-core/src/aiconfigurator_core/systems/silicon_sample.csv): one row a
// run at a fixed concurrency (batch_size) and fixed lengths (isl, osl),
// its mean TTFT and TPOT (silicon_ttft_ms, silicon_tpot_ms). Load turns
// each row the simulator can run into a Run of Source, and lists every
// other row in Suite.Unrunnable with the reason.
type SiliconTable struct {
	File   string `json:"file"`
	Source string `json:"source"`
	// Rounds is how many requests each of the client's workers sends:
	// a run is batch_size x Rounds requests under a concurrency cap of
	// batch_size, all of them averaged. The client is aiconfigurator's
	// benchmark script (docs/fidelity.md, "Silicon tables"): its warm-up
	// ends before the measured requests begin, batch_size of them at once.
	Rounds int `json:"rounds"`
}

// Unrunnable is a row of a silicon table that the simulator cannot run,
// and why: it is listed in the whole table, never silently dropped.
type Unrunnable struct {
	ID, Source, Engine, Model, Reason string
}

// siliconGPUs maps the source's system names to the catalog's GPUs.
var siliconGPUs = map[string]string{"h100_sxm": "H100-SXM"}

// loadSilicon reads the suite's silicon tables into runs and unrunnable
// rows.
func (s *Suite) loadSilicon() error {
	for _, t := range s.Silicon {
		switch {
		case t.File == "" || t.Source == "":
			return fmt.Errorf("silicon table: want a file and a source")
		case s.Sources[t.Source].Split == "":
			return fmt.Errorf("silicon table %s: unknown source %q", t.File, t.Source)
		case t.Rounds < 1:
			return fmt.Errorf("silicon table %s: rounds %d: want at least one request a worker", t.File, t.Rounds)
		}
		rows, err := readSilicon(filepath.Join(s.dir, t.File))
		if err != nil {
			return fmt.Errorf("silicon table %s: %w", t.File, err)
		}
		for _, row := range rows {
			r, why := siliconRun(row, t)
			if why != "" {
				s.Unrunnable = append(s.Unrunnable, Unrunnable{ID: row["id"], Source: t.Source, Engine: row["backend"], Model: row["model_path"], Reason: why})
				continue
			}
			if _, err := s.config(r); err != nil {
				s.Unrunnable = append(s.Unrunnable, Unrunnable{ID: r.ID, Source: t.Source, Engine: r.Engine, Model: r.Model, Reason: err.Error()})
				continue
			}
			s.Runs = append(s.Runs, r)
		}
	}
	return nil
}

// maxSiliconBytes bounds a silicon table read into memory.
const maxSiliconBytes = 16 << 20

// readSilicon reads a silicon CSV: a header row, then one run a row, each
// as a map from column to value.
func readSilicon(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSiliconBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSiliconBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxSiliconBytes)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("no rows")
	}
	head := recs[0]
	for _, col := range []string{"id", "backend", "backend_version", "model_path", "system", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms"} {
		if !slices.Contains(head, col) {
			return nil, fmt.Errorf("no column %q", col)
		}
	}
	var out []map[string]string
	for _, rec := range recs[1:] {
		m := make(map[string]string, len(head))
		for i, col := range head {
			m[col] = strings.TrimSpace(rec[i])
		}
		out = append(out, m)
	}
	return out, nil
}

// siliconRun is a silicon row's run, or why the simulator cannot run it.
func siliconRun(row map[string]string, t SiliconTable) (Run, string) {
	num := func(col string) int {
		n, err := strconv.Atoi(row[col])
		if err != nil {
			return 0
		}
		return n
	}
	ttft, err1 := strconv.ParseFloat(row["silicon_ttft_ms"], 64)
	tpot, err2 := strconv.ParseFloat(row["silicon_tpot_ms"], 64)
	gpu, gpuOK := siliconGPUs[row["system"]]
	m, modelErr := catalog.LookupModel(row["model_path"])
	switch {
	case row["id"] == "":
		return Run{}, "no id"
	case err1 != nil || err2 != nil || ttft <= 0 || tpot <= 0:
		return Run{}, "no measured TTFT and TPOT"
	case !gpuOK:
		return Run{}, fmt.Sprintf("system %q is not one of the catalog's GPUs the table maps", row["system"])
	case row["mode"] != "agg":
		return Run{}, "disaggregated (" + row["mode"] + "): the source gives each side's workers and parallelism but not the KV link or connector between them"
	case modelErr != nil:
		return Run{}, "model not in the simulator's catalog"
	case len(m.Unmodelled) > 0:
		return Run{}, "model not simulated: " + strings.Join(m.Unmodelled, "; ")
	case num("pp_size") > 1:
		return Run{}, "pipeline parallelism, which the table's runs do not map"
	case num("batch_size") < 1 || num("tp_size") < 1 || num("isl") < 1 || num("osl") < 1:
		return Run{}, "no concurrency, tp, isl or osl"
	}
	var flags []string
	switch q := row["gemm_quant_mode"]; {
	case q == "":
	case q == "fp8":
		flags = append(flags, engine.Flag(engine.VLLM, "quantization"), "fp8")
	case checkpointFP4(q, m):
		// The row names the published MXFP4 checkpoint (gpt-oss), which
		// the engines serve in its own format without a quantization setting
		// flag: the source's fp4 label is its format, not NVFP4.
	default:
		own := m.Quantization
		if own == "" {
			own = m.DType
		}
		return Run{}, fmt.Sprintf("weights in %s, not the format of the checkpoint the row names (%s), and the source names no other checkpoint", q, own)
	}
	if q := row["moe_quant_mode"]; q != "" && q != row["gemm_quant_mode"] && m.MoE() {
		return Run{}, fmt.Sprintf("experts in %s beside GEMMs in %s", q, row["gemm_quant_mode"])
	}
	c, parFlags, note, why := siliconParallel(row, num)
	if why != "" {
		return Run{}, why
	}
	flags = append(flags, parFlags...)
	if recipe := siliconRecipes[strings.Join([]string{row["backend"], row["backend_version"], row["model_path"], row["system"]}, " ")]; recipe != nil {
		flags = append(flags, recipe(num("isl"), num("osl"), c)...)
	}
	version := row["backend_version"]
	if version == "" {
		version = "not given"
		if row["measured"] != "" {
			version += " (measured " + row["measured"] + ")"
		}
	}
	var versionFlags []string
	if row["backend"] == "sglang" && releaseBefore(row["backend_version"], engine.Version{Major: 0, Minor: 5, Patch: 3}) {
		// SGLang's defaults before the GPU-memory rule (sgl-project/sglang
		// PR #10975, September 2025): the memory fraction by TP, a chunk of
		// 8,192 and CUDA graphs to batch 160 (docs/reference.md (Engines)).
		versionFlags = []string{
			engine.Flag(engine.SGLang, "gpu_memory_fraction"), strconv.FormatFloat(sim.SGLangOldMemFraction(num("tp_size")), 'f', -1, 64),
			engine.Flag(engine.SGLang, "cuda_graph_max_bs"), "160",
			engine.Flag(engine.SGLang, "max_batched_tokens"), "8192",
		}
	}
	if row["backend"] == "vllm" && !inferenceXID.MatchString(row["id"]) && vllmSyncScheduling(row["backend_version"], row["measured"]) {
		// InferenceX's H100 scripts turn async scheduling on themselves
		// (docs/fidelity.md, "Silicon tables"); aiconfigurator's serve
		// flags leave the release's default.
		versionFlags = append(versionFlags, engine.Off(engine.VLLM, "async_scheduling")...)
	}
	in, out := num("isl"), num("osl")
	regimes := []string{RegimeConcurrency}
	if in+out >= sim.LongContext {
		regimes = append(regimes, "long-context")
	}
	return Run{
		ID: row["id"], Source: t.Source, Engine: row["backend"], Version: version, GPU: gpu,
		Model: row["model_path"], TP: num("tp_size"), Flags: flags, VersionFlags: versionFlags,
		Workload: siliconClient(row["id"], in, out, c, t.Rounds),
		Stat:     "mean",
		Measured: Metrics{TTFT: ttft, ITL: tpot},
		Regimes:  regimes,
		Note:     note,
	}, ""
}

// siliconRecipes are the serve commands of the runs whose benchmark is
// public, by backend, release, model and system: the gpt-oss-120b and
// MiniMax-M2.5 rows of vLLM 0.18.0 are SemiAnalysis InferenceX runs (vLLM
// 0.18.0 is the image of its gptoss-fp4-h100-vllm and
// minimaxm2.5-fp8-h100-vllm configurations; the ids name its isl x osl,
// concurrency, TP and EP), served by its scripts of that release
// (docs/fidelity.md, "Silicon tables"); rows of other releases keep the
// engine's defaults. The flags the simulator does not read are left out
// and named there.
var siliconRecipes = map[string]func(isl, osl, conc int) []string{
	// SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_h100.sh (1fc5d73c)
	// and benchmarks/single_node/fixed_seq_len/gptoss_fp4_h100.sh
	// (8eec0d4e): VLLM_MXFP4_USE_MARLIN=1, no quantization setting.
	"vllm 0.18.0 openai/gpt-oss-120b h100_sxm": func(_, _, conc int) []string {
		return vllmFlags(engine.Settings{"max_model_len": 10240, "max_batched_tokens": 8192, "prefix_caching": false,
			"gpu_memory_fraction": 0.9, "max_running_requests": conc})
	},
	// benchmarks/single_node/fixed_seq_len/minimaxm2.5_fp8_h100.sh
	// (8eec0d4e); max_model_len is the sweep's isl + osl + 200
	// (utils/matrix_logic/generate_sweep_configs.py).
	"vllm 0.18.0 MiniMaxAI/MiniMax-M2.5 h100_sxm": func(isl, osl, _ int) []string {
		return vllmFlags(engine.Settings{"max_model_len": isl + osl + 200, "max_running_requests": 256, "prefix_caching": false,
			"gpu_memory_fraction": 0.90})
	},
}

// inferenceXID matches the ids of SemiAnalysis InferenceX's sweep points,
// date first (2026_03_25_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c64_tp4_...):
// the rows its client measured (docs/fidelity.md, "Silicon tables").
var inferenceXID = regexp.MustCompile(`^\d{4}_\d{2}_\d{2}_`)

// inferenceXRangeRatio is InferenceX's --random-range-ratio: each length
// uniform over the integers of [0.8 N, N] for the point's nominal N.
const inferenceXRangeRatio = 0.8

// siliconClient is the client that measured a row at concurrency c with
// nominal lengths in and out. An InferenceX row's is InferenceX's
// (benchmark_lib.sh's run_benchmark_serving): 10 x c prompts, their
// lengths drawn below the nominal ones (Workload's range takes the
// mean, so N is the nominal length), --ignore-eos, after warm-ups it
// waits for. Any other row's is aiconfigurator's benchmark script's:
// rounds requests a worker, every one of the nominal lengths
// (SiliconTable.Rounds).
func siliconClient(id string, in, out, c, rounds int) Workload {
	if !inferenceXID.MatchString(id) {
		return Workload{In: in, Out: out, Requests: c * rounds, Concurrency: c}
	}
	r := inferenceXRangeRatio
	mean := func(n int) int { return int(math.Round(float64(n) * (1 + r) / 2)) }
	return Workload{In: mean(in), Out: mean(out), RangeRatio: &r, Requests: 10 * c, Concurrency: c}
}

// vllmFlags is vLLM's flags for a recipe's settings, spelled by the flag
// table; a recipe is constant, so a setting it cannot render is a bug.
func vllmFlags(s engine.Settings) []string {
	args, err := engine.Render(engine.VLLM, s)
	if err != nil {
		panic(err)
	}
	return args
}

// checkpointFP4 says whether a row's FP4 weight label (aiconfigurator
// writes nvfp4 for a run of precision fp4) names the model's own
// checkpoint: gpt-oss is published in MXFP4 and served as published, with
// no quantization setting (vLLM on Hopper through its weight-only MXFP4
// path: docs/fidelity.md, "Silicon tables").
func checkpointFP4(label string, m catalog.Model) bool {
	return (label == "nvfp4" || label == "fp4" || label == "mxfp4") && m.Quantization == "mxfp4"
}

// siliconID reads the run's own name at the end of a row's id
// ("..._c32_tp4_ep4_1322", "..._c32_tp4_0_ep4_0_241"): its concurrency,
// TP and EP.
var siliconID = regexp.MustCompile(`_c(\d+)_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$`)

// siliconParallel maps a row's parallelism to engine flags and gives the
// client's concurrency. In the source's columns tp_size is the attention's
// TP within one attention-DP rank, batch_size each rank's requests, and
// moe_ep_size the experts' group over tp_size x attention_dp_size GPUs:
// vLLM's expert parallelism (enable_expert_parallel) makes that whole group (TP x DP) the
// experts' EP group, and runs attention apart in each DP rank of a MoE
// model (data_parallel).
//
// One exception, from the run's own name: a vLLM row whose id names TP T
// and EP E (InferenceX's "tpT_epE": one vLLM server at tensor_parallel
// T with expert parallelism, T GPUs) but whose columns give T x E GPUs as
// attention_dp_size E with batch_size a share of the id's concurrency is
// that run, its GPUs counted as TP x EP (ai-dynamo/aisimulate's
// measurement_gpu_count keeps such "legacy TP*EP" counts apart for this
// reason): it runs at TP T with expert parallelism at the id's concurrency.
func siliconParallel(row map[string]string, num func(string) int) (c int, flags []string, note, why string) {
	tp, dp, ep := num("tp_size"), max(num("attention_dp_size"), 1), max(num("moe_ep_size"), 1)
	c = num("batch_size")
	epFlag := engine.Flag(engine.VLLM, "expert_parallel")
	switch {
	case dp == 1 && ep == 1:
		return c, nil, "", ""
	case row["backend"] != string(engine.VLLM):
		return 0, nil, "", "attention-DP or expert parallelism under " + row["backend"] + ", which the table's runs do not map"
	case num("moe_tp_size") > 1 || ep != tp*dp:
		return 0, nil, "", fmt.Sprintf("experts over moe_tp %d x moe_ep %d GPUs beside attention over tp %d x attention_dp %d: not vLLM's expert-parallel group (TP x DP)",
			num("moe_tp_size"), ep, tp, dp)
	case dp == 1:
		return c, []string{epFlag}, "", ""
	}
	if m := siliconID.FindStringSubmatch(row["id"]); m != nil {
		ic, _ := strconv.Atoi(m[1])
		itp, _ := strconv.Atoi(m[2])
		iep, _ := strconv.Atoi(m[3])
		if itp == tp && iep == dp && ic == c*dp {
			return ic, []string{epFlag}, fmt.Sprintf("run as its id names it (c%d, tp%d, ep%d: %d GPUs); the columns count TP x EP, %d GPUs as attention_dp %d of batch %d",
				ic, itp, iep, tp, tp*dp, dp, c), ""
		}
	}
	return c * dp, []string{engine.Flag(engine.VLLM, "data_parallel"), strconv.Itoa(dp), epFlag}, "", ""
}

// EngineStat is one source's scored runs of one engine: each metric's
// absolute errors over them.
type EngineStat struct {
	Source, Engine string
	Metrics        map[string]Stat
}

// TabulateSiliconByEngine gathers the scored runs of the suite's silicon
// sources by source and engine (the check: each engine's median
// TTFT and TPOT error on them).
func TabulateSiliconByEngine(s *Suite, results []Result) []EngineStat {
	c := collector{}
	for _, r := range results {
		if r.Run.Unscored != "" || !s.isSilicon(r.Run.Source) {
			continue
		}
		for _, m := range metricNames {
			if e, ok := r.Err[m]; ok {
				c.add(r.Run.Source+"\x00"+r.Run.Engine, m, e, r.Run.ID)
			}
		}
	}
	var out []EngineStat
	for k, byMetric := range c.table() {
		src, eng, _ := strings.Cut(k, "\x00")
		out = append(out, EngineStat{Source: src, Engine: eng, Metrics: byMetric})
	}
	slices.SortFunc(out, func(a, b EngineStat) int { return strings.Compare(a.Source+a.Engine, b.Source+b.Engine) })
	return out
}

func (s *Suite) isSilicon(source string) bool {
	return slices.ContainsFunc(s.Silicon, func(t SiliconTable) bool { return t.Source == source })
}

// writeSilicon prints each silicon source's errors by engine and how many
// of its rows the simulator cannot run.
func writeSilicon(w io.Writer, s *Suite, results []Result) {
	for _, st := range TabulateSiliconByEngine(s, results) {
		fmt.Fprintf(w, "fidelity: %s %s (%s load): %d runs, median |error| ttft %s, itl (TPOT) %s\n", st.Source, st.Engine, RegimeConcurrency,
			st.Metrics["ttft"].N, pct(st.Metrics["ttft"].Median), pct(st.Metrics["itl"].Median))
	}
	if len(s.Unrunnable) > 0 {
		fmt.Fprintf(w, "fidelity: %d silicon rows the simulator cannot run (each with its reason in the whole table)\n", len(s.Unrunnable))
	}
}

// writeUnrunnable lists the silicon rows the simulator cannot run, grouped
// by model, engine and reason.
func writeUnrunnable(w io.Writer, s *Suite) {
	if len(s.Unrunnable) == 0 {
		return
	}
	type key struct{ src, model, eng, why string }
	n := map[key]int{}
	var keys []key
	for _, u := range s.Unrunnable {
		k := key{u.Source, u.Model, u.Engine, u.Reason}
		if n[k] == 0 {
			keys = append(keys, k)
		}
		n[k]++
	}
	fmt.Fprintln(w, "Silicon rows the simulator cannot run (listed, scored nowhere):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| source | model | engine | rows | reason |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s |\n", mdEscape(k.src), mdEscape(k.model), mdEscape(k.eng), n[k], mdEscape(k.why))
	}
	fmt.Fprintln(w)
}

// vllmAsyncDefault is the first vLLM release that schedules asynchronously
// by default (v0.14.0, PR #27614, its release notes' breaking changes): a
// run of an older release scheduled each step after the one before it
// ended (docs/fidelity.md, "Silicon tables").
var vllmAsyncDefault = engine.Version{Major: 0, Minor: 14, Patch: 0}

// vllmAsyncDefaultDate is a day by which vllmAsyncDefault was out: an
// unversioned run measured before it ran an older release.
const vllmAsyncDefaultDate = "2026-01-21"

// vllmSyncScheduling says whether a vLLM silicon row ran without async
// scheduling: its release is older than vllmAsyncDefault, or it names none
// and was measured (YYYY-MM-DD) before vllmAsyncDefaultDate.
func vllmSyncScheduling(version, measured string) bool {
	if version != "" {
		return releaseBefore(version, vllmAsyncDefault)
	}
	return measured != "" && measured < vllmAsyncDefaultDate
}

// releaseBefore says whether version (engine.ParseVersion's form, a
// ".post1" suffix dropped) is a release before want; an empty or unreadable
// version is not.
func releaseBefore(version string, want engine.Version) bool {
	v, err := engine.ParseVersion(version)
	return err == nil && v.Less(want)
}

package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/quality"
	"github.com/servetune/servetune/internal/load/trace"
	"github.com/servetune/servetune/internal/registry"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/recommend"
)

// Sampler kinds a spec may name (tuner.sampler).
const (
	SamplerTPE    = "tpe"
	SamplerRandom = "random"
	SamplerCMAES  = "cmaes"
	SamplerGrid   = "grid"
	// SamplerGuided ranks the space with the simulated engine in virtual
	// time and measures the best forecast first (docs/architecture.md,
	// "Guided search").
	SamplerGuided = "guided"
)

// Spec is a parsed and validated study spec (docs/spec.md).
type Spec struct {
	File  string // path the spec was read from, for messages
	Text  string // the YAML as given, stored with the study
	Name  string
	Model string // as the engines take it: a catalog id, or a local model's directory
	// ModelConfig is the config.json of a local model (`model:` naming the
	// file or a directory holding it); ModelConfigText its content, stored
	// with the study. "" for catalog models.
	ModelConfig     string
	ModelConfigText string
	Engine          engine.Engine
	Launcher        LauncherSpec
	Hardware        Hardware
	Space           space.Space
	Workload        Workload
	SLO             recommend.SLO
	Objectives      []recommend.Objective // for the Pareto front
	Tuner           TunerSpec
	Quality         *QualitySpec // the quality gate; nil without one
	// Whatif holds the spec's what-if question (`servetune whatif --spec`),
	// nil when it has none.
	Whatif *WhatifSpec
	// Disaggregation is how a disaggregated configuration of the space
	// runs (its router, the KV transfer); nil when the space has none.
	Disaggregation *Disaggregation

	// top is the spec's top-level sections as parsed (nil for a spec
	// built in Go), where CheckLauncher's errors point.
	top map[string]*yaml.Node
	// samplerGiven is true when the spec names tuner.sampler.
	samplerGiven bool
}

// QualitySpec is the quality gate: every search trial answers the seeded
// task set (package quality) and fails as quality_fail when its accuracy
// drops more than MaxDropPct points below the Baseline configuration's.
type QualitySpec struct {
	Baseline   engine.Settings // the reference configuration (unlisted settings: the engine's defaults)
	MaxDropPct float64         // percentage points of accuracy
	Items      int             // tasks in the set
}

// WhatifSpec is the `whatif:` section of a study spec: the hardware
// question asked of the study's model, workload and SLOs (servetune
// whatif; docs/spec.md). Zero values take whatif's defaults.
type WhatifSpec struct {
	GPUs             []string
	MaxGPUs          int
	Engines          []engine.Engine
	TargetRPS        float64
	RequestsPerDay   float64
	PeakFactor       float64
	Prices           map[string]float64
	ReservedDiscount *float64
	Calibration      []string
	ForceCalibration bool
	Quantization     []string
	KVCacheDTypes    []string
	MaxModelLen      int
	Trials           int
	// Shapes are the deployment shapes compared (whatif.Options.Shapes);
	// nil takes whatif's default, aggregated only.
	Shapes []string
	// KVLink is whatif.kv_link, "" when not given (the caller then takes
	// disaggregation.kv_link, then the simulator's default).
	KVLink string
	// Speculative is whatif.speculative, nil when not given.
	Speculative *WhatifSpeculation
}

// LauncherSpec says how trials start engines: the launcher section's
// common keys, the section as written, and what the launcher it builds
// can do. The spec names no launcher type: package tuner builds the
// launcher from Section (its kind's keys, with their positions for
// errors) and copies what the spec's checks read of its capabilities into
// Caps (Spec.CheckLauncher), so that what only reads stored studies
// (report, ui) links no launcher.
type LauncherSpec struct {
	Kind         string
	GPUs         []int         // launcher.gpus: the GPUs trials may use (one host)
	ReadyTimeout time.Duration // launcher.ready_timeout: launch to healthy
	Env          []string      // launcher.env: variable names passed to the engine
	ModelConfig  string        // a Hugging Face config.json for a model the catalog lacks
	// Image is the container image a docker launcher runs (its
	// launcher.image), "" for the other kinds.
	Image string
	// Section is the launcher section as written, nil for a spec built in
	// Go.
	Section *yaml.Node
	// Caps is what the spec reads of the launcher's capabilities; the zero
	// value until Spec.CheckLauncher sets it.
	Caps LauncherCaps
}

// LauncherCaps is the part of a launcher's capabilities
// (launcher.Capabilities) the spec's checks read: its GPU placement and
// whether it applies settings. Package tuner copies it from the launcher,
// since the spec names no launcher type.
type LauncherCaps struct {
	GPUs          []int             // the study's GPUs, when HostOf is set
	HostOf        func(gpu int) int // nil: launcher.gpus, all on one host
	FixedSettings bool              // the space must fix every value
}

// Placement returns the study's GPUs and their host grouping: the
// launcher's own (its capabilities' HostOf), else launcher.gpus on one
// host.
func (l LauncherSpec) Placement() ([]int, func(int) int) {
	if c := l.Caps; c.HostOf != nil {
		return c.GPUs, c.HostOf
	}
	return l.GPUs, nil
}

// hostGPUs returns the GPUs of the largest host the launcher offers and
// how many hosts there are (0, 0 when it lists no GPUs).
func (l LauncherSpec) hostGPUs() (largest, hosts int) {
	gpus, group := l.Placement()
	sizes := map[int]int{}
	for _, g := range gpus {
		h := 0
		if group != nil {
			h = group(g)
		}
		sizes[h]++
	}
	for _, n := range sizes {
		largest = max(largest, n)
	}
	return largest, len(sizes)
}

// fixedSettings says whether the launcher cannot change engine settings
// (its capabilities' FixedSettings).
func (l LauncherSpec) fixedSettings() bool { return l.Caps.FixedSettings }

// Parallelism is how many trials the study runs at once: as many of its
// smallest configuration as its GPUs hold, at most tuner.parallel, and one
// when it lists no GPUs.
func (spec *Spec) Parallelism() int {
	gpus, _ := spec.Launcher.Placement()
	if len(gpus) == 0 {
		return 1
	}
	n := len(gpus) / max(minGPUs(spec.Space), 1)
	if p := spec.Tuner.Parallel; p > 0 && p < n {
		n = p
	}
	return max(n, 1)
}

// Hardware describes the GPUs, for the simulator and for costs.
type Hardware struct {
	GPU             string
	PricePerGPUHour float64
	// PriceSource says where the price comes from: "spec" for the
	// spec's own, else the catalog's dated listing ("catalog 2026-01:
	// ..."); "" without a price.
	PriceSource string
}

// Workload is what every trial measures.
type Workload struct {
	Dataset        bench.DatasetSpec
	Levels         []measure.Load // measured in order; empty with Capacity
	Capacity       bool           // search the highest load meeting the SLOs
	MaxConcurrency int            // capacity search upper bound (concurrency)
	// CapacityRate searches the highest Poisson (or gamma, Burstiness)
	// request rate instead of a concurrency, from StartRate up to MaxRate,
	// to within RatePrecision.
	CapacityRate     bool
	StartRate        float64
	MaxRate          float64
	RatePrecision    float64
	Burstiness       float64
	ProbeSpan        time.Duration // each rate probe sends for at least this long (trial.RateSearch.MinSpan)
	RequestsPerLevel int
	Warmup           int
	Timeout          time.Duration // per request
}

// TunerSpec configures the search.
type TunerSpec struct {
	Sampler   string
	Trials    int
	Seed      int64
	Objective recommend.Objective // the scalar the sampler optimises
	Parallel  int                 // most trials at once; 0 = as many as the GPUs allow
	Precheck  bool                // reject configurations the memory model says do not fit, without launching
	Confirm   Confirm             // confirmation runs of the final candidates
	// Enqueue are configurations to measure first, before the sampler's
	// proposals (the Go API only: a caller that knows good starting
	// points, such as a what-if search). They count toward Trials and the
	// sampler learns from them as from its own.
	Enqueue []space.Settings
}

// Confirm says how the final candidates are measured again: the Top
// configurations by the objective, Runs more times each on other workload
// seeds. Zero turns confirmation off.
type Confirm struct {
	Top  int
	Runs int
}

// DefaultConfirm re-measures the 3 best configurations twice each.
var DefaultConfirm = Confirm{Top: 3, Runs: 2}

// ParseSpecFile reads and parses a study spec file.
func ParseSpecFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read study spec: %w", err)
	}
	defer f.Close()
	// One byte past the limit tells a file that is too large, without
	// reading all of it.
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read study spec: %w", err)
	}
	return ParseSpec(data, path)
}

// ParseSpec parses and validates a study spec. Every error is a *space.Error
// naming the file, line and problem.
func ParseSpec(data []byte, file string) (*Spec, error) {
	return parseSpec(data, file, nil)
}

// parseSpec is ParseSpec; onFields, when not nil, sees every mapping the
// parser checks with its allowed keys (the spec reference's test).
func parseSpec(data []byte, file string, onFields func(field string, allowed []string)) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &yamlpos.Error{File: file, Line: 1, Err: fmt.Errorf("the spec is over %d KiB; a study spec is a page of YAML (it is stored with every study)", MaxSpecBytes>>10)}
	}
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:invalidUTF8(data)], []byte("\n"))
		return nil, &yamlpos.Error{File: file, Line: line, Err: errors.New("not UTF-8 text (save the spec as UTF-8)")}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, &yamlpos.Error{File: file, Line: yamlErrLine(err), Err: fmt.Errorf("invalid YAML: %s", yamlErrMsg(err))}
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		return nil, &yamlpos.Error{File: file, Line: max(second.Line-1, 1), Err: errors.New("a second YAML document (after ---): a study spec is one document")}
	} else if !errors.Is(err, io.EOF) {
		return nil, &yamlpos.Error{File: file, Line: yamlErrLine(err), Err: fmt.Errorf("invalid YAML: %s", yamlErrMsg(err))}
	}
	if len(doc.Content) == 0 {
		return nil, &yamlpos.Error{File: file, Line: 1, Err: errors.New("empty study spec")}
	}
	p := &specParser{Decoder: yamlpos.Decoder{File: file, OnFields: onFields}}
	spec := p.parse(doc.Content[0], file)
	if err := p.Err(); err != nil {
		return nil, err
	}
	spec.Text = string(data)
	return spec, nil
}

// Bounds of a spec's counts: far above any real study, low enough that a
// typo (two billion requests a level) is refused before it exhausts memory.
const (
	maxRequests    = bench.MaxRequests // requests (or warm-up requests) per level, prefix groups
	maxConcurrency = 100_000           // requests in flight at one level
	maxTrials      = 100_000
	maxParallel    = 4096
	maxConfirm     = 100
	// MaxSpecBytes bounds a spec file: the whole text is stored with the
	// study.
	MaxSpecBytes = 1 << 20
)

// invalidUTF8 is the offset of the first byte that is not UTF-8.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

var yamlPrefixRE = regexp.MustCompile(`^(yaml: )?(line \d+: )?`)

func yamlErrMsg(err error) string {
	return strings.Join(strings.Fields(yamlPrefixRE.ReplaceAllString(err.Error(), "")), " ")
}

// specParser walks the YAML tree keeping the first error.
type specParser struct {
	yamlpos.Decoder
	samplerGiven bool // tuner.sampler is in the spec
}

func (p *specParser) parse(root *yaml.Node, file string) *Spec {
	top := p.Fields(root, "", "name", "model", "engine", "launcher", "hardware", "space",
		"workload", "slo", "objectives", "tuner", "quality", "whatif", "disaggregation")
	for _, req := range []string{"name", "model", "engine", "launcher", "space", "workload"} {
		if p.Require(root, top, "", req, "required") == nil {
			return nil
		}
	}
	spec := &Spec{File: file}
	if !p.nameAndModel(top, spec) {
		return nil
	}
	spec.Engine = engine.Engine(p.Str(top["engine"], "engine"))
	if !p.Failed() && !spec.Engine.Valid() {
		p.Fail(top["engine"], "engine", "%q: want vllm or sglang", spec.Engine)
	}
	if p.Failed() {
		return nil
	}
	if n := top["hardware"]; n != nil {
		spec.Hardware = p.hardware(n)
	}
	if p.Failed() {
		return nil
	}
	spec.Launcher = p.launcher(top["launcher"], spec)
	if p.Failed() {
		return nil
	}
	spc, err := space.Parse(top["space"], p.File)
	if err != nil {
		p.FailErr(top["space"], "space", err)
		return nil
	}
	spec.Space = spc
	spec.Workload = p.workload(top["workload"])
	if n := top["slo"]; n != nil {
		spec.SLO = p.slo(n)
	}
	spec.Objectives = []recommend.Objective{{Metric: "output_throughput_per_gpu", Maximize: true}, {Metric: "tokens_per_user", Maximize: true}}
	if n := top["objectives"]; n != nil {
		spec.Objectives = nil
		for _, o := range p.Seq(n, "objectives") {
			obj, err := recommend.ParseObjective(p.Str(o, "objectives"))
			if !p.Failed() && err != nil {
				p.Fail(o, "objectives", "%v", err)
			}
			spec.Objectives = append(spec.Objectives, obj)
		}
	}
	spec.Tuner = TunerSpec{Sampler: SamplerTPE, Trials: 20, Seed: 1, Objective: recommend.Objective{Metric: "goodput_per_gpu", Maximize: true}, Precheck: true, Confirm: DefaultConfirm}
	if n := top["tuner"]; n != nil {
		p.tuner(n, &spec.Tuner)
	}
	if n := top["quality"]; n != nil {
		spec.Quality = p.quality(n)
	}
	if n := top["whatif"]; n != nil {
		spec.Whatif = p.whatif(n)
	}
	if n := top["disaggregation"]; n != nil {
		spec.Disaggregation = p.disaggregation(n, spec.Engine)
	}
	if p.Failed() {
		return nil
	}
	spec.top, spec.samplerGiven = top, p.samplerGiven
	p.check(spec, top)
	if p.Failed() {
		return nil
	}
	return spec
}

// DefaultReadyTimeout is launcher.ready_timeout when a spec gives none.
const DefaultReadyTimeout = engine.DefaultReadyTimeout

// launcher reads the launcher section's common keys (kind, gpus,
// ready_timeout, env) and keeps the section, whose other keys are its
// kind's: package tuner decodes them when it builds the launcher
// (launcher.Decode), and the docker kind's image, which the serve
// commands name.
func (p *specParser) launcher(n *yaml.Node, spec *Spec) LauncherSpec {
	l := LauncherSpec{ModelConfig: spec.ModelConfig, ReadyTimeout: DefaultReadyTimeout, Section: n}
	if n == nil || n.Kind != yaml.MappingNode {
		p.Fail(n, "launcher", "want a mapping")
		return l
	}
	f := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		f[n.Content[i].Value] = n.Content[i+1]
	}
	if x := f["kind"]; x != nil {
		l.Kind = p.Str(x, "launcher.kind")
	}
	if x := f["gpus"]; x != nil {
		l.GPUs = p.GPUs(x, "launcher.gpus")
	}
	if x := f["ready_timeout"]; x != nil {
		l.ReadyTimeout = p.Duration(x, "launcher.ready_timeout")
	}
	if x := f["env"]; x != nil {
		l.Env = p.EnvNames(x, "launcher.env")
	}
	if x := f["image"]; x != nil && l.Kind == "docker" && x.Kind == yaml.ScalarNode {
		l.Image = x.Value
	}
	return l
}

// CheckLauncher runs the checks that need the launcher's capabilities
// again, with caps (what package tuner read of the launcher Section
// builds), and keeps caps in Launcher.Caps: GPUs per host, settings a
// launcher cannot change, a virtual clock, and the default sampler (TPE
// where the launcher cannot change settings). ParseSpec ran them as for a
// launcher without these capabilities, which passes every spec these
// pass. Its error is a *yamlpos.Error naming the file, line and field,
// as ParseSpec's.
func (spec *Spec) CheckLauncher(caps LauncherCaps) error {
	spec.Launcher.Caps = caps
	if spec.top == nil {
		return nil // built in Go: nothing to point at
	}
	p := &specParser{Decoder: yamlpos.Decoder{File: spec.File}, samplerGiven: spec.samplerGiven}
	p.check(spec, spec.top)
	return p.Err()
}

// nameAndModel reads the study's name and model into spec; a model that is
// a directory or a config.json is read and checked here, its text kept.
// It is false when the model cannot be used (the failure is recorded).
func (p *specParser) nameAndModel(top map[string]*yaml.Node, spec *Spec) bool {
	spec.Name = p.Str(top["name"], "name")
	if !p.Failed() && !validName(spec.Name) {
		shown := spec.Name
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		p.Fail(top["name"], "name", "%q (%d characters): use 1 to %d letters, digits, '-', '_' and '.'", shown, len(spec.Name), maxNameLen)
	}
	spec.Model = p.Str(top["model"], "model")
	if !p.Failed() && strings.TrimSpace(spec.Model) == "" {
		p.Fail(top["model"], "model", "empty: give a Hugging Face id (meta-llama/Llama-3.1-8B-Instruct) or a directory holding config.json")
		return false
	}
	if dir, cfg, ok := catalog.ModelPath(spec.Model); ok && !p.Failed() {
		raw, err := os.ReadFile(cfg)
		if err == nil {
			_, err = catalog.ParseHFConfig(bytes.NewReader(raw), dir)
		}
		if err != nil {
			p.Fail(top["model"], "model", "%v", err)
			return false
		}
		spec.Model, spec.ModelConfig, spec.ModelConfigText = dir, cfg, string(raw)
	}
	return true
}

// maxNameLen bounds a study's name: it names containers, Kubernetes
// objects and files.
const maxNameLen = 128

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (p *specParser) hardware(n *yaml.Node) Hardware {
	f := p.Fields(n, "hardware", "gpu", "price_per_gpu_hour")
	var h Hardware
	if x := f["gpu"]; x != nil {
		h.GPU = p.Str(x, "hardware.gpu")
	}
	if x := f["price_per_gpu_hour"]; x != nil {
		h.PricePerGPUHour = p.Positive(x, "hardware.price_per_gpu_hour")
		h.PriceSource = "spec"
	} else if g, err := catalog.LookupGPU(h.GPU); err == nil && h.GPU != "" {
		// The catalog's dated on-demand price, so cost objectives work
		// without one; a spec's own price always wins.
		h.PricePerGPUHour = g.Price.PerGPUHour
		h.PriceSource = "catalog " + g.Price.Date + ": " + g.Price.Source
	}
	return h
}

func (p *specParser) workload(n *yaml.Node) Workload {
	f := p.Fields(n, "workload", "dataset", "load", "requests_per_level", "warmup", "timeout")
	w := Workload{RequestsPerLevel: 200, Warmup: 10, Timeout: 10 * time.Minute}
	if p.Require(n, f, "workload", "dataset", "required") == nil || p.Require(n, f, "workload", "load", "required") == nil {
		return w
	}
	w.Dataset = p.dataset(f["dataset"], "workload.dataset")
	p.load(f["load"], &w)
	if x := f["requests_per_level"]; x != nil {
		w.RequestsPerLevel = p.IntIn(x, "workload.requests_per_level", 1, maxRequests)
	} else if w.Dataset.Kind == bench.DatasetTrace {
		w.RequestsPerLevel = 0 // the trace's window
	}
	if w.Dataset.Kind == bench.DatasetTrace && !p.Failed() && (w.Capacity || w.Levels[0].Rate > 0) {
		p.Fail(f["load"], "workload.load", "a trace sends each request at its own time: give concurrency levels (a cap on requests in flight), not a rate or a capacity search")
	}
	if x := f["warmup"]; x != nil {
		w.Warmup = p.IntIn(x, "workload.warmup", 0, maxRequests)
	}
	if x := f["timeout"]; x != nil {
		w.Timeout = p.Duration(x, "workload.timeout")
	}
	return w
}

func (p *specParser) dataset(n *yaml.Node, field string) bench.DatasetSpec {
	f := p.Fields(n, field, "kind", "path", "input", "output", "prefix_groups", "prefix_len", "mix",
		"format", "speed", "start", "duration", "sessions", "turns", "think_time")
	var d bench.DatasetSpec
	if p.Failed() {
		return d
	}
	d.Kind = bench.DatasetRandom
	if x := f["kind"]; x != nil {
		d.Kind = p.Str(x, field+".kind")
	}
	if x := f["path"]; x != nil {
		// A dataset file is named from the spec, not from wherever the
		// study is started: relative to the spec file's directory.
		if d.Path = p.Str(x, field+".path"); d.Path != "" && !filepath.IsAbs(d.Path) {
			d.Path = filepath.Join(filepath.Dir(p.File), d.Path)
		}
	}
	if x := f["input"]; x != nil {
		d.Input = p.dist(x, field+".input")
	}
	if x := f["output"]; x != nil {
		d.Output = p.dist(x, field+".output")
	}
	if x := f["prefix_groups"]; x != nil {
		d.PrefixGroups = p.IntIn(x, field+".prefix_groups", 1, maxRequests)
	}
	if x := f["prefix_len"]; x != nil {
		d.PrefixLen = p.IntIn(x, field+".prefix_len", 1, bench.MaxLen)
	}
	p.trace(f, &d, field)
	p.conversation(f, &d, field)
	if x := f["mix"]; x != nil {
		for _, part := range p.Seq(x, field+".mix") {
			pf := p.Fields(part, field+".mix", "weight", "spec")
			if p.Failed() {
				return d
			}
			if pf["weight"] == nil || pf["spec"] == nil {
				p.Fail(part, field+".mix", "each part needs weight and spec")
				return d
			}
			d.Mix = append(d.Mix, bench.MixPart{
				Weight: p.Positive(pf["weight"], field+".mix.weight"),
				Spec:   p.dataset(pf["spec"], field+".mix.spec"),
			})
		}
	}
	if !p.Failed() {
		if err := d.Validate(); err != nil {
			p.Fail(n, field, "%v", err)
		}
	}
	return d
}

// trace reads a trace dataset's keys (format, speed, start, duration; only
// with kind trace); its path is required (dataset resolves it).
func (p *specParser) trace(f map[string]*yaml.Node, d *bench.DatasetSpec, field string) {
	if d.Kind != bench.DatasetTrace {
		for _, k := range []string{"format", "speed", "start", "duration"} {
			if f[k] != nil && !p.Failed() {
				p.Fail(f[k], field+"."+k, "only with kind: trace")
			}
		}
		return
	}
	t := &bench.Trace{}
	d.Trace = t
	if x := f["format"]; x != nil {
		t.Format = p.Str(x, field+".format")
		if _, err := trace.ParseFormat(t.Format); err != nil && !p.Failed() {
			p.Fail(x, field+".format", "%v", err)
		}
	} else if !p.Failed() {
		p.Fail(f["kind"], field+".format", "missing: a trace needs its format (%s)", strings.Join(registry.Strings(trace.Formats), ", "))
	}
	if x := f["speed"]; x != nil {
		t.Speed = p.Positive(x, field+".speed")
	}
	if x := f["start"]; x != nil {
		v, err := time.ParseDuration(p.Str(x, field+".start"))
		if !p.Failed() && (err != nil || v < 0) {
			p.Fail(x, field+".start", "%q: want a duration >= 0 such as 90s", x.Value)
		}
		t.Start = v
	}
	if x := f["duration"]; x != nil {
		t.Duration = p.Duration(x, field+".duration")
	}
	if f["path"] == nil && !p.Failed() {
		p.Fail(f["kind"], field+".path", "missing: a trace needs its file")
	}
}

// conversation reads a conversation dataset's sessions, turns (N or a
// length distribution) and think_time (bench.ParseThinkTime's form); they
// are refused on other kinds.
func (p *specParser) conversation(f map[string]*yaml.Node, d *bench.DatasetSpec, field string) {
	for _, k := range []string{"sessions", "turns", "think_time"} {
		if x := f[k]; x != nil && d.Kind != bench.DatasetConversation {
			p.Fail(x, field+"."+k, "only with kind: conversation")
			return
		}
	}
	if d.Kind != bench.DatasetConversation || p.Failed() {
		return
	}
	need := []string{"sessions", "turns"}
	if d.Path != "" {
		// A ShareGPT file's conversations: each has its own turns.
		if x := f["turns"]; x != nil {
			p.Fail(x, field+".turns", "a conversation from a file (path) has each file conversation's own turns")
			return
		}
		need = need[:1]
	}
	for _, k := range need {
		if p.Require(f["kind"], f, field, k, "a conversation needs sessions and turns, or sessions and a ShareGPT path") == nil {
			return
		}
	}
	d.Sessions = p.IntIn(f["sessions"], field+".sessions", 1, maxRequests)
	if f["turns"] != nil {
		turns := p.dist(f["turns"], field+".turns")
		d.Turns = &turns
	}
	if x := f["think_time"]; x != nil && !p.Failed() {
		if x.Kind != yaml.ScalarNode {
			p.Fail(x, field+".think_time", "want a time or a distribution such as exponential:mean=3s")
			return
		}
		t, err := bench.ParseThinkTime(x.Value)
		if err != nil {
			p.Fail(x, field+".think_time", "%v", err)
			return
		}
		d.Think = &t
	}
}

// dist accepts N, the command-line form ("lognormal:median=1024,sigma=0.6"),
// or a one-key mapping: {fixed: N}, {uniform: [A, B]},
// {lognormal: {median, sigma, min, max}}, {normal: {mean, sigma, min, max}}.
func (p *specParser) dist(n *yaml.Node, field string) bench.Dist {
	if n.Kind == yaml.ScalarNode {
		d, err := bench.ParseDist(n.Value)
		if err != nil {
			p.Fail(n, field, "%v", err)
		}
		return d
	}
	f := p.Fields(n, field, bench.DistFixed, bench.DistUniform, bench.DistLognormal, bench.DistNormal)
	if p.Failed() {
		return bench.Dist{}
	}
	if len(f) != 1 {
		p.Fail(n, field, "want exactly one of fixed, uniform, lognormal, normal")
		return bench.Dist{}
	}
	var d bench.Dist
	for kind, x := range f {
		d.Kind = kind
		sub := field + "." + kind
		switch kind {
		case bench.DistFixed:
			d.Value = p.IntIn(x, sub, 1, bench.MaxLen)
		case bench.DistUniform:
			r := p.Seq(x, sub)
			if !p.Failed() && len(r) != 2 {
				p.Fail(x, sub, "want [MIN, MAX]")
				return d
			}
			if !p.Failed() {
				d.Min, d.Max = p.IntIn(r[0], sub, 1, bench.MaxLen), p.IntIn(r[1], sub, 1, bench.MaxLen)
			}
		default:
			pf := p.Fields(x, sub, "median", "mean", "sigma", "min", "max")
			if v := pf["median"]; v != nil {
				d.Median = p.Positive(v, sub+".median")
			}
			if v := pf["mean"]; v != nil {
				d.Mean = p.Positive(v, sub+".mean")
			}
			if v := pf["sigma"]; v != nil {
				d.Sigma = p.Positive(v, sub+".sigma")
			}
			if v := pf["min"]; v != nil {
				d.Min = p.IntIn(v, sub+".min", 1, bench.MaxLen)
			}
			if v := pf["max"]; v != nil {
				d.Max = p.IntIn(v, sub+".max", 1, bench.MaxLen)
			}
		}
	}
	if !p.Failed() {
		if err := d.Validate(); err != nil {
			p.Fail(n, field, "%v", err)
		}
	}
	return d
}

func (p *specParser) load(n *yaml.Node, w *Workload) {
	f := p.Fields(n, "workload.load", "concurrency", "rate", "burstiness", "max_concurrency", "capacity",
		"start_rate", "max_rate", "rate_precision", "probe_span")
	if p.Failed() {
		return
	}
	kinds := 0
	for _, k := range []string{"concurrency", "rate", "capacity"} {
		if f[k] != nil {
			kinds++
		}
	}
	if kinds != 1 {
		p.Fail(n, "workload.load", "want exactly one of concurrency, rate or capacity")
		return
	}
	burst := 0.0
	if x := f["burstiness"]; x != nil {
		burst = p.Positive(x, "workload.load.burstiness")
	}
	maxConc := 0
	if x := f["max_concurrency"]; x != nil {
		maxConc = p.IntIn(x, "workload.load.max_concurrency", 1, maxConcurrency)
	}
	switch {
	case f["concurrency"] != nil:
		if f["burstiness"] != nil {
			p.Fail(f["burstiness"], "workload.load.burstiness", "only with rate")
		}
		for _, c := range p.Seq(f["concurrency"], "workload.load.concurrency") {
			w.Levels = append(w.Levels, measure.Load{MaxConcurrency: p.IntIn(c, "workload.load.concurrency", 1, maxConcurrency)})
		}
	case f["rate"] != nil:
		for _, r := range p.Seq(f["rate"], "workload.load.rate") {
			w.Levels = append(w.Levels, measure.Load{Rate: p.rate(r, "workload.load.rate"), Burstiness: burst, MaxConcurrency: maxConc})
		}
	default:
		p.capacity(f, w, maxConc, burst)
	}
	if !w.CapacityRate {
		for _, k := range []string{"start_rate", "max_rate", "rate_precision", "probe_span"} {
			if f[k] != nil {
				p.Fail(f[k], "workload.load."+k, "only with capacity: rate")
				return
			}
		}
	}
}

// MaxRequestRate bounds every request rate of a spec (rate levels,
// start_rate, max_rate), in requests/s: no one engine answers LLM requests
// anywhere near it, and past it the arrivals of a whole level (at most
// bench.MaxRequests) come in seconds, a burst and not a rate. whatif's
// capacity search stops there too.
const MaxRequestRate = 10_000

// minRatePrecision bounds rate_precision from below: a bisection to 0.1%
// is past the noise of any measurement, and a finer one only adds probes.
const minRatePrecision = 0.001

// rate reads a request rate of n, bounded by MaxRequestRate.
func (p *specParser) rate(n *yaml.Node, field string) float64 {
	r := p.PositiveAtMost(n, field, math.Inf(1)) // the bound below, in its own words
	if !p.Failed() && r > MaxRequestRate {
		p.Fail(n, field, "%g req/s is above %d req/s, a burst and not a rate (give concurrency levels for a burst)", r, MaxRequestRate)
	}
	return r
}

// DefaultProbeSpan is how long each probe of a capacity search over the
// rate sends at least (workload.load.probe_span).
const DefaultProbeSpan = 30 * time.Second

// capacity reads `capacity: true` (or `concurrency`: search the
// concurrency) and `capacity: rate` (search the request rate).
func (p *specParser) capacity(f map[string]*yaml.Node, w *Workload, maxConc int, burst float64) {
	x := f["capacity"]
	switch x.Value {
	case "rate":
		w.Capacity, w.CapacityRate = true, true
		w.StartRate, w.MaxRate, w.RatePrecision, w.Burstiness, w.ProbeSpan = 1, 1000, 0.05, burst, DefaultProbeSpan
		if v := f["start_rate"]; v != nil {
			w.StartRate = p.rate(v, "workload.load.start_rate")
		}
		if v := f["max_rate"]; v != nil {
			w.MaxRate = p.rate(v, "workload.load.max_rate")
		}
		if v := f["rate_precision"]; v != nil {
			w.RatePrecision = p.Positive(v, "workload.load.rate_precision")
			if !p.Failed() && (w.RatePrecision < minRatePrecision || w.RatePrecision >= 1) {
				p.Fail(v, "workload.load.rate_precision", "%g: want %g to 1 (0.05 = 5%%)", w.RatePrecision, minRatePrecision)
			}
		}
		if v := f["probe_span"]; v != nil {
			w.ProbeSpan = p.Duration(v, "workload.load.probe_span")
		}
		if !p.Failed() && w.StartRate > w.MaxRate {
			p.Fail(f["start_rate"], "workload.load.start_rate", "%g is above max_rate %g", w.StartRate, w.MaxRate)
		}
		if maxConc > 0 {
			p.Fail(f["max_concurrency"], "workload.load.max_concurrency", "not with capacity: rate (the search is open-loop)")
		}
		return
	case "concurrency":
		w.Capacity = true
	default:
		w.Capacity = p.Bool(x, "workload.load.capacity")
		if !p.Failed() && !w.Capacity {
			p.Fail(x, "workload.load.capacity", "capacity: false measures nothing; give concurrency or rate levels")
		}
	}
	if f["burstiness"] != nil {
		p.Fail(f["burstiness"], "workload.load.burstiness", "only with rate levels or capacity: rate")
	}
	w.MaxConcurrency = 1024
	if maxConc > 0 {
		w.MaxConcurrency = maxConc
	}
}

func (p *specParser) slo(n *yaml.Node) recommend.SLO {
	if n.Kind != yaml.MappingNode {
		p.Fail(n, "slo", "want a mapping like {ttft_p99_ms: 500}")
		return nil
	}
	var slo recommend.SLO
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == recommend.ErrorRate {
			f := p.Number(v, "slo."+recommend.ErrorRate)
			if !p.Failed() && !(f >= 0 && f < 1) {
				p.Fail(v, "slo."+recommend.ErrorRate, "%g: want the share of requests that may fail, at least 0 and below 1 (0.01 accepts 1%%)", f)
			}
			slo = append(slo, recommend.Limit{Metric: recommend.ErrorRate, Max: f})
			continue
		}
		if !recommend.LimitName(k.Value) {
			p.Fail(k, "slo."+k.Value, "unknown limit (want METRIC_STAT_ms, METRIC ttft|tpot|itl|e2el, STAT mean|p50|p90|p95|p99, or error_rate)")
			return nil
		}
		slo = append(slo, recommend.Limit{Metric: strings.TrimSuffix(k.Value, "_ms"), Max: p.Positive(v, "slo."+k.Value)})
	}
	return slo
}

func (p *specParser) tuner(n *yaml.Node, t *TunerSpec) {
	f := p.Fields(n, "tuner", "sampler", "trials", "seed", "objective", "parallel", "precheck", "confirm")
	if x := f["sampler"]; x != nil {
		p.samplerGiven = true
		t.Sampler = p.Str(x, "tuner.sampler")
		if _, ok := samplerCheck(t.Sampler); !ok {
			p.Fail(x, "tuner.sampler", "%q: want %s", t.Sampler, samplerNames())
		}
	}
	if x := f["trials"]; x != nil {
		t.Trials = p.IntIn(x, "tuner.trials", 1, maxTrials)
	}
	if x := f["seed"]; x != nil {
		t.Seed = int64(p.IntIn(x, "tuner.seed", 0, 1<<53))
	}
	if x := f["objective"]; x != nil {
		o, err := recommend.ParseObjective(p.Str(x, "tuner.objective"))
		if !p.Failed() && err != nil {
			p.Fail(x, "tuner.objective", "%v", err)
		}
		t.Objective = o
	}
	if x := f["parallel"]; x != nil {
		t.Parallel = p.IntIn(x, "tuner.parallel", 1, maxParallel)
	}
	if x := f["precheck"]; x != nil {
		t.Precheck = p.Bool(x, "tuner.precheck")
	}
	if x := f["confirm"]; x != nil {
		if x.Kind == yaml.ScalarNode {
			if p.Bool(x, "tuner.confirm") {
				t.Confirm = DefaultConfirm
			} else {
				t.Confirm = Confirm{}
			}
			return
		}
		cf := p.Fields(x, "tuner.confirm", "top", "runs")
		if v := cf["top"]; v != nil {
			t.Confirm.Top = p.IntIn(v, "tuner.confirm.top", 0, maxConfirm)
		}
		if v := cf["runs"]; v != nil {
			t.Confirm.Runs = p.IntIn(v, "tuner.confirm.runs", 0, maxConfirm)
		}
	}
}

// quality reads the quality gate: the baseline's settings (one value each,
// named as in space), the allowed drop and the task set's size.
func (p *specParser) quality(n *yaml.Node) *QualitySpec {
	f := p.Fields(n, "quality", "baseline", "max_drop_pct", "items")
	q := &QualitySpec{Baseline: engine.Settings{}, MaxDropPct: 1.0, Items: quality.DefaultItems}
	b := p.Require(n, f, "quality", "baseline", "the settings of the reference configuration, e.g. {quantization: none}")
	if b == nil {
		return q
	}
	if b.Kind != yaml.MappingNode {
		p.Fail(b, "quality.baseline", "must be a mapping of setting names to one value each")
		return q
	}
	for i := 0; i+1 < len(b.Content); i += 2 {
		k, v := b.Content[i], b.Content[i+1]
		field := "quality.baseline." + k.Value
		if v.Kind != yaml.ScalarNode {
			p.Fail(v, field, "one value, not a range or a list: the baseline is one configuration")
			return q
		}
		var raw any
		if err := v.Decode(&raw); err != nil {
			p.Fail(v, field, "%v", err)
			return q
		}
		val, err := engine.Check(k.Value, raw)
		if err != nil {
			p.Fail(k, field, "%v", err)
			return q
		}
		q.Baseline[k.Value] = val
	}
	if x := f["max_drop_pct"]; x != nil {
		q.MaxDropPct = p.Number(x, "quality.max_drop_pct")
		if !p.Failed() && (q.MaxDropPct < 0 || q.MaxDropPct > 100) {
			p.Fail(x, "quality.max_drop_pct", "%g: want points of accuracy in [0, 100]", q.MaxDropPct)
		}
	}
	if x := f["items"]; x != nil {
		q.Items = p.Int(x, "quality.items", len(quality.Kinds))
	}
	return q
}

func (p *specParser) whatif(n *yaml.Node) *WhatifSpec {
	f := p.Fields(n, "whatif", "gpus", "max_gpus", "engines", "target_rps", "requests_per_day", "peak_factor",
		"prices", "reserved_discount", "calibration", "force_calibration", "quantization", "kv_cache_dtype",
		"max_model_len", "trials", "shapes", "kv_link", "speculative")
	w := &WhatifSpec{}
	if p.Failed() {
		return w
	}
	if x := f["gpus"]; x != nil {
		for _, g := range p.Strings(x, "whatif.gpus") {
			if _, err := catalog.LookupGPU(g); err != nil && !p.Failed() {
				p.Fail(x, "whatif.gpus", "%v", err)
			}
			w.GPUs = append(w.GPUs, g)
		}
	}
	if x := f["max_gpus"]; x != nil {
		w.MaxGPUs = p.Int(x, "whatif.max_gpus", 1)
	}
	if x := f["engines"]; x != nil {
		for _, e := range p.Strings(x, "whatif.engines") {
			eng := engine.Engine(e)
			if !eng.Valid() && !p.Failed() {
				p.Fail(x, "whatif.engines", "%q: want vllm or sglang", e)
			}
			w.Engines = append(w.Engines, eng)
		}
	}
	if x := f["target_rps"]; x != nil {
		w.TargetRPS = p.Positive(x, "whatif.target_rps")
	}
	if x := f["requests_per_day"]; x != nil {
		w.RequestsPerDay = p.Positive(x, "whatif.requests_per_day")
		if f["target_rps"] != nil && !p.Failed() {
			p.Fail(x, "whatif.requests_per_day", "give target_rps or requests_per_day, not both")
		}
	}
	if x := f["peak_factor"]; x != nil {
		w.PeakFactor = p.Positive(x, "whatif.peak_factor")
		if f["requests_per_day"] == nil && !p.Failed() {
			p.Fail(x, "whatif.peak_factor", "only with requests_per_day")
		}
	}
	if x := f["prices"]; x != nil {
		if x.Kind != yaml.MappingNode {
			p.Fail(x, "whatif.prices", "want a mapping of GPU to $/GPU-hour, e.g. {H100-SXM: 2.95}")
			return w
		}
		w.Prices = map[string]float64{}
		for i := 0; i+1 < len(x.Content); i += 2 {
			k, v := x.Content[i], x.Content[i+1]
			g, err := catalog.LookupGPU(k.Value)
			if err != nil {
				p.Fail(k, "whatif.prices", "%v", err)
				return w
			}
			w.Prices[g.ID] = p.Positive(v, "whatif.prices."+k.Value)
		}
	}
	if x := f["reserved_discount"]; x != nil {
		d := p.Number(x, "whatif.reserved_discount")
		if !p.Failed() && (d < 0 || d >= 1) {
			p.Fail(x, "whatif.reserved_discount", "%g: want [0, 1)", d)
		}
		w.ReservedDiscount = &d
	}
	if x := f["calibration"]; x != nil {
		if x.Kind == yaml.ScalarNode {
			w.Calibration = []string{p.Str(x, "whatif.calibration")}
		} else {
			w.Calibration = p.Strings(x, "whatif.calibration")
		}
	}
	if x := f["force_calibration"]; x != nil {
		w.ForceCalibration = p.Bool(x, "whatif.force_calibration")
	}
	if x := f["quantization"]; x != nil {
		w.Quantization = p.Strings(x, "whatif.quantization")
	}
	if x := f["kv_cache_dtype"]; x != nil {
		w.KVCacheDTypes = p.Strings(x, "whatif.kv_cache_dtype")
	}
	if x := f["max_model_len"]; x != nil {
		w.MaxModelLen = p.Int(x, "whatif.max_model_len", 1)
	}
	if x := f["trials"]; x != nil {
		w.Trials = p.Int(x, "whatif.trials", 1)
	}
	p.whatifDeployment(f, w)
	return w
}

// Forecastable says whether the simulator can forecast spec: a catalog GPU
// and a model it knows (the catalog, or a config.json). nil when it can.
// It reads the catalog only.
func Forecastable(spec *Spec) error {
	if spec.Hardware.GPU == "" {
		return errors.New("the study names no hardware.gpu, so the simulator has no GPU to forecast on")
	}
	if _, err := catalog.LookupGPU(spec.Hardware.GPU); err != nil {
		return fmt.Errorf("hardware.gpu: %w", err)
	}
	var m catalog.Model
	var err error
	if p := spec.Launcher.ModelConfig; p != "" {
		m, err = catalog.LoadHFConfig(p, spec.Model)
	} else {
		m, err = catalog.LookupModel(spec.Model)
	}
	if err == nil {
		err = m.Simulable()
	}
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// defaultSampler makes guided the sampler of a spec that names none when
// the simulator can forecast the study (Forecastable) and the launcher can
// change settings; TPE otherwise. A spec naming guided for a study the
// simulator cannot forecast is refused.
func (p *specParser) defaultSampler(spec *Spec, top map[string]*yaml.Node) {
	fixed := spec.Launcher.fixedSettings()
	given := p.samplerGiven
	err := Forecastable(spec)
	switch {
	case !given && err == nil && !fixed:
		spec.Tuner.Sampler = SamplerGuided
	case !given:
		spec.Tuner.Sampler = SamplerTPE
	case given && spec.Tuner.Sampler == SamplerGuided && err != nil:
		p.Fail(yamlpos.KeyNode(top["tuner"], "sampler"), "tuner.sampler", "guided needs the simulator: %v", err)
	}
}

// check rejects impossible combinations across sections.
func (p *specParser) check(spec *Spec, top map[string]*yaml.Node) {
	need := minGPUs(spec.Space)
	largest, hosts := spec.Launcher.hostGPUs()
	if largest > 0 && need > largest {
		if hosts > 1 {
			p.Fail(yamlpos.KeyNode(top["launcher"], "hosts"), "launcher.hosts", "the smallest configuration of the space needs %d GPUs on one host, the largest host lists %d", need, largest)
		} else {
			p.Fail(yamlpos.KeyNode(top["launcher"], "gpus"), "launcher.gpus", "the smallest configuration of the space needs %d GPUs, only %d listed", need, largest)
		}
	}
	p.checkDisaggregation(spec, top)
	if spec.Launcher.fixedSettings() {
		for _, q := range spec.Space.Params {
			if q.Kind != space.KindCategorical || len(q.Choices) != 1 {
				p.Fail(yamlpos.KeyNode(top["space"], q.Name), "space."+q.Name,
					"the %s launcher cannot change engine settings: give fixed values (the server's own) or use another launcher", spec.Launcher.Kind)
				break
			}
		}
	}
	if spec.Workload.Capacity && len(spec.SLO.Latency()) == 0 {
		p.Fail(top["workload"], "workload.load.capacity", "a capacity search needs slo limits")
	}
	if q := spec.Quality; q != nil {
		if spec.Launcher.fixedSettings() {
			p.Fail(top["quality"], "quality", "the %s launcher cannot start the baseline configuration", spec.Launcher.Kind)
		} else if largest > 0 && GPUsFor(q.Baseline) > largest {
			p.Fail(yamlpos.KeyNode(top["quality"], "baseline"), "quality.baseline", "needs %d GPUs on one host, the study has %d", GPUsFor(q.Baseline), largest)
		}
	}
	p.defaultSampler(spec, top)
	if check, _ := samplerCheck(spec.Tuner.Sampler); check != nil {
		if err := check(spec); err != nil {
			p.Fail(top["tuner"], "tuner.sampler", "%s %v", spec.Tuner.Sampler, err)
		}
	}
	for _, o := range append(append([]recommend.Objective(nil), spec.Objectives...), spec.Tuner.Objective) {
		if o.Metric == "cost_per_mtok" && spec.Hardware.PricePerGPUHour <= 0 {
			p.Fail(top["objectives"], "objectives", "cost_per_mtok needs hardware.price_per_gpu_hour (or a catalog GPU in hardware.gpu)")
		}
	}
}

// GPUsFor returns how many GPUs a trial with settings s needs:
// tensor_parallel × pipeline_parallel × data_parallel (each default 1).
func GPUsFor(s space.Settings) int { return s.GPUs() }

// minGPUs is the fewest GPUs any point of the space needs: the product of
// the parallel settings' smallest values, and for a disaggregated
// configuration the sum over its smallest parts.
func minGPUs(searchSpace space.Space) int {
	agg := 1
	for _, name := range engine.ParallelNames() {
		agg *= lowest(searchSpace, name, 1)
	}
	q, ok := searchSpace.Param("disaggregated")
	if !ok {
		return agg
	}
	rest := agg / lowest(searchSpace, "tensor_parallel", 1)
	tp := lowest(searchSpace, "tensor_parallel", 1)
	dis := (lowest(searchSpace, "prefill_replicas", 1)*lowest(searchSpace, "prefill_tensor_parallel", tp) +
		lowest(searchSpace, "decode_replicas", 1)*lowest(searchSpace, "decode_tensor_parallel", tp)) * rest
	if q.Kind == space.KindCategorical && !slices.Contains(q.Choices, any(false)) {
		return dis
	}
	return min(agg, dis)
}

// lowest is the smallest value the space gives setting name (def when it
// does not vary it).
func lowest(searchSpace space.Space, name string, def int) int {
	q, ok := searchSpace.Param(name)
	if !ok {
		return def
	}
	lo := math.Inf(1)
	switch q.Kind {
	case space.KindInt, space.KindFloat:
		lo = q.Low
	default:
		for _, v := range q.Choices {
			if f, ok := (space.Settings{"v": v}).Float("v"); ok && f < lo {
				lo = f
			}
		}
	}
	if lo >= 1 && !math.IsInf(lo, 1) {
		return int(lo)
	}
	return def
}

package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Constants are the simulator's efficiency constants: the figures a
// calibration fits to measurements (constants.go holds the stock values
// and their sources). A zero field means the stock value for the engine.
type Constants struct {
	HBMEfficiency       float64 `json:"hbm_efficiency,omitempty"`        // share of peak HBM bandwidth
	BF16GEMMEfficiency  float64 `json:"bf16_gemm_efficiency,omitempty"`  // share of the BF16 tensor peak
	FP8GEMMEfficiency   float64 `json:"fp8_gemm_efficiency,omitempty"`   // share of the FP8 tensor peak
	W4A16GEMMEfficiency float64 `json:"w4a16_gemm_efficiency,omitempty"` // Marlin GEMMs (AWQ/GPTQ; FP8 without FP8 tensor cores), share of the BF16 peak
	AttentionEfficiency float64 `json:"attention_efficiency,omitempty"`  // prefill attention, share of the BF16 peak
	LinkEfficiency      float64 `json:"link_efficiency,omitempty"`       // all-reduce bus bandwidth, share of the link's
	StepOverheadMs      float64 `json:"step_overhead_ms,omitempty"`      // CPU time per step not hidden behind the GPU
	PerSeqOverheadUs    float64 `json:"per_seq_overhead_us,omitempty"`   // CPU time per scheduled sequence per step
	KernelOverheadUs    float64 `json:"kernel_overhead_us,omitempty"`    // launch gap and ramp of one GPU kernel in a CUDA graph
	FrontendOverheadMs  float64 `json:"frontend_overhead_ms,omitempty"`  // a request's time in the API server outside the engine loop
	// MemoryOverhead scales the engine's start-up reservations besides
	// weights and KV cache (non-torch memory, the profiled activation
	// peak, the CUDA graph pool): 1 is the memory model as written
	// (memory.go); a guided study learns it from which configurations
	// start.
	MemoryOverhead float64 `json:"memory_overhead,omitempty"`
}

// constant describes one field of Constants for the fitter and for
// messages: its name (the JSON key), where it lives, its stock value and
// the range a fit may move it in.
type constant struct {
	name     string
	field    func(*Constants) *float64
	stock    func(engine.Engine) float64
	min, max float64
}

var constants = []constant{
	{"hbm_efficiency", func(c *Constants) *float64 { return &c.HBMEfficiency }, fixed(hbmEfficiency), 0.05, 1},
	{"bf16_gemm_efficiency", func(c *Constants) *float64 { return &c.BF16GEMMEfficiency }, fixed(bf16GEMMEfficiency), 0.05, 1},
	{"fp8_gemm_efficiency", func(c *Constants) *float64 { return &c.FP8GEMMEfficiency }, fixed(fp8GEMMEfficiency), 0.05, 1},
	{"w4a16_gemm_efficiency", func(c *Constants) *float64 { return &c.W4A16GEMMEfficiency }, fixed(w4a16GEMMEfficiency), 0.05, 1},
	{"attention_efficiency", func(c *Constants) *float64 { return &c.AttentionEfficiency }, fixed(attentionEfficiency), 0.05, 1},
	{"link_efficiency", func(c *Constants) *float64 { return &c.LinkEfficiency }, fixed(linkEfficiency), 0.05, 1},
	{"step_overhead_ms", func(c *Constants) *float64 { return &c.StepOverheadMs }, func(e engine.Engine) float64 {
		if e == engine.SGLang {
			return ms(stepOverheadSGLang)
		}
		return ms(stepOverheadVLLM)
	}, 0.01, 100},
	{"per_seq_overhead_us", func(c *Constants) *float64 { return &c.PerSeqOverheadUs }, fixed(us(perSeqOverhead)), 0.01, 1000},
	{"kernel_overhead_us", func(c *Constants) *float64 { return &c.KernelOverheadUs }, fixed(us(kernelOverhead)), 0.01, 100},
	{"frontend_overhead_ms", func(c *Constants) *float64 { return &c.FrontendOverheadMs }, fixed(ms(frontendOverhead)), 0.01, 1000},
	{"memory_overhead", func(c *Constants) *float64 { return &c.MemoryOverhead }, fixed(memoryOverhead), 0.05, 20},
}

func fixed(v float64) func(engine.Engine) float64 { return func(engine.Engine) float64 { return v } }

// ConstantNames lists the constants by their JSON names, in a stable order.
func ConstantNames() []string {
	out := make([]string, len(constants))
	for i, k := range constants {
		out[i] = k.name
	}
	return out
}

func lookupConstant(name string) (constant, bool) {
	for _, k := range constants {
		if k.name == name {
			return k, true
		}
	}
	return constant{}, false
}

// StockConstants are the stock constants of engine e (constants.go).
func StockConstants(e engine.Engine) Constants {
	var c Constants
	for _, k := range constants {
		*k.field(&c) = k.stock(e)
	}
	return c
}

// WithDefaults fills c's zero fields with engine e's stock values.
func (c Constants) WithDefaults(e engine.Engine) Constants {
	for _, k := range constants {
		if p := k.field(&c); *p == 0 {
			*p = k.stock(e)
		}
	}
	return c
}

// Get returns the named constant (ConstantNames); ok is false for an
// unknown name.
func (c Constants) Get(name string) (v float64, ok bool) {
	k, ok := lookupConstant(name)
	if !ok {
		return 0, false
	}
	return *k.field(&c), true
}

// Set sets the named constant; it fails for an unknown name or a value
// outside the constant's range (ConstantRange).
func (c *Constants) Set(name string, v float64) error {
	k, ok := lookupConstant(name)
	if !ok {
		return fmt.Errorf("unknown simulator constant %q (known: %s)", name, strings.Join(ConstantNames(), ", "))
	}
	if !(v >= k.min && v <= k.max) {
		return fmt.Errorf("simulator constant %s = %g: want [%g, %g]", name, v, k.min, k.max)
	}
	*k.field(c) = v
	return nil
}

// ConstantRange is the range a constant may take (efficiencies are
// fractions of a peak; overheads are positive times).
func ConstantRange(name string) (lo, hi float64, ok bool) {
	k, ok := lookupConstant(name)
	return k.min, k.max, ok
}

// validate checks every set constant against its range.
func (c Constants) validate() error {
	for _, k := range constants {
		if v := *k.field(&c); v != 0 && !(v >= k.min && v <= k.max) || math.IsNaN(v) {
			return fmt.Errorf("simulator constant %s = %g: want [%g, %g]", k.name, v, k.min, k.max)
		}
	}
	return nil
}

// ErrProfileMismatch is wrapped by Profile.Check's error: the profile was
// measured on another GPU or engine.
var ErrProfileMismatch = errors.New("calibration profile measured elsewhere")

// ProfileVersion is the format version Save writes and Load accepts.
const ProfileVersion = 1

// MetricError is one metric's fit error over the calibration points: the
// median absolute relative error of the simulation against the
// measurements, before (stock constants) and after the fit.
type MetricError struct {
	Metric string  `json:"metric"` // e.g. ttft_p99
	Points int     `json:"points"` // points with the metric measured
	Before float64 `json:"before"` // fraction, 0.12 = 12%
	After  float64 `json:"after"`
	// MaxAfter is the largest absolute relative error after the fit.
	MaxAfter float64 `json:"max_after"`
}

// Profile is a calibration of the simulator: constants fitted to the
// measurements of one engine (and version) on one GPU. It is refused for
// another GPU or engine unless the caller forces it (Check).
type Profile struct {
	Version       int           `json:"version"`
	GPU           string        `json:"gpu"`                      // catalog id
	Engine        engine.Engine `json:"engine"`                   // vllm or sglang
	EngineVersion string        `json:"engine_version,omitempty"` // e.g. "v0.11.0"; "" when unknown
	Model         string        `json:"model,omitempty"`          // model of the measurements
	Source        string        `json:"source,omitempty"`         // e.g. "study quickstart (studies.db)"
	Created       string        `json:"created,omitempty"`        // RFC 3339
	Points        int           `json:"points"`                   // measured load points fitted
	Constants     Constants     `json:"constants"`
	// Fitted names the constants the fit moved; the others stayed at the
	// start values (the measurements do not tell them apart).
	Fitted []string      `json:"fitted,omitempty"`
	Errors []MetricError `json:"errors,omitempty"`
}

// Check refuses p for a GPU or engine other than the ones it was measured
// on; force accepts it anyway. gpu is a catalog id or alias.
func (p Profile) Check(gpu string, e engine.Engine, force bool) error {
	if force {
		return nil
	}
	want, err := catalog.LookupGPU(p.GPU)
	if err != nil {
		return fmt.Errorf("%w: the profile's GPU: %w", ErrProfileMismatch, err)
	}
	got, err := catalog.LookupGPU(gpu)
	if err != nil {
		return err
	}
	switch {
	case got.ID != want.ID:
		return fmt.Errorf("%w: it was measured on %s, not %s (--force-calibration uses it anyway)", ErrProfileMismatch, p.What(), got.ID)
	case e != "" && p.Engine != "" && e != p.Engine:
		return fmt.Errorf("%w: it was measured on %s, not %s (--force-calibration uses it anyway)", ErrProfileMismatch, p.What(), e)
	}
	return nil
}

// What names what p was measured on: "H100-SXM, vllm v0.11.0".
func (p Profile) What() string {
	s := p.GPU + ", " + string(p.Engine)
	if p.EngineVersion != "" {
		s += " " + p.EngineVersion
	}
	return s
}

// Validate checks a profile read from a file.
func (p Profile) Validate() error {
	if p.Version != ProfileVersion {
		return fmt.Errorf("profile format version %d, want %d", p.Version, ProfileVersion)
	}
	if p.GPU == "" {
		return errors.New("profile names no gpu")
	}
	if _, err := catalog.LookupGPU(p.GPU); err != nil {
		return fmt.Errorf("profile gpu: %w", err)
	}
	if !p.Engine.Valid() {
		return fmt.Errorf("profile engine %q: want vllm or sglang", p.Engine)
	}
	return p.Constants.validate()
}

// LoadProfile reads and validates a profile file.
func LoadProfile(path string) (Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("calibration profile: %w", err)
	}
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("calibration profile %s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return Profile{}, fmt.Errorf("calibration profile %s: %w", path, err)
	}
	return p, nil
}

// Save writes p as indented JSON (mode 0600: it names hardware and
// studies, nothing secret, but it is the user's own measurement).
func (p Profile) Save(path string) error {
	if p.Version == 0 {
		p.Version = ProfileVersion
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

package simulated

import (
	"context"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

// Virtual "launches" the simulated engine in this process on a virtual
// clock: no process, no port, no HTTP. The benchmark drives it through its
// transport (VirtualInstance.Transport), so a trial takes milliseconds and
// its figures are the same on a busy machine as on an idle one. A
// configuration that does not fit ends at once with the engine's own
// message, as the real engine would.
type Virtual struct {
	GPU         string // catalog GPU; "" = the simulator's default
	ModelConfig string // a Hugging Face config.json for a model the catalog lacks
	// Model, when set, is the model as already read (a stored study's
	// config.json, catalog.ParseHFConfig), in place of ModelConfig.
	Model *catalog.Model
	// Calibration is a calibration profile (sim.Profile) for the
	// simulator's constants; it must match the GPU and engine unless
	// ForceCalibration.
	Calibration      string
	ForceCalibration bool
	// Constants override the simulator's constants (the profile's, or the
	// stock ones) field by field: a guided study's refit model and the
	// perturbed "realities" of make guided-bench. Not a spec key.
	Constants sim.Constants
	// Deviation is what the engine does that the simulator's model
	// lacks (sim.Deviation): the structural "realities" of make
	// guided-bench. Not a spec key.
	Deviation sim.Deviation
	// KVLink is the link a disaggregated configuration's KV cache
	// crosses (sim.Links; "" = sim.DefaultLink, or the settings'
	// sim_kv_link).
	KVLink string
}

var _ launcher.Launcher = (*Virtual)(nil)

// Capabilities: a virtual trial's figures depend on its settings and seed
// only (Deterministic); Preflight is the simulator's.
func (v *Virtual) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{Preflight: v.Preflight, Deterministic: true, Disaggregates: v.RunsDisaggregated}
}

// Launch builds the simulated engine from spec's settings (and extra
// flags) directly, with no command line in between.
func (v *Virtual) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var eng engineTransport
	if spec.Settings.Disaggregated() {
		d, err := v.Deployment(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
		}
		eng, err = sim.NewDisaggVirtual(d)
		return v.started(eng, err)
	}
	cfg, err := v.Config(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
	}
	eng, err = sim.NewVirtual(cfg)
	return v.started(eng, err)
}

// engineTransport is a simulated engine or deployment on a virtual clock.
type engineTransport interface {
	measure.Transport
}

// started is the instance of an engine that started, or of one whose
// start-up failed as the engine's would.
func (v *Virtual) started(eng engineTransport, err error) (launcher.Instance, error) {
	var se *sim.StartupError
	if errors.As(err, &se) {
		// The engine's start-up failure, as its log would show it.
		return &VirtualInstance{failed: "ERROR " + se.Message + "\n"}, nil
	}
	if err != nil {
		return nil, err
	}
	return &VirtualInstance{eng: eng}, nil
}

// Config is the simulator configuration spec launches: its settings, then
// the settings its extra flags give, on len(spec.GPUs) GPUs (or as many as
// the parallel settings need).
func (v *Virtual) Config(spec launcher.Spec) (sim.Config, error) {
	set := spec.Settings.Clone()
	if len(spec.Extra) > 0 {
		extra, err := engine.ParseFlags(spec.Engine, spec.Extra)
		if err != nil {
			return sim.Config{}, err
		}
		for k, val := range extra {
			set[k] = val
		}
	}
	if v.Calibration != "" {
		set["sim_calibration"], set["sim_force_calibration"] = v.Calibration, v.ForceCalibration
	}
	n := len(spec.GPUs)
	if n == 0 {
		n = set.GPUs()
	}
	var cfg sim.Config
	var err error
	if v.Model != nil {
		cfg, err = sim.FromModel(spec.Engine, spec.Model, *v.Model, v.GPU, n, set)
	} else {
		cfg, err = sim.FromSettings(spec.Engine, spec.Model, v.ModelConfig, v.GPU, n, set)
	}
	if err != nil {
		return cfg, err
	}
	for _, name := range sim.ConstantNames() {
		if x, _ := v.Constants.Get(name); x != 0 {
			if err := cfg.Constants.Set(name, x); err != nil {
				return cfg, err
			}
		}
	}
	cfg.Deviation = v.Deviation
	return cfg, nil
}

// RunsDisaggregated says that the virtual kind runs a disaggregated
// configuration itself, as one sim.DisaggVirtual (no parts to start, no
// router), with its KV over kvLink ("" keeps KVLink).
func (v *Virtual) RunsDisaggregated(kvLink string) {
	if kvLink != "" {
		v.KVLink = kvLink
	}
}

// Deployment is the disaggregated deployment spec launches (its settings
// split into parts: engine.Settings.Parts), each part's configuration as
// Config builds it on the part's GPUs.
func (v *Virtual) Deployment(spec launcher.Spec) (sim.Deployment, error) {
	parts := spec.Settings.Parts()
	if parts == nil {
		return sim.Deployment{}, fmt.Errorf("not a disaggregated configuration")
	}
	d := sim.Deployment{Link: v.KVLink}
	if l, ok := spec.Settings.String("sim_kv_link"); ok && l != "" {
		d.Link = l
	}
	for _, p := range parts {
		ps := spec
		ps.Settings, ps.GPUs = p.Settings, make([]int, p.GPUs())
		cfg, err := v.Config(ps)
		if err != nil {
			return d, fmt.Errorf("%s: %w", p.Name(), err)
		}
		if p.Role == engine.Prefill {
			d.Prefill = cfg
			d.PrefillReplicas++
		} else {
			d.Decode = cfg
			d.DecodeReplicas++
		}
	}
	return d, nil
}

// VirtualInstance is one simulated engine (or disaggregated deployment)
// of the Virtual launcher.
type VirtualInstance struct {
	eng    engineTransport
	failed string // the start-up failure's log, when the engine did not start
}

// Endpoint has no URL: nothing listens.
func (in *VirtualInstance) Endpoint() string { return "virtual://sim" }

// Ready returns at once, or the start-up failure as an exit.
func (in *VirtualInstance) Ready(context.Context) error {
	if in.failed != "" {
		return &launcher.ExitError{Exit: engine.Exit{Code: 1}}
	}
	return nil
}

// Logs is the start-up failure's message, if any.
func (in *VirtualInstance) Logs() string { return in.failed }

// Stop does nothing: the engine is memory.
func (in *VirtualInstance) Stop(context.Context) error { return nil }

// Transport is the engine on its virtual clock, for bench.Config.Transport.
func (in *VirtualInstance) Transport() measure.Transport { return in.eng }

func init() {
	launcher.Register(launcher.Kind{
		Name: "virtual",
		Doc:  "the simulated engine in virtual time, in this process: deterministic, milliseconds per trial (what-if studies, the quick start)",
		Keys: CalibrationKeys,
		Decode: func(d *yamlpos.Decoder, keys map[string]*yaml.Node, c launcher.Common) launcher.Launcher {
			v := &Virtual{GPU: c.GPU, ModelConfig: c.ModelConfig}
			v.Calibration, v.ForceCalibration = DecodeCalibration(d, keys)
			return v
		},
	})
}

// Preflight checks that the simulator knows the model and the GPU, and
// that the calibration profile, if any, is for them.
func (v *Virtual) Preflight(_ context.Context, spec launcher.Spec) error {
	if err := simenv.Preflight(spec.Model, v.ModelConfig, v.GPU); err != nil {
		return err
	}
	return CalibrationPreflight(v.Calibration, v.ForceCalibration, v.GPU, spec.Engine)
}

// CalibrationKeys are the keys of the simulated engine's launchers that
// take a calibration profile.
var CalibrationKeys = []launcher.Key{
	{Name: "calibration", Doc: "a calibration profile (servetune calibrate -o FILE) for the simulator's constants; refused for another GPU or engine"},
	{Name: "force_calibration", Doc: "use the calibration profile even on another GPU or engine (default false)"},
}

// DecodeCalibration reads calibration and force_calibration.
func DecodeCalibration(d *yamlpos.Decoder, keys map[string]*yaml.Node) (path string, force bool) {
	if x := keys["calibration"]; x != nil {
		path = d.Str(x, "launcher.calibration")
	}
	if x := keys["force_calibration"]; x != nil {
		force = d.Bool(x, "launcher.force_calibration")
	}
	return path, force
}

// CalibrationPreflight checks that a calibration profile reads and was
// measured on gpu ("" = the simulator's default) and engine e, unless force.
func CalibrationPreflight(path string, force bool, gpu string, e engine.Engine) error {
	if path == "" {
		return nil
	}
	p, err := sim.LoadProfile(path)
	if err != nil {
		return err
	}
	if gpu == "" {
		gpu = sim.DefaultGPU
	}
	if err := p.Check(gpu, e, force); err != nil {
		return fmt.Errorf("calibration %s: %w", path, err)
	}
	return nil
}

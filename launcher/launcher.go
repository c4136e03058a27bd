package launcher

import (
	"context"
	"errors"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Spec says what to launch for one trial.
type Spec struct {
	Engine   engine.Engine
	Model    string          // model id as the engine takes it
	Settings engine.Settings // launch settings by neutral name; the launcher renders them
	Extra    []string        // flags appended verbatim after the rendered ones (a space's extra_args)
	Env      []string        // KEY=VALUE for the engine; values may be secrets: never log or store them
	GPUs     []int           // GPU indices assigned to this trial
	Study    string          // labels for cleanup
	Trial    int
	// Owner is the run that launches it (internal/proc's host/pid/start/run),
	// so a reaper spares the engines of runs that are still alive.
	Owner string
	Port  int // 0 = pick a free port
	// Part names the engine within a trial of several (Disaggregated's
	// "prefill 0", "decode 1"); "" for a trial of one engine. A launcher
	// puts it in the names it shows (a Slurm job's, a container's).
	Part string
}

// Args renders the spec's settings as the engine's flags, then Extra.
func (s Spec) Args() ([]string, error) {
	if len(s.Settings) == 0 {
		return append([]string(nil), s.Extra...), nil
	}
	args, err := engine.Render(s.Engine, s.Settings)
	if err != nil {
		return nil, err
	}
	return append(args, s.Extra...), nil
}

// Instance is one running engine.
type Instance interface {
	// Endpoint is the base URL, e.g. http://127.0.0.1:8000.
	Endpoint() string
	// Ready blocks until the engine is healthy, it exits (an error
	// wrapping ErrExited), or ctx ends.
	Ready(ctx context.Context) error
	// Logs returns the tail of the engine's stdout and stderr.
	Logs() string
	// Stop stops the engine and releases everything it held.
	Stop(ctx context.Context) error
}

// Exiter is implemented by instances that can report an early exit, so a
// trial tells a crash from a slow server.
type Exiter interface {
	// Exited is closed when the engine process or container has ended.
	Exited() <-chan struct{}
	// Exit says how it ended, once Exited is closed.
	Exit() engine.Exit
}

// Launcher starts engines.
type Launcher interface {
	Launch(ctx context.Context, spec Spec) (Instance, error)
	// Capabilities says what else the launcher can do (GPU placement,
	// reaping, telemetry, time scale, preflight, ...). It is read when
	// needed, so it may follow the launcher's fields.
	Capabilities() Capabilities
}

// ErrExited is wrapped by Ready's error when the engine ended before it was
// ready.
var ErrExited = errors.New("engine exited before it was ready")

// DefaultStopTimeout is how long Stop waits for a graceful exit before killing.
const DefaultStopTimeout = 10 * time.Second

// Capabilities is what a launcher can do beside Launch, in one value: the
// one place a reader learns them, and what every caller reads (no
// capability is asked by type assertion: internal/archtest's rule
// capabilities-one-value). Each field's zero value is the default of a
// launcher without that capability.
// launcher/kinds' TestKindCapabilities lists every kind's.
type Capabilities struct {
	// GPUs and HostOf place trials on hosts: HostOf groups the study's
	// GPUs (GPUs) by host, and a trial runs on the GPUs of one host.
	// HostOf nil: launcher.gpus, all on one host.
	GPUs   []int
	HostOf func(gpu int) int
	// Reap removes what earlier runs of a study left running (after a
	// crash or a SIGKILL): containers, processes, jobs. keep spares the
	// ones it returns true for (a live run's). nil: nothing to reap.
	Reap func(ctx context.Context, study string, keep func(Reaped) bool) ([]Reaped, error)
	// LocalGPUs: trial GPU numbers are this machine's NVML indices, so the
	// study may sample them. false: no GPU telemetry.
	LocalGPUs bool
	// TimeScale is how many times faster than real time the engine runs
	// (the simulated engine's time scale); measurements are converted
	// back. 0: real time, as 1.
	TimeScale float64
	// Preflight checks, before the first launch, what would make every
	// trial fail: a missing image, a model or GPU the simulator does not
	// know, a server that serves another model. nil: no check.
	Preflight func(ctx context.Context, spec Spec) error
	// Deterministic: a trial's result depends only on its settings and
	// seed, not on when it runs (the virtual clock), so the study finishes
	// trials and tells the sampler in trial order and a seeded study with
	// parallel trials is the same run to run. false: results are told as
	// they come, no GPU waits on another trial.
	Deterministic bool
	// FixedSettings: the launcher cannot change an engine's settings (a
	// server someone else runs), so the space must fix every value.
	// false: settings are applied.
	FixedSettings bool
	// Disaggregates: the launcher runs a disaggregated configuration
	// itself (the virtual clock's one deployment), told the spec's KV
	// link ("" keeps its own) before the first trial. nil: a study runs
	// the parts and a router in front (launcher.Disaggregated).
	Disaggregates func(kvLink string)
}

// Reaped is one leftover a launcher's Capabilities.Reap removed.
type Reaped struct {
	Kind  string // the launcher kind, e.g. docker
	ID    string // the container id, process id or job id
	Name  string
	Host  string // where it ran ("" = this machine or the default daemon)
	Study string
	Trial int
	Owner string // the run that launched it; "" when unknown (older servetune)
	State string // running, exited, created, ...
}

package launcher

import (
	"context"
	"errors"
	"time"
)

// Spec says what to launch for one trial.
type Spec struct {
	Engine string   // vllm | sglang | custom
	Model  string   // model id as the engine takes it
	Args   []string // rendered engine flags (space.Render), without the model
	Env    []string // KEY=VALUE for the engine; values may be secrets: never log or store them
	GPUs   []int    // GPU indices assigned to this trial
	Study  string   // labels for cleanup
	Trial  int
	Port   int // 0 = pick a free port
}

// Instance is one running engine.
type Instance interface {
	// Endpoint is the base URL, e.g. http://127.0.0.1:8000.
	Endpoint() string
	// Ready blocks until GET /health answers 200, the engine exits
	// (ErrExited), or ctx ends.
	Ready(ctx context.Context) error
	// Logs returns the tail of the engine's stdout and stderr.
	Logs() string
	// Stop stops the engine and releases everything it held.
	Stop(ctx context.Context) error
}

// Exiter is implemented by instances that can report an early exit, so a trial
// classifies a crash under load.
type Exiter interface {
	// Exited is closed when the engine process or container has ended.
	Exited() <-chan struct{}
	// ExitCode is the exit status once Exited is closed.
	ExitCode() int
}

// Launcher starts engines.
type Launcher interface {
	Launch(ctx context.Context, spec Spec) (Instance, error)
}

// ErrExited is returned by Ready when the engine ended before it was ready.
var ErrExited = errors.New("engine exited before it was ready")

// DefaultStopTimeout is how long Stop waits for a graceful exit before killing.
const DefaultStopTimeout = 10 * time.Second

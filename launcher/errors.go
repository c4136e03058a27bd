package launcher

import (
	"errors"
	"fmt"

	"github.com/servetune/servetune/internal/serving/engine"
)

// ExitError reports an engine that ended on its own. errors.Is(err, ErrExited)
// holds for it, so callers that only care about "it died" need not know the type.
type ExitError struct {
	engine.Exit
}

func (e *ExitError) Error() string {
	if e.OOMKilled {
		return fmt.Sprintf("%v (exit code %d, OOM-killed)", ErrExited, e.Code)
	}
	return fmt.Sprintf("%v (exit code %d)", ErrExited, e.Code)
}

// Unwrap makes errors.Is(err, ErrExited) true.
func (e *ExitError) Unwrap() error { return ErrExited }

// ErrBadSpec is wrapped by errors about a launcher's options or a Spec that
// cannot be launched as given.
var ErrBadSpec = errors.New("bad launch spec")

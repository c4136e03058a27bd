package space

import "errors"

// Render returns the engine's flags for s, in a fixed order.
func Render(engine Engine, s Settings) ([]string, error) {
	return nil, errors.New("space.Render: not implemented")
}

// ServeCommand returns the full argv that starts engine serving model with
// settings s and extra flags appended. Settings that fail to render are
// reported by Render; ServeCommand skips them.
func ServeCommand(engine Engine, model string, s Settings, extra []string) []string {
	return nil
}

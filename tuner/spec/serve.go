package spec

import (
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/recommend"
)

// ServeArgv is the command that serves point p of the study in format
// "vllm", "sglang" or "docker" (the study's engine in its image). The
// space's extra flags are the spec engine's, so another engine's command
// leaves them out.
func (sp *Spec) ServeArgv(p recommend.Point, format string) []string {
	// It is printed, exported and stored in reports: secret flags' values
	// (an API key in extra_args) are redacted.
	return redact.Args(sp.serveArgv(p, format))
}

func (sp *Spec) serveArgv(p recommend.Point, format string) []string {
	extra := func(e engine.Engine) []string {
		if sp.Engine == e {
			return sp.Space.Extra
		}
		return nil
	}
	switch format {
	case "sglang":
		return engine.ServeCommand(engine.SGLang, sp.Model, p.Settings, extra(engine.SGLang))
	case "docker":
		return engine.DockerRun(sp.Engine, sp.Image(), sp.Model, p.Settings, sp.Space.Extra, p.GPUs)
	}
	return engine.ServeCommand(engine.VLLM, sp.Model, p.Settings, extra(engine.VLLM))
}

// Image is the container image the study's launcher runs, "" when it
// runs none (the process, sim, endpoint and virtual kinds).
func (sp *Spec) Image() string {
	if d, ok := sp.Launcher.Launcher.(interface{ Image() string }); ok {
		return d.Image()
	}
	return ""
}

// Terms are what ranking the study's measurements reads of the spec.
func (sp *Spec) Terms() recommend.Terms {
	return recommend.Terms{Objectives: sp.Objectives, SLO: sp.SLO, Price: sp.Hardware.PricePerGPUHour, Space: sp.Space}
}

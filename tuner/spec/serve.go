package spec

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/tuner/recommend"
)

// ServeArgv is the command that serves point p of the study in format
// "vllm", "sglang" or "docker" (the study's engine in its image, or the
// newest release's: engine.DefaultImage). The space's extra flags are the
// spec engine's, so another engine's command leaves them out.
func (spec *Spec) ServeArgv(p recommend.Point, format string) []string {
	return spec.ServeArgvFor(p, format, engine.Version{})
}

// ServeArgvFor is ServeArgv for release v of the engine: a docker command
// of a study whose launcher names no image runs v's (engine.Image); the
// zero v is the newest release.
func (spec *Spec) ServeArgvFor(p recommend.Point, format string, v engine.Version) []string {
	// It is printed, exported and stored in reports: secret flags' values
	// (an API key in extra_args) are redacted.
	return redact.Args(spec.serveArgv(p, format, v))
}

func (spec *Spec) serveArgv(p recommend.Point, format string, v engine.Version) []string {
	extra := func(e engine.Engine) []string {
		if spec.Engine == e {
			return spec.Space.Extra
		}
		return nil
	}
	switch format {
	case "sglang":
		return engine.ServeCommand(engine.SGLang, spec.Model, p.Settings, extra(engine.SGLang))
	case "docker":
		image := spec.Image()
		if image == "" && v != (engine.Version{}) {
			image = engine.Image(spec.Engine, v)
		}
		return engine.DockerRun(spec.Engine, image, spec.Model, p.Settings, spec.Space.Extra, p.GPUs)
	}
	return engine.ServeCommand(engine.VLLM, spec.Model, p.Settings, extra(engine.VLLM))
}

// Image is the container image the study's launcher runs, "" when it
// runs none (the process, sim, endpoint and virtual kinds).
func (spec *Spec) Image() string { return spec.Launcher.Image }

// Terms are what ranking the study's measurements reads of the spec.
func (spec *Spec) Terms() recommend.Terms {
	return recommend.Terms{Objectives: spec.Objectives, Objective: spec.Tuner.Objective, SLO: spec.SLO, Price: spec.Hardware.PricePerGPUHour, Space: spec.Space}
}

// PartCommand is one process of a disaggregated deployment.
type PartCommand struct {
	Name string      // "prefill 0", "decode 0", "router"
	Role engine.Role // "" for the router
	GPUs []int       // the GPUs it is given on the host (CUDA_VISIBLE_DEVICES); none for the router
	// Env is the environment it needs beside CUDA_VISIBLE_DEVICES: a vLLM
	// NixlConnector engine's own side-channel port (NixlSideChannelBase),
	// as vLLM's same-host disaggregation guide sets one per instance.
	Env  []string
	Port int
	Argv []string // secret flags' values redacted
	// The router's alone: About says which router it is and where it
	// comes from, Install is the line that installs its command where the
	// engines run (both "" for the study's own router), and Measured is
	// the router the study measured when the recipe starts another
	// (servetune's stand-in), filled as Argv is.
	About, Install string
	Measured       []string
}

// Router ports on one host: the router where clients send, its engines
// from PartPortBase up.
const (
	RouterPort   = engine.ContainerPort
	PartPortBase = 8100
	// NixlSideChannelBase is part i's VLLM_NIXL_SIDE_CHANNEL_PORT less
	// 100 i: NixlConnector engines on one host each need their own
	// (vLLM's default is one port for every instance), and a hundred
	// apart leaves room for an engine's ranks.
	NixlSideChannelBase = 5600
)

// RecipeRouter is the router a printed recipe for release v of the
// study's engine starts (v zero: the release the study's image names,
// else the newest the flag table knows). It is the study's own router
// command, unless that is servetune's stand-in (engine.IsStandInRouter),
// which no engine installation has: then it is the router the engine's
// projects package for the study's KV connector (engine.RouterFor), and
// the stand-in is what the study measured. Where they package none, the
// stand-in stays. packaged is the packaged router the recipe starts (the
// substitute, or the study's own router when it runs that router's
// program), nil for another. A study without a disaggregation section
// has no router.
func (spec *Spec) RecipeRouter(v engine.Version) (r Router, packaged *engine.PackagedRouter) {
	d := spec.Disaggregation
	if d == nil {
		return Router{}, nil
	}
	if v == (engine.Version{}) {
		v = engine.Release(spec.Engine, spec.Image())
	}
	pr, ok := engine.RouterFor(spec.Engine, v, d.KV)
	switch {
	case !ok:
		return d.Router, nil
	case engine.IsStandInRouter(d.Router.Command):
		return Router{Command: pr.Command, EachPrefill: pr.EachPrefill, EachDecode: pr.EachDecode, HealthPath: pr.HealthPath}, &pr
	case pr.Runs(d.Router.Command):
		return d.Router, &pr
	}
	return d.Router, nil
}

// PartCommands are the commands that serve disaggregated point p on one
// host (PartCommandsFor the release the study's image names).
func (spec *Spec) PartCommands(p recommend.Point) []PartCommand {
	return spec.PartCommandsFor(p, engine.Version{})
}

// PartCommandsFor are the commands that serve disaggregated point p on
// one host with release v of the study's engine: each engine on GPUs of
// its own and a port from PartPortBase, with its role's flags and
// settings, then the router on RouterPort in front of them (RecipeRouter,
// with the line that installs it). nil for an aggregated point or a study
// without a disaggregation section.
func (spec *Spec) PartCommandsFor(p recommend.Point, v engine.Version) []PartCommand {
	parts := p.Settings.Parts()
	if parts == nil || spec.Disaggregation == nil {
		return nil
	}
	d := spec.Disaggregation
	host := "127.0.0.1"
	var out []PartCommand
	urls := map[engine.Role][]string{}
	gpu := 0
	for i, part := range parts {
		port := PartPortBase + i
		argv := engine.ServeCommand(spec.Engine, spec.Model, part.Settings, append(engine.RoleArgs(spec.Engine, part.Role, d.KV), spec.Space.Extra...))
		argv = append(argv, engine.Flag(spec.Engine, "port"), strconv.Itoa(port))
		gpus := make([]int, part.GPUs())
		for j := range gpus {
			gpus[j] = gpu
			gpu++
		}
		var env []string
		if spec.Engine == engine.VLLM && strings.Contains(strings.Join(engine.RoleArgs(spec.Engine, part.Role, d.KV), " "), "NixlConnector") {
			env = []string{"VLLM_NIXL_SIDE_CHANNEL_PORT=" + strconv.Itoa(NixlSideChannelBase+100*i)}
		}
		out = append(out, PartCommand{Name: part.Name(), Role: part.Role, GPUs: gpus, Env: env, Port: port, Argv: redact.Args(argv)})
		urls[part.Role] = append(urls[part.Role], "http://"+net.JoinHostPort(host, strconv.Itoa(port)))
	}
	fill := func(rt Router) []string {
		// The URLs above always parse: RouterArgv has nothing to refuse.
		argv, _ := engine.RouterArgv(rt.Command, rt.EachPrefill, rt.EachDecode, urls, "servetune")
		r := strings.NewReplacer("{host}", host, "{port}", strconv.Itoa(RouterPort), "{model}", spec.Model)
		for i, a := range argv {
			argv[i] = r.Replace(a)
		}
		return redact.Args(argv)
	}
	rt, packaged := spec.RecipeRouter(v)
	router := PartCommand{Name: "router", Port: RouterPort, Argv: fill(rt)}
	standIn := engine.IsStandInRouter(d.Router.Command)
	switch {
	case packaged != nil:
		where := "not in " + spec.Engine.Title() + "'s image; the image " + packaged.Image + " has it"
		if packaged.InEngineImage {
			where = "also in " + spec.Engine.Title() + "'s image, " + packaged.Image
		}
		router.About = fmt.Sprintf("the router, %s: %s's, a package of its own (%s)", packaged.Name, spec.Engine.Title(), where)
		router.Install = packaged.Install()
		if standIn {
			router.Measured = fill(d.Router)
		}
	case standIn:
		router.About = fmt.Sprintf("the router, servetune's stand-in, as measured: %s's projects package none for this KV connector; `make install` in servetune's source puts servetune on PATH", spec.Engine.Title())
	}
	return append(out, router)
}

// Script is the commands as lines of a shell script: the engines in the
// background, each on its GPUs, then the router, headed by comments that
// say which it is and the line that installs it, and followed by the
// stand-in the study measured in its place, as a comment.
func Script(cmds []PartCommand) []string {
	var out []string
	for _, c := range cmds {
		if c.About != "" {
			out = append(out, "# "+c.About)
		}
		if c.Install != "" {
			out = append(out, "# "+c.Install)
		}
		line := engine.ShellJoin(c.Argv)
		if c.Role != "" {
			ids := make([]string, len(c.GPUs))
			for i, g := range c.GPUs {
				ids[i] = strconv.Itoa(g)
			}
			env := append([]string{"CUDA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}, c.Env...)
			line = strings.Join(env, " ") + " " + line + " &"
		}
		out = append(out, line)
		if len(c.Measured) > 0 {
			out = append(out, "# the study measured servetune's stand-in for it (`make install` in servetune's source puts servetune on PATH):",
				"#   "+engine.ShellJoin(c.Measured))
		}
	}
	return out
}

package tuner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/bench"
	"github.com/servetune/servetune/catalog"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/space"
)

// Launcher kinds a spec may name.
const (
	LauncherDocker   = "docker"
	LauncherProcess  = "process"
	LauncherEndpoint = "endpoint"
	LauncherSim      = "sim"
)

// Spec is a parsed and validated study spec (DESIGN.md, "The study spec").
type Spec struct {
	File       string // path the spec was read from, for messages
	Text       string // the YAML as given, stored with the study
	Name       string
	Model      string
	Engine     space.Engine
	Launcher   LauncherSpec
	Hardware   Hardware
	Space      space.Space
	Workload   Workload
	SLO        SLO
	Objectives []Objective // for the Pareto front
	Tuner      TunerSpec
}

// LauncherSpec says how trials start engines.
type LauncherSpec struct {
	Kind         string
	Image        string        // docker
	Command      []string      // process: argv template (see launcher.Process)
	BaseURL      string        // endpoint
	GPUs         []int         // GPU indices the study may use; trials get disjoint subsets
	ReadyTimeout time.Duration // launch to /health 200
	TimeScale    float64       // sim (or the servetune-sim image): faster than real time by this factor
	LoadTime     time.Duration // sim (or the servetune-sim image): simulated start-up time
	Env          []string      // names of environment variables passed to the engine (values never stored)

	// DockerHost is the Docker daemon of a one-host docker study
	// (unix://, tcp://, ssh://); "" = DOCKER_HOST, else the local socket.
	DockerHost string
	// Address is where this machine reaches the Docker host's published
	// ports; "" = 127.0.0.1 (see launcher.Docker.Address).
	Address string
	// Hosts, when set, spreads a docker study over several Docker hosts,
	// each with its own GPUs; a trial runs on one host. GPUs then holds
	// every host's GPUs numbered host×HostGPUStride+index (host 1's GPU 0
	// is 100), the numbers trials are stored with.
	Hosts []DockerHost
}

// DockerHost is one entry of launcher.hosts.
type DockerHost struct {
	DockerHost string // the daemon, as DOCKER_HOST takes it; "" = DOCKER_HOST or the local socket
	Address    string // where this machine reaches its published ports; "" = 127.0.0.1
	GPUs       []int  // GPU indices on that host
}

// HostGPUStride separates the GPU numbers of the hosts of a multi-host
// study: host h's GPU g is h×HostGPUStride+g.
const HostGPUStride = 100

// HostOf returns the host index and local GPU index of a study GPU number.
func (l LauncherSpec) HostOf(gpu int) (host, local int) {
	if len(l.Hosts) == 0 {
		return 0, gpu
	}
	return gpu / HostGPUStride, gpu % HostGPUStride
}

// DockerHosts returns the Docker hosts of a docker study, one entry per
// host (a one-host study gives one entry from DockerHost and Address).
func (l LauncherSpec) DockerHosts() []DockerHost {
	if l.Kind != LauncherDocker {
		return nil
	}
	if len(l.Hosts) > 0 {
		return l.Hosts
	}
	return []DockerHost{{DockerHost: l.DockerHost, Address: l.Address, GPUs: l.GPUs}}
}

// Remote reports whether a trial's engine may run on another machine than
// this one, where local NVML telemetry would read the wrong GPUs.
func (l LauncherSpec) Remote() bool {
	for _, h := range l.DockerHosts() {
		if h.Address != "" && !launcher.IsLoopback(h.Address) || remoteDaemon(h.DockerHost) {
			return true
		}
	}
	return false
}

// remoteDaemon reports whether a DOCKER_HOST value names another machine.
func remoteDaemon(host string) bool {
	if host == "" || strings.HasPrefix(host, "unix://") || strings.HasPrefix(host, "npipe://") {
		return false
	}
	u, err := url.Parse(host)
	return err != nil || !launcher.IsLoopback(u.Hostname())
}

// SimImage reports whether a docker launcher runs the simulated engine's
// image (make sim-image), which takes the sim's settings from the
// environment and needs no GPU.
func (l LauncherSpec) SimImage() bool {
	return l.Kind == LauncherDocker && strings.HasPrefix(l.Image, "servetune-sim")
}

// Hardware describes the GPUs, for the simulator and for costs.
type Hardware struct {
	GPU             string
	PricePerGPUHour float64
}

// Workload is what every trial measures.
type Workload struct {
	Dataset          bench.DatasetSpec
	Levels           []bench.Load // measured in order; empty with Capacity
	Capacity         bool         // search the highest concurrency meeting the SLOs
	MaxConcurrency   int          // capacity search upper bound
	RequestsPerLevel int
	Warmup           int
	Timeout          time.Duration // per request
}

// TunerSpec configures the search.
type TunerSpec struct {
	Sampler   string
	Trials    int
	Seed      int64
	Objective Objective // the scalar the sampler optimises
	Parallel  int       // most trials at once; 0 = as many as the GPUs allow
	Precheck  bool      // reject configurations the memory model says do not fit, without launching
}

// ParseSpecFile reads and parses a study spec file.
func ParseSpecFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read study spec: %w", err)
	}
	return ParseSpec(data, path)
}

// ParseSpec parses and validates a study spec. Every error is a *space.Error
// naming the file, line and problem.
func ParseSpec(data []byte, file string) (*Spec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, &space.Error{File: file, Line: yamlErrLine(err), Err: fmt.Errorf("invalid YAML: %s", yamlErrMsg(err))}
	}
	if len(doc.Content) == 0 {
		return nil, &space.Error{File: file, Line: 1, Err: errors.New("empty study spec")}
	}
	p := &specParser{file: file}
	sp := p.parse(doc.Content[0])
	if p.err != nil {
		return nil, p.err
	}
	sp.File = file
	sp.Text = string(data)
	return sp, nil
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
	file string
	err  error
}

func (p *specParser) fail(n *yaml.Node, field, format string, a ...any) {
	if p.err != nil {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.err = &space.Error{File: p.file, Line: line, Column: colOf(n), Field: field, Err: fmt.Errorf(format, a...)}
}

func colOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Column
}

// fields returns a mapping's keys and values, rejecting keys not in allowed.
func (p *specParser) fields(n *yaml.Node, field string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, "want a mapping")
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			p.fail(k, join(field, k.Value), "unknown key (want one of %s)", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k, join(field, k.Value), "duplicate key")
		}
		out[k.Value] = v
	}
	return out
}

// keyNode returns the key node of name in mapping n, for error positions.
func keyNode(n *yaml.Node, name string) *yaml.Node {
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				return n.Content[i]
			}
		}
	}
	return n
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (p *specParser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.fail(n, field, "want a string")
		return ""
	}
	return n.Value
}

func (p *specParser) integer(n *yaml.Node, field string, min int) int {
	var v int
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.fail(n, field, "want an integer, got %q", n.Value)
		return 0
	}
	if v < min {
		p.fail(n, field, "%d is below the minimum %d", v, min)
	}
	return v
}

func (p *specParser) number(n *yaml.Node, field string) float64 {
	var v float64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.fail(n, field, "want a number, got %q", n.Value)
		return 0
	}
	return v
}

func (p *specParser) positive(n *yaml.Node, field string) float64 {
	v := p.number(n, field)
	if p.err == nil && v <= 0 {
		p.fail(n, field, "%g must be > 0", v)
	}
	return v
}

func (p *specParser) boolean(n *yaml.Node, field string) bool {
	var v bool
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
		p.fail(n, field, "want true or false, got %q", n.Value)
	}
	return v
}

func (p *specParser) duration(n *yaml.Node, field string) time.Duration {
	s := p.str(n, field)
	d, err := time.ParseDuration(s)
	if p.err == nil && (err != nil || d <= 0) {
		p.fail(n, field, "want a positive duration like 90s or 20m, got %q", s)
	}
	return d
}

func (p *specParser) seq(n *yaml.Node, field string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "want a list")
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(n, field, "empty list")
	}
	return n.Content
}

func (p *specParser) parse(root *yaml.Node) *Spec {
	top := p.fields(root, "", "name", "model", "engine", "launcher", "hardware", "space",
		"workload", "slo", "objectives", "tuner")
	if p.err != nil {
		return nil
	}
	for _, req := range []string{"name", "model", "engine", "launcher", "space", "workload"} {
		if top[req] == nil {
			p.fail(root, req, "missing (required)")
			return nil
		}
	}
	sp := &Spec{}
	sp.Name = p.str(top["name"], "name")
	if p.err == nil && !validName(sp.Name) {
		p.fail(top["name"], "name", "%q: use letters, digits, '-', '_' and '.'", sp.Name)
	}
	sp.Model = p.str(top["model"], "model")
	sp.Engine = space.Engine(p.str(top["engine"], "engine"))
	if p.err == nil && sp.Engine != space.VLLM && sp.Engine != space.SGLang {
		p.fail(top["engine"], "engine", "%q: want vllm or sglang", sp.Engine)
	}
	if p.err != nil {
		return nil
	}
	sp.Launcher = p.launcher(top["launcher"])
	if n := top["hardware"]; n != nil {
		sp.Hardware = p.hardware(n)
	}
	if p.err != nil {
		return nil
	}
	spc, err := space.Parse(top["space"], p.file)
	if err != nil {
		var se *space.Error
		if !errors.As(err, &se) {
			err = &space.Error{File: p.file, Line: top["space"].Line, Field: "space", Err: err}
		}
		p.err = err
		return nil
	}
	sp.Space = spc
	sp.Workload = p.workload(top["workload"])
	if n := top["slo"]; n != nil {
		sp.SLO = p.slo(n)
	}
	sp.Objectives = []Objective{{"output_throughput_per_gpu", true}, {"tokens_per_user", true}}
	if n := top["objectives"]; n != nil {
		sp.Objectives = nil
		for _, o := range p.seq(n, "objectives") {
			obj, err := ParseObjective(p.str(o, "objectives"))
			if p.err == nil && err != nil {
				p.fail(o, "objectives", "%v", err)
			}
			sp.Objectives = append(sp.Objectives, obj)
		}
	}
	sp.Tuner = TunerSpec{Sampler: SamplerTPE, Trials: 20, Seed: 1, Objective: Objective{"goodput_per_gpu", true}, Precheck: true}
	if n := top["tuner"]; n != nil {
		p.tuner(n, &sp.Tuner)
	}
	if p.err != nil {
		return nil
	}
	p.check(sp, top)
	if p.err != nil {
		return nil
	}
	return sp
}

func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (p *specParser) launcher(n *yaml.Node) LauncherSpec {
	f := p.fields(n, "launcher", "kind", "image", "command", "base_url", "gpus", "ready_timeout", "time_scale", "load_time", "env",
		"docker_host", "address", "hosts")
	var l LauncherSpec
	if p.err != nil {
		return l
	}
	if f["kind"] == nil {
		p.fail(n, "launcher.kind", "missing (docker, process, endpoint or sim)")
		return l
	}
	l.Kind = p.str(f["kind"], "launcher.kind")
	switch l.Kind {
	case LauncherDocker, LauncherProcess, LauncherEndpoint, LauncherSim:
	default:
		p.fail(f["kind"], "launcher.kind", "%q: want docker, process, endpoint or sim", l.Kind)
	}
	only := func(key, kind string) {
		if f[key] != nil && l.Kind != kind {
			p.fail(f[key], "launcher."+key, "only for launcher kind %s", kind)
		}
	}
	only("image", LauncherDocker)
	only("docker_host", LauncherDocker)
	only("address", LauncherDocker)
	only("hosts", LauncherDocker)
	if f["hosts"] != nil {
		for _, key := range []string{"docker_host", "address", "gpus"} {
			if f[key] != nil {
				p.fail(f[key], "launcher."+key, "give it per host under launcher.hosts")
			}
		}
	}
	only("command", LauncherProcess)
	only("base_url", LauncherEndpoint)
	for _, key := range []string{"time_scale", "load_time"} {
		// The servetune-sim image is the simulated engine in a container.
		if f[key] != nil && l.Kind != LauncherSim && l.Kind != LauncherDocker {
			p.fail(f[key], "launcher."+key, "only for launcher kind sim (or docker with the servetune-sim image)")
		}
	}
	if x := f["image"]; x != nil {
		l.Image = p.str(x, "launcher.image")
	}
	if l.Kind == LauncherDocker && !l.SimImage() {
		for _, key := range []string{"time_scale", "load_time"} {
			if f[key] != nil {
				p.fail(f[key], "launcher."+key, "only for the simulated engine (launcher kind sim, or the servetune-sim image)")
			}
		}
	}
	if x := f["command"]; x != nil {
		for _, c := range p.seq(x, "launcher.command") {
			l.Command = append(l.Command, p.str(c, "launcher.command"))
		}
	}
	if x := f["base_url"]; x != nil {
		l.BaseURL = p.str(x, "launcher.base_url")
		if p.err == nil && !strings.HasPrefix(l.BaseURL, "http://") && !strings.HasPrefix(l.BaseURL, "https://") {
			p.fail(x, "launcher.base_url", "%q: want an http:// or https:// URL", l.BaseURL)
		}
	}
	if p.err != nil {
		return l
	}
	switch {
	case l.Kind == LauncherDocker && l.Image == "":
		p.fail(n, "launcher.image", "missing (the docker launcher needs an image)")
	case l.Kind == LauncherProcess && len(l.Command) == 0:
		p.fail(n, "launcher.command", "missing (the process launcher needs a command)")
	case l.Kind == LauncherEndpoint && l.BaseURL == "":
		p.fail(n, "launcher.base_url", "missing (the endpoint launcher needs a base_url)")
	}
	if x := f["gpus"]; x != nil {
		seen := map[int]bool{}
		for _, g := range p.seq(x, "launcher.gpus") {
			id := p.integer(g, "launcher.gpus", 0)
			if p.err == nil && seen[id] {
				p.fail(g, "launcher.gpus", "GPU %d listed twice", id)
			}
			seen[id] = true
			l.GPUs = append(l.GPUs, id)
		}
	}
	if x := f["docker_host"]; x != nil {
		l.DockerHost = p.dockerHost(x, "launcher.docker_host")
	}
	if x := f["address"]; x != nil {
		l.Address = p.str(x, "launcher.address")
	}
	if x := f["hosts"]; x != nil {
		p.hosts(x, &l)
	} else if p.err == nil && remoteDaemon(l.DockerHost) && l.Address == "" {
		p.fail(f["docker_host"], "launcher.address", "missing for the remote Docker host %s: give the address this machine reaches it at, or 127.0.0.1 with an ssh tunnel (see README, Docker and remote GPU hosts)", l.DockerHost)
	}
	l.ReadyTimeout = 20 * time.Minute
	if x := f["ready_timeout"]; x != nil {
		l.ReadyTimeout = p.duration(x, "launcher.ready_timeout")
	}
	l.TimeScale = 1
	if x := f["time_scale"]; x != nil {
		l.TimeScale = p.positive(x, "launcher.time_scale")
	}
	if x := f["load_time"]; x != nil {
		l.LoadTime = p.duration(x, "launcher.load_time")
	}
	if x := f["env"]; x != nil {
		for _, e := range p.seq(x, "launcher.env") {
			name := p.str(e, "launcher.env")
			if p.err == nil && (strings.Contains(name, "=") || name == "") {
				// Values would land in the stored spec: only names are allowed.
				p.fail(e, "launcher.env", "%q: list variable names only; values are read from the environment", name)
			}
			l.Env = append(l.Env, name)
		}
	}
	return l
}

// dockerHost accepts a DOCKER_HOST value: unix://, tcp:// or ssh://.
func (p *specParser) dockerHost(n *yaml.Node, field string) string {
	h := p.str(n, field)
	if p.err != nil {
		return h
	}
	u, err := url.Parse(h)
	switch {
	case err != nil:
		p.fail(n, field, "%q: not a URL", h)
	case u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh":
		p.fail(n, field, "%q: want unix://, tcp:// or ssh://", h)
	case u.Scheme != "unix" && u.Hostname() == "":
		p.fail(n, field, "%q: no host name", h)
	case u.User != nil && func() bool { _, ok := u.User.Password(); return ok }():
		// It would be stored with the spec.
		p.fail(n, field, "passwords in docker_host are not accepted: use ssh keys or an agent")
	}
	return h
}

// hosts parses launcher.hosts and numbers every host's GPUs into l.GPUs.
func (p *specParser) hosts(n *yaml.Node, l *LauncherSpec) {
	for i, hn := range p.seq(n, "launcher.hosts") {
		field := fmt.Sprintf("launcher.hosts[%d]", i)
		f := p.fields(hn, field, "docker_host", "address", "gpus")
		if p.err != nil {
			return
		}
		var h DockerHost
		if f["docker_host"] == nil {
			p.fail(hn, field+".docker_host", "missing (required)")
			return
		}
		h.DockerHost = p.dockerHost(f["docker_host"], field+".docker_host")
		if x := f["address"]; x != nil {
			h.Address = p.str(x, field+".address")
		}
		if p.err == nil && remoteDaemon(h.DockerHost) && h.Address == "" {
			p.fail(f["docker_host"], field+".address", "missing for the remote Docker host %s: give the address this machine reaches it at, or 127.0.0.1 with an ssh tunnel (see README, Docker and remote GPU hosts)", h.DockerHost)
			return
		}
		if f["gpus"] == nil {
			p.fail(hn, field+".gpus", "missing (each host lists its GPUs; one trial at a time per listed GPU set)")
			return
		}
		seen := map[int]bool{}
		for _, g := range p.seq(f["gpus"], field+".gpus") {
			id := p.integer(g, field+".gpus", 0)
			if p.err == nil && id >= HostGPUStride {
				p.fail(g, field+".gpus", "GPU %d: at most %d GPUs per host", id, HostGPUStride)
			}
			if p.err == nil && seen[id] {
				p.fail(g, field+".gpus", "GPU %d listed twice", id)
			}
			seen[id] = true
			h.GPUs = append(h.GPUs, id)
			l.GPUs = append(l.GPUs, i*HostGPUStride+id)
		}
		l.Hosts = append(l.Hosts, h)
	}
}

func (p *specParser) hardware(n *yaml.Node) Hardware {
	f := p.fields(n, "hardware", "gpu", "price_per_gpu_hour")
	var h Hardware
	if x := f["gpu"]; x != nil {
		h.GPU = p.str(x, "hardware.gpu")
	}
	if x := f["price_per_gpu_hour"]; x != nil {
		h.PricePerGPUHour = p.positive(x, "hardware.price_per_gpu_hour")
	} else if g, err := catalog.LookupGPU(h.GPU); err == nil && h.GPU != "" {
		// The catalog's dated on-demand price, so cost objectives work
		// without one; a spec's own price always wins.
		h.PricePerGPUHour = g.Price.PerGPUHour
	}
	return h
}

func (p *specParser) workload(n *yaml.Node) Workload {
	f := p.fields(n, "workload", "dataset", "load", "requests_per_level", "warmup", "timeout")
	w := Workload{RequestsPerLevel: 200, Warmup: 10, Timeout: 10 * time.Minute}
	if p.err != nil {
		return w
	}
	if f["dataset"] == nil {
		p.fail(n, "workload.dataset", "missing (required)")
		return w
	}
	if f["load"] == nil {
		p.fail(n, "workload.load", "missing (required)")
		return w
	}
	w.Dataset = p.dataset(f["dataset"], "workload.dataset")
	p.load(f["load"], &w)
	if x := f["requests_per_level"]; x != nil {
		w.RequestsPerLevel = p.integer(x, "workload.requests_per_level", 1)
	}
	if x := f["warmup"]; x != nil {
		w.Warmup = p.integer(x, "workload.warmup", 0)
	}
	if x := f["timeout"]; x != nil {
		w.Timeout = p.duration(x, "workload.timeout")
	}
	return w
}

func (p *specParser) dataset(n *yaml.Node, field string) bench.DatasetSpec {
	f := p.fields(n, field, "kind", "path", "input", "output", "prefix_groups", "prefix_len", "mix")
	var d bench.DatasetSpec
	if p.err != nil {
		return d
	}
	d.Kind = bench.DatasetRandom
	if x := f["kind"]; x != nil {
		d.Kind = p.str(x, field+".kind")
	}
	if x := f["path"]; x != nil {
		d.Path = p.str(x, field+".path")
	}
	if x := f["input"]; x != nil {
		d.Input = p.dist(x, field+".input")
	}
	if x := f["output"]; x != nil {
		d.Output = p.dist(x, field+".output")
	}
	if x := f["prefix_groups"]; x != nil {
		d.PrefixGroups = p.integer(x, field+".prefix_groups", 1)
	}
	if x := f["prefix_len"]; x != nil {
		d.PrefixLen = p.integer(x, field+".prefix_len", 1)
	}
	if x := f["mix"]; x != nil {
		for _, part := range p.seq(x, field+".mix") {
			pf := p.fields(part, field+".mix", "weight", "spec")
			if p.err != nil {
				return d
			}
			if pf["weight"] == nil || pf["spec"] == nil {
				p.fail(part, field+".mix", "each part needs weight and spec")
				return d
			}
			d.Mix = append(d.Mix, bench.MixPart{
				Weight: p.positive(pf["weight"], field+".mix.weight"),
				Spec:   p.dataset(pf["spec"], field+".mix.spec"),
			})
		}
	}
	if p.err == nil {
		if err := d.Validate(); err != nil {
			p.fail(n, field, "%v", err)
		}
	}
	return d
}

// dist accepts N, the command-line form ("lognormal:median=1024,sigma=0.6"),
// or a one-key mapping: {fixed: N}, {uniform: [A, B]},
// {lognormal: {median, sigma, min, max}}, {normal: {mean, sigma, min, max}}.
func (p *specParser) dist(n *yaml.Node, field string) bench.Dist {
	if n.Kind == yaml.ScalarNode {
		d, err := bench.ParseDist(n.Value)
		if err != nil {
			p.fail(n, field, "%v", err)
		}
		return d
	}
	f := p.fields(n, field, bench.DistFixed, bench.DistUniform, bench.DistLognormal, bench.DistNormal)
	if p.err != nil {
		return bench.Dist{}
	}
	if len(f) != 1 {
		p.fail(n, field, "want exactly one of fixed, uniform, lognormal, normal")
		return bench.Dist{}
	}
	var d bench.Dist
	for kind, x := range f {
		d.Kind = kind
		sub := field + "." + kind
		switch kind {
		case bench.DistFixed:
			d.Value = p.integer(x, sub, 1)
		case bench.DistUniform:
			r := p.seq(x, sub)
			if p.err == nil && len(r) != 2 {
				p.fail(x, sub, "want [MIN, MAX]")
				return d
			}
			if p.err == nil {
				d.Min, d.Max = p.integer(r[0], sub, 1), p.integer(r[1], sub, 1)
			}
		default:
			pf := p.fields(x, sub, "median", "mean", "sigma", "min", "max")
			if v := pf["median"]; v != nil {
				d.Median = p.positive(v, sub+".median")
			}
			if v := pf["mean"]; v != nil {
				d.Mean = p.positive(v, sub+".mean")
			}
			if v := pf["sigma"]; v != nil {
				d.Sigma = p.positive(v, sub+".sigma")
			}
			if v := pf["min"]; v != nil {
				d.Min = p.integer(v, sub+".min", 1)
			}
			if v := pf["max"]; v != nil {
				d.Max = p.integer(v, sub+".max", 1)
			}
		}
	}
	if p.err == nil {
		if err := d.Validate(); err != nil {
			p.fail(n, field, "%v", err)
		}
	}
	return d
}

func (p *specParser) load(n *yaml.Node, w *Workload) {
	f := p.fields(n, "workload.load", "concurrency", "rate", "burstiness", "max_concurrency", "capacity")
	if p.err != nil {
		return
	}
	kinds := 0
	for _, k := range []string{"concurrency", "rate", "capacity"} {
		if f[k] != nil {
			kinds++
		}
	}
	if kinds != 1 {
		p.fail(n, "workload.load", "want exactly one of concurrency, rate or capacity")
		return
	}
	burst := 0.0
	if x := f["burstiness"]; x != nil {
		burst = p.positive(x, "workload.load.burstiness")
	}
	maxConc := 0
	if x := f["max_concurrency"]; x != nil {
		maxConc = p.integer(x, "workload.load.max_concurrency", 1)
	}
	switch {
	case f["concurrency"] != nil:
		if f["burstiness"] != nil {
			p.fail(f["burstiness"], "workload.load.burstiness", "only with rate")
		}
		for _, c := range p.seq(f["concurrency"], "workload.load.concurrency") {
			w.Levels = append(w.Levels, bench.Load{MaxConcurrency: p.integer(c, "workload.load.concurrency", 1)})
		}
	case f["rate"] != nil:
		for _, r := range p.seq(f["rate"], "workload.load.rate") {
			w.Levels = append(w.Levels, bench.Load{Rate: p.positive(r, "workload.load.rate"), Burstiness: burst, MaxConcurrency: maxConc})
		}
	default:
		w.Capacity = p.boolean(f["capacity"], "workload.load.capacity")
		if p.err == nil && !w.Capacity {
			p.fail(f["capacity"], "workload.load.capacity", "capacity: false measures nothing; give concurrency or rate levels")
		}
		w.MaxConcurrency = 1024
		if maxConc > 0 {
			w.MaxConcurrency = maxConc
		}
	}
}

var sloRE = regexp.MustCompile(`^(ttft|tpot|itl|e2el)_(mean|p50|p90|p95|p99)_ms$`)

func (p *specParser) slo(n *yaml.Node) SLO {
	if n.Kind != yaml.MappingNode {
		p.fail(n, "slo", "want a mapping like {ttft_p99_ms: 500}")
		return nil
	}
	var slo SLO
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !sloRE.MatchString(k.Value) {
			p.fail(k, "slo."+k.Value, "unknown limit (want METRIC_STAT_ms, METRIC ttft|tpot|itl|e2el, STAT mean|p50|p90|p95|p99)")
			return nil
		}
		slo = append(slo, Limit{Metric: strings.TrimSuffix(k.Value, "_ms"), Max: p.positive(v, "slo."+k.Value)})
	}
	return slo
}

func (p *specParser) tuner(n *yaml.Node, t *TunerSpec) {
	f := p.fields(n, "tuner", "sampler", "trials", "seed", "objective", "parallel", "precheck")
	if x := f["sampler"]; x != nil {
		t.Sampler = p.str(x, "tuner.sampler")
		switch t.Sampler {
		case SamplerTPE, SamplerRandom, SamplerCMAES, SamplerGrid:
		default:
			p.fail(x, "tuner.sampler", "%q: want tpe, random, cmaes or grid", t.Sampler)
		}
	}
	if x := f["trials"]; x != nil {
		t.Trials = p.integer(x, "tuner.trials", 1)
	}
	if x := f["seed"]; x != nil {
		t.Seed = int64(p.integer(x, "tuner.seed", 0))
	}
	if x := f["objective"]; x != nil {
		o, err := ParseObjective(p.str(x, "tuner.objective"))
		if p.err == nil && err != nil {
			p.fail(x, "tuner.objective", "%v", err)
		}
		t.Objective = o
	}
	if x := f["parallel"]; x != nil {
		t.Parallel = p.integer(x, "tuner.parallel", 1)
	}
	if x := f["precheck"]; x != nil {
		t.Precheck = p.boolean(x, "tuner.precheck")
	}
}

// check rejects impossible combinations across sections.
func (p *specParser) check(sp *Spec, top map[string]*yaml.Node) {
	need := minGPUs(sp.Space)
	if n := len(sp.Launcher.GPUs); n > 0 && need > n && len(sp.Launcher.Hosts) == 0 {
		p.fail(keyNode(top["launcher"], "gpus"), "launcher.gpus", "the smallest configuration of the space needs %d GPUs, only %d listed", need, n)
	}
	largest := 0
	for _, h := range sp.Launcher.Hosts {
		largest = max(largest, len(h.GPUs))
	}
	if len(sp.Launcher.Hosts) > 0 && need > largest {
		p.fail(keyNode(top["launcher"], "hosts"), "launcher.hosts", "the smallest configuration of the space needs %d GPUs on one host, the largest host lists %d", need, largest)
	}
	if sp.Launcher.Kind == LauncherEndpoint {
		for _, q := range sp.Space.Params {
			if q.Kind != space.KindCategorical || len(q.Choices) != 1 {
				p.fail(keyNode(top["space"], q.Name), "space."+q.Name,
					"the endpoint launcher cannot change engine settings: give fixed values (the server's own) or use another launcher")
				break
			}
		}
	}
	if sp.Workload.Capacity && len(sp.SLO) == 0 {
		p.fail(top["workload"], "workload.load.capacity", "a capacity search needs slo limits")
	}
	if sp.Tuner.Sampler == SamplerCMAES {
		numeric := 0
		for _, q := range sp.Space.Params {
			if q.Kind == space.KindInt || q.Kind == space.KindFloat {
				numeric++
			}
		}
		if numeric < 2 {
			p.fail(top["tuner"], "tuner.sampler", "cmaes needs at least 2 numeric parameters, the space has %d", numeric)
		}
	}
	if sp.Tuner.Sampler == SamplerGrid {
		if _, err := sp.Space.Size(); err != nil {
			p.fail(top["tuner"], "tuner.sampler", "grid needs a discrete space: %v", err)
		}
	}
	for _, o := range append(append([]Objective(nil), sp.Objectives...), sp.Tuner.Objective) {
		if o.Metric == "cost_per_mtok" && sp.Hardware.PricePerGPUHour <= 0 {
			p.fail(top["objectives"], "objectives", "cost_per_mtok needs hardware.price_per_gpu_hour (or a catalog GPU in hardware.gpu)")
		}
	}
}

// parallelNames are the settings whose product is a trial's GPU count.
var parallelNames = []string{"tensor_parallel", "pipeline_parallel", "data_parallel"}

// GPUsFor returns how many GPUs a trial with settings s needs:
// tensor_parallel × pipeline_parallel × data_parallel (each default 1).
func GPUsFor(s space.Settings) int {
	n := 1
	for _, name := range parallelNames {
		if v, ok := s.Int(name); ok && v > 0 {
			n *= v
		}
	}
	return n
}

// minGPUs is the fewest GPUs any point of the space needs.
func minGPUs(sp space.Space) int {
	n := 1
	for _, name := range parallelNames {
		q, ok := sp.Param(name)
		if !ok {
			continue
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
			n *= int(lo)
		}
	}
	return n
}

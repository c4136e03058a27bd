package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

// HostGPUStride separates the GPU numbers of the hosts of a multi-host
// study: host h's GPU g is h×HostGPUStride+g, the number trials are stored
// with.
const HostGPUStride = 100

// Hosts is the docker launcher of a study: one Docker host, or several
// (launcher.hosts), each with its own GPUs. A trial runs on the host its
// GPUs belong to.
type Hosts struct {
	hosts []*Docker
	gpus  []int // the study's GPU numbers
	multi bool  // launcher.hosts: GPU numbers carry the host
	scale float64
	local bool   // one host on this machine, real GPUs: NVML sees the trials' GPUs
	gpu   string // hardware.gpu, for the simulated engine's image
}

var _ launcher.Launcher = (*Hosts)(nil)

// Capabilities: the study's GPUs by host, reaping on every host, NVML
// telemetry only with one host on this machine and real GPUs, the
// simulated engine's time scale, the image check as preflight.
func (h *Hosts) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{GPUs: h.GPUs(), HostOf: h.HostOf, Reap: h.Reap, LocalGPUs: h.local,
		TimeScale: h.TimeScale(), Preflight: h.Preflight}
}

// NewHosts spreads a study over hosts; gpus[i] are host i's GPU indices.
// With one host the study's GPU numbers are that host's indices.
func NewHosts(hosts []*Docker, gpus [][]int) *Hosts {
	h := &Hosts{hosts: hosts, multi: len(hosts) > 1, scale: 1}
	for i, gs := range gpus {
		for _, g := range gs {
			if h.multi {
				g += i * HostGPUStride
			}
			h.gpus = append(h.gpus, g)
		}
	}
	h.local = len(hosts) == 1 && !hosts[0].sim() && !hosts[0].Remote()
	return h
}

// Launch starts the trial's container on the host its GPUs belong to.
func (h *Hosts) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	if !h.multi {
		return h.hosts[0].Launch(ctx, spec)
	}
	host := 0
	if len(spec.GPUs) > 0 {
		host = spec.GPUs[0] / HostGPUStride
	}
	if host < 0 || host >= len(h.hosts) {
		return nil, fmt.Errorf("%w: GPU %d belongs to no host of the study", launcher.ErrBadSpec, spec.GPUs[0])
	}
	local := make([]int, 0, len(spec.GPUs))
	for _, g := range spec.GPUs {
		if g/HostGPUStride != host {
			return nil, fmt.Errorf("%w: GPUs %v span two hosts", launcher.ErrBadSpec, spec.GPUs)
		}
		local = append(local, g%HostGPUStride)
	}
	spec.GPUs = local
	return h.hosts[host].Launch(ctx, spec)
}

// GPUs returns the study's GPU numbers.
func (h *Hosts) GPUs() []int { return h.gpus }

// HostOf returns the host of a study GPU number.
func (h *Hosts) HostOf(gpu int) int {
	if !h.multi {
		return 0
	}
	return gpu / HostGPUStride
}

// TimeScale is the simulated engine's time scale (1 for real engines).
func (h *Hosts) TimeScale() float64 { return simenv.TimeScale(h.scale) }

// Reap removes the study's containers from every host that keep does not
// spare. A host it cannot reach is an error.
func (h *Hosts) Reap(ctx context.Context, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	var (
		seen []string
		out  []launcher.Reaped
		errs []error
	)
	for _, d := range h.hosts {
		if slices.Contains(seen, d.Host) {
			continue
		}
		seen = append(seen, d.Host)
		got, err := reapHost(ctx, d.Host, study, keep)
		out = append(out, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// reapHost reaps one daemon.
func reapHost(ctx context.Context, host, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	c, err := NewDockerClient(host)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	got, err := Reap(ctx, c, host, study, keep)
	if err != nil {
		return got, fmt.Errorf("docker host %s: %w", orLocal(host), err)
	}
	return got, nil
}

func orLocal(host string) string {
	if host == "" {
		return "(DOCKER_HOST or the local socket)"
	}
	return host
}

// Remote reports whether the engine runs on another machine than this one.
func (d *Docker) Remote() bool {
	return d.Address != "" && !httpserve.IsLoopback(d.Address) || remoteDaemon(d.Host)
}

// remoteDaemon reports whether a DOCKER_HOST value names another machine.
func remoteDaemon(host string) bool {
	if host == "" || strings.HasPrefix(host, "unix://") || strings.HasPrefix(host, "npipe://") {
		return false
	}
	u, err := url.Parse(host)
	return err != nil || !httpserve.IsLoopback(u.Hostname())
}

const remoteAddressHelp = "give the address this machine reaches it at, or 127.0.0.1 with an ssh tunnel (see README, Docker and remote GPU hosts)"

func init() {
	launcher.Register(launcher.Kind{
		Name: "docker",
		Doc:  "a container per trial on a Docker host (vllm/vllm-openai, lmsysorg/sglang, or servetune-sim:dev without a GPU)",
		Keys: append([]launcher.Key{
			{Name: "image", Doc: "the engine image; never pulled (servetune-sim:dev is the simulated engine: `make sim-image`)", Required: true},
			{Name: "docker_host", Doc: "the Docker daemon: unix://, tcp:// or ssh://[user@]host (default DOCKER_HOST, else the local socket)"},
			{Name: "address", Doc: "where this machine reaches a remote Docker host's published ports (required for a remote daemon)"},
			{Name: "hosts", Doc: "several Docker hosts: a list of {docker_host, address, gpus}; trials run in parallel across them"},
		}, simenv.Keys...),
		Decode:  decode,
		Cleanup: cleanup,
	})
}

// cleanup removes the study's containers (every servetune container for
// study "") from one daemon.
func cleanup(ctx context.Context, host, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	return reapHost(ctx, host, study, keep)
}

// decode reads the docker launcher's keys.
func decode(d *yamlpos.Decoder, keys map[string]*yaml.Node, c launcher.Common) launcher.Launcher {
	image := d.Str(keys["image"], "launcher.image")
	sim := engine.IsSimImage(image)
	if !sim {
		for _, key := range []string{"time_scale", "load_time"} {
			if keys[key] != nil {
				d.Fail(yamlpos.KeyNode(c.Section, key), "launcher."+key, "only for the simulated engine (launcher kind sim, or the servetune-sim image)")
				return nil
			}
		}
	}
	scale, load := simenv.DecodeKeys(d, keys)
	mk := func(host, address string) *Docker {
		dk := &Docker{Image: image, PassEnv: c.Env, Host: host, Address: address, NoGPU: sim}
		if sim {
			lt := ""
			if load > 0 {
				lt = load.String()
			}
			dk.Env = engine.SimEnv(c.GPU, 0, scale, lt)
		}
		return dk
	}
	var h *Hosts
	if x := keys["hosts"]; x != nil {
		for _, key := range []string{"docker_host", "address", "gpus"} {
			if key == "gpus" && len(c.GPUs) > 0 || keys[key] != nil {
				d.Fail(yamlpos.KeyNode(c.Section, key), "launcher."+key, "give it per host under launcher.hosts")
				return nil
			}
		}
		var ds []*Docker
		var gpus [][]int
		for i, hn := range d.Seq(x, "launcher.hosts") {
			host, address, gs := decodeHost(d, hn, fmt.Sprintf("launcher.hosts[%d]", i))
			if d.Failed() {
				return nil
			}
			ds, gpus = append(ds, mk(host, address)), append(gpus, gs)
		}
		h = NewHosts(ds, gpus)
	} else {
		host, address := "", ""
		if x := keys["docker_host"]; x != nil {
			host = dockerHost(d, x, "launcher.docker_host")
		}
		if x := keys["address"]; x != nil {
			address = d.Str(x, "launcher.address")
		}
		if !d.Failed() && remoteDaemon(host) && address == "" {
			d.Fail(keys["docker_host"], "launcher.address", "missing for the remote Docker host %s: %s", host, remoteAddressHelp)
			return nil
		}
		h = NewHosts([]*Docker{mk(host, address)}, [][]int{c.GPUs})
	}
	h.scale, h.gpu = scale, c.GPU
	return h
}

// decodeHost reads one entry of launcher.hosts.
func decodeHost(d *yamlpos.Decoder, hn *yaml.Node, field string) (host, address string, gpus []int) {
	f := d.Fields(hn, field, "docker_host", "address", "gpus")
	if d.Require(hn, f, field, "docker_host", "required") == nil {
		return
	}
	host = dockerHost(d, f["docker_host"], field+".docker_host")
	if x := f["address"]; x != nil {
		address = d.Str(x, field+".address")
	}
	if !d.Failed() && remoteDaemon(host) && address == "" {
		d.Fail(f["docker_host"], field+".address", "missing for the remote Docker host %s: %s", host, remoteAddressHelp)
		return
	}
	if d.Require(hn, f, field, "gpus", "each host lists its GPUs; one trial at a time per listed GPU set") == nil {
		return
	}
	seen := map[int]bool{}
	for _, g := range d.Seq(f["gpus"], field+".gpus") {
		id := d.Int(g, field+".gpus", 0)
		if !d.Failed() && id >= HostGPUStride {
			d.Fail(g, field+".gpus", "GPU %d: at most %d GPUs per host", id, HostGPUStride)
		}
		if !d.Failed() && seen[id] {
			d.Fail(g, field+".gpus", "GPU %d listed twice", id)
		}
		seen[id] = true
		gpus = append(gpus, id)
	}
	return host, address, gpus
}

// dockerHost accepts a DOCKER_HOST value: unix://, tcp:// or ssh://.
func dockerHost(d *yamlpos.Decoder, n *yaml.Node, field string) string {
	h := d.Str(n, field)
	if d.Failed() {
		return h
	}
	u, err := url.Parse(h)
	switch {
	case err != nil:
		d.Fail(n, field, "%q: not a URL", h)
	case u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh":
		d.Fail(n, field, "%q: want unix://, tcp:// or ssh://", h)
	case u.Scheme != "unix" && u.Hostname() == "":
		d.Fail(n, field, "%q: no host name", h)
	case u.User != nil && func() bool { _, ok := u.User.Password(); return ok }():
		// It would be stored with the spec.
		d.Fail(n, field, "passwords in docker_host are not accepted: use ssh keys or an agent")
	}
	return h
}

// Preflight checks that the image is on every host (it is never pulled)
// and, for the simulated engine's image, that it can model the study.
func (h *Hosts) Preflight(ctx context.Context, spec launcher.Spec) error {
	for _, d := range h.hosts {
		api, err := d.client()
		if err != nil {
			return err
		}
		if err := d.checkImage(ctx, api); err != nil {
			return fmt.Errorf("docker host %s: %w", orLocal(d.Host), err)
		}
	}
	if h.hosts[0].sim() {
		return simenv.Preflight(spec.Model, "", h.gpu)
	}
	return nil
}

// Image is the study's engine image.
func (h *Hosts) Image() string { return h.hosts[0].Image }

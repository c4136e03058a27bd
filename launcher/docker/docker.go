package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// LabelEngine is the label, beside launcher.Label's, that says which
// engine a container runs.
const LabelEngine = launcher.LabelPrefix + "engine"

// ErrImageMissing is wrapped by Launch's error when the image is not present
// on the Docker host. The launcher never pulls: images are tens of GiB and a
// trial must not silently wait for a download.
var ErrImageMissing = errors.New("docker image not present")

// Docker launches each trial's engine as a container on a Docker host.
//
// GPUs go to the container by index (launcher.Spec.GPUs) through an nvidia device
// request, unless NoGPU is set. The container port is published on
// 127.0.0.1 only, on launcher.Spec.Port or a free port. Containers carry
// launcher.Label's labels (servetune.io/study, ...), and are removed by
// Stop; Reap removes what a crash left behind.
type Docker struct {
	Image string
	// Command, when set, is the container's command as a template (see
	// launcher.ExpandCommand; {host} is 0.0.0.0 and {port} the container
	// port); otherwise the engine's image takes engine.ContainerArgs.
	Command []string
	// Entrypoint replaces the image's entry point when set (with Command only).
	Entrypoint []string

	// Host is the Docker daemon, e.g. unix:///var/run/docker.sock,
	// tcp://gpu-box:2376 or ssh://user@gpu-box; "" = DOCKER_HOST or the
	// local socket. See NewDockerClient.
	Host   string
	Client DockerAPI // optional; overrides Host
	// Address is the Docker host's name or IP as this machine reaches it,
	// used for the trial's endpoint; "" = 127.0.0.1 (a local daemon, or a
	// remote one reached through a tunnel that forwards the published
	// ports). When it is not a loopback address the port is published on
	// all of the Docker host's interfaces, since 127.0.0.1 there is out of
	// reach from here: the engine then answers anyone on that network.
	Address string

	NoGPU   bool   // request no GPUs (the sim image)
	ShmSize int64  // bytes of /dev/shm; 0 = share the host's IPC namespace (what vLLM's docs use)
	HFCache string // host directory bound to /root/.cache/huggingface; "" = none
	// PassEnv names host environment variables (HF_TOKEN) handed to the
	// container by name: their values are read at launch, never logged or kept
	// by servetune (the Docker host holds them in the container's config, as
	// with `docker run -e HF_TOKEN`, until Stop removes it).
	PassEnv []string
	Env     []string // fixed KEY=VALUE settings, e.g. SERVETUNE_SIM_GPU=H100-SXM

	MemoryBytes int64   // container memory limit; 0 = none
	CPUs        float64 // CPU limit; 0 = none

	ContainerPort int           // port the engine listens on inside; default 8000
	StopTimeout   time.Duration // default launcher.DefaultStopTimeout
	PollInterval  time.Duration // default launcher.DefaultPollInterval
	LogBytes      int           // default launcher.DefaultLogBytes

	mu sync.Mutex // guards the lazy Client
}

// DockerAPI is the slice of the Docker SDK the launcher uses. *client.Client
// implements it; it is split by use so each part stays small.
type DockerAPI interface {
	imageChecker
	containerRunner
	containerWatcher
	ContainerReaper
}

type imageChecker interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
}

type containerRunner interface {
	ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, id string, opts container.StartOptions) error
	ContainerStop(ctx context.Context, id string, opts container.StopOptions) error
}

type containerWatcher interface {
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerLogs(ctx context.Context, id string, opts container.LogsOptions) (io.ReadCloser, error)
	ContainerWait(ctx context.Context, id string, cond container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
}

var (
	_ launcher.Launcher = (*Docker)(nil)
	_ DockerAPI         = (*client.Client)(nil)
)

// Capabilities: none of its own; Hosts, the docker kind's launcher, has
// the study's (placement, reaping, telemetry, time scale, preflight).
func (d *Docker) Capabilities() launcher.Capabilities { return launcher.Capabilities{} }

// client returns the configured API client, making one on first use.
func (d *Docker) client() (DockerAPI, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Client != nil {
		return d.Client, nil
	}
	c, err := NewDockerClient(d.Host)
	if err != nil {
		return nil, err
	}
	d.Client = c
	return c, nil
}

// Launch checks the image is present, creates and starts the container. It
// does not wait for the engine: call Ready.
func (d *Docker) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	api, err := d.client()
	if err != nil {
		return nil, err
	}
	cfg, hostCfg, port, err := d.containerConfig(spec)
	if err != nil {
		return nil, err
	}
	if err := d.checkImage(ctx, api); err != nil {
		return nil, err
	}
	created, err := api.ContainerCreate(ctx, cfg, hostCfg, nil, nil, containerName(spec))
	if err != nil {
		return nil, fmt.Errorf("docker: create container from %s: %w", d.Image, err)
	}
	in := &dockerInstance{
		api:         api,
		id:          created.ID,
		endpoint:    "http://" + launcher.HostPort(d.address(), port),
		poll:        d.PollInterval,
		stopTimeout: d.StopTimeout,
		logBytes:    d.LogBytes,
		exited:      make(chan struct{}),
		waitDone:    make(chan struct{}),
	}
	if in.stopTimeout <= 0 {
		in.stopTimeout = launcher.DefaultStopTimeout
	}
	if in.logBytes <= 0 {
		in.logBytes = launcher.DefaultLogBytes
	}
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = api.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		return nil, fmt.Errorf("docker: start container from %s: %w", d.Image, err)
	}
	var wctx context.Context
	wctx, in.cancelWait = context.WithCancel(context.Background())
	go in.wait(wctx) // owned by in: Stop cancels it and waits
	return in, nil
}

// checkImage fails when the image is not on the host: it is never pulled.
func (d *Docker) checkImage(ctx context.Context, api DockerAPI) error {
	if _, err := api.ImageInspect(ctx, d.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s (build it with `make sim-image` if it is the sim image, or run `docker pull %s` on the Docker host)", ErrImageMissing, d.Image, d.Image)
		}
		return fmt.Errorf("docker: inspect image %s: %w", d.Image, err)
	}
	return nil
}

// containerConfig renders the container for spec. It touches no daemon, so
// it is tested on its own.
func (d *Docker) containerConfig(spec launcher.Spec) (*container.Config, *container.HostConfig, int, error) {
	if d.Image == "" {
		return nil, nil, 0, fmt.Errorf("%w: docker launcher has no image", launcher.ErrBadSpec)
	}
	if d.MemoryBytes < 0 || d.CPUs < 0 || d.ShmSize < 0 {
		return nil, nil, 0, fmt.Errorf("%w: docker launcher: negative memory, CPU or shm limit", launcher.ErrBadSpec)
	}
	cport := d.ContainerPort
	if cport == 0 {
		cport = 8000
	}
	args, err := spec.Args()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
	}
	eng := spec.Engine
	if eng == "" {
		eng = engine.VLLM
	}
	var cmd []string
	label := string(eng)
	switch {
	case len(d.Command) > 0:
		cmd, label = launcher.ExpandCommand(d.Command, spec.Model, args, "0.0.0.0", cport), "custom"
	case !eng.Valid():
		return nil, nil, 0, fmt.Errorf("%w: docker launcher: engine %q (want vllm or sglang, or give a command)", launcher.ErrBadSpec, eng)
	case spec.Model == "":
		return nil, nil, 0, fmt.Errorf("%w: docker launcher: the %s image needs a model", launcher.ErrBadSpec, eng)
	default:
		cmd = engine.ContainerArgs(eng, spec.Model, args, cport)
	}
	if len(d.Entrypoint) > 0 && len(d.Command) == 0 {
		return nil, nil, 0, fmt.Errorf("%w: docker launcher: an entry point needs a command", launcher.ErrBadSpec)
	}
	// The port is chosen here rather than by the daemon: a container that
	// exits at once (a config that does not fit) has no published port to
	// read back, and its exit must reach Ready as launcher.ErrExited.
	port := spec.Port
	if port == 0 {
		var err error
		if port, err = launcher.FreePort(); err != nil {
			return nil, nil, 0, err
		}
	}
	env := append(append([]string(nil), d.Env...), spec.Env...)
	if d.sim() {
		env = append(env, engine.SimEnv("", max(len(spec.GPUs), 1), 0, "")...)
		env = append(env, engine.EnvSimEngine+"="+string(eng))
	}
	env = append(env, launcher.PassEnv(d.PassEnv, os.LookupEnv)...)
	cp := nat.Port(strconv.Itoa(cport) + "/tcp")
	cfg := &container.Config{
		Image:        d.Image,
		Cmd:          cmd,
		Entrypoint:   d.Entrypoint,
		Env:          env,
		ExposedPorts: nat.PortSet{cp: {}},
		Labels:       launcher.LabelOf(spec).Labels(),
	}
	cfg.Labels[LabelEngine] = label
	hc := &container.HostConfig{
		PortBindings: nat.PortMap{cp: {{HostIP: d.publishIP(), HostPort: strconv.Itoa(port)}}},
	}
	if d.ShmSize > 0 {
		hc.ShmSize = d.ShmSize
	} else {
		hc.IpcMode = container.IPCModeHost
	}
	if !d.NoGPU {
		req := container.DeviceRequest{Driver: "nvidia", Capabilities: [][]string{{"gpu"}}}
		if len(spec.GPUs) == 0 {
			req.Count = -1 // all GPUs, as `--gpus all`
		}
		for _, g := range spec.GPUs {
			req.DeviceIDs = append(req.DeviceIDs, strconv.Itoa(g))
		}
		hc.DeviceRequests = []container.DeviceRequest{req}
	}
	if d.HFCache != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: d.HFCache, Target: "/root/.cache/huggingface"}}
	}
	hc.Memory = d.MemoryBytes
	if hc.Memory > 0 {
		hc.MemorySwap = hc.Memory // a hard limit: an engine must not swap
	}
	hc.NanoCPUs = int64(math.Round(d.CPUs * 1e9))
	return cfg, hc, port, nil
}

// address is where the benchmark reaches the published port.
func (d *Docker) address() string {
	if d.Address == "" {
		return "127.0.0.1"
	}
	return d.Address
}

// publishIP is the Docker host's address the port is published on:
// loopback unless the engine must be reached from another machine.
func (d *Docker) publishIP() string {
	if httpserve.IsLoopback(d.address()) {
		return "127.0.0.1"
	}
	return "0.0.0.0"
}

// sim reports whether the image is the simulated engine's (engine.SimImage),
// which takes its hardware from the environment.
func (d *Docker) sim() bool { return engine.IsSimImage(d.Image) }

// containerName is readable in `docker ps` (launcher.ReadableName: study,
// trial and part) and unique per launch.
func containerName(spec launcher.Spec) string {
	return launcher.ReadableName(spec) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

type dockerInstance struct {
	api         DockerAPI
	id          string
	endpoint    string
	poll        time.Duration
	stopTimeout time.Duration
	logBytes    int

	cancelWait context.CancelFunc
	waitDone   chan struct{}
	exited     chan struct{}
	exitCode   int  // written before exited is closed
	oomKilled  bool // idem

	mu   sync.Mutex
	kept launcher.KeptLogs // kept at Stop: the container's logs go with it

	stopOnce sync.Once
	stopErr  error
}

var (
	_ launcher.Instance = (*dockerInstance)(nil)
	_ launcher.Exiter   = (*dockerInstance)(nil)
)

// wait records the container's exit. If the daemon stops answering, the
// instance counts as exited with code -1 so no trial blocks on it forever.
func (in *dockerInstance) wait(ctx context.Context) {
	defer close(in.waitDone)
	okc, errc := in.api.ContainerWait(ctx, in.id, container.WaitConditionNotRunning)
	select {
	case r := <-okc:
		in.exitCode = int(r.StatusCode)
		ictx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if st, err := in.api.ContainerInspect(ictx, in.id); err == nil && st.State != nil {
			in.oomKilled = st.State.OOMKilled
		}
		cancel()
	case <-errc:
		in.exitCode = -1
	case <-ctx.Done():
		in.exitCode = -1
	}
	close(in.exited)
}

// ID is the container ID.
func (in *dockerInstance) ID() string       { return in.id }
func (in *dockerInstance) Endpoint() string { return in.endpoint }

func (in *dockerInstance) Exited() <-chan struct{} { return in.exited }

// Exit says how the container ended (its exit code, and whether the
// kernel's OOM killer ended it); valid once Exited is closed, before that
// the code is -1.
func (in *dockerInstance) Exit() engine.Exit {
	select {
	case <-in.exited:
		return engine.Exit{Code: in.exitCode, OOMKilled: in.oomKilled}
	default:
		return engine.Exit{Code: -1}
	}
}

func (in *dockerInstance) Ready(ctx context.Context) error {
	return launcher.WaitHealthy(ctx, in.endpoint+"/health", in.poll, in.exited, func() error {
		return &launcher.ExitError{Exit: engine.Exit{Code: in.exitCode, OOMKilled: in.oomKilled}}
	})
}

// Logs returns the tail of the container's stdout and stderr, fetched from
// the daemon (or kept from the moment Stop removed the container).
func (in *dockerInstance) Logs() string {
	return in.kept.Logs(func(ctx context.Context) string {
		s, err := in.fetchLogs(ctx)
		if err != nil {
			return fmt.Sprintf("(no logs: %v)", err)
		}
		return s
	})
}

func (in *dockerInstance) fetchLogs(ctx context.Context) (string, error) {
	rc, err := in.api.ContainerLogs(ctx, in.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "1000"})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	buf := launcher.NewTailBuffer(in.logBytes)
	// Without a TTY the stream multiplexes stdout and stderr with headers.
	if _, err := stdcopy.StdCopy(buf, buf, rc); err != nil && !errors.Is(err, io.EOF) {
		return buf.String(), err
	}
	return buf.String(), nil
}

// Stop stops the container (SIGTERM, then SIGKILL after the stop timeout),
// keeps its log tail, and removes it with its anonymous volumes. It goes on
// after ctx is cancelled (Ctrl-C is exactly when cleanup matters), bounded by
// the stop timeout plus 30 s. Safe to call more than once.
func (in *dockerInstance) Stop(ctx context.Context) error {
	in.stopOnce.Do(func() { in.stopErr = in.stop(ctx) })
	return in.stopErr
}

func (in *dockerInstance) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.stopTimeout+30*time.Second)
	defer cancel()
	var errs []error
	secs := int(math.Ceil(in.stopTimeout.Seconds()))
	if err := in.api.ContainerStop(ctx, in.id, container.StopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("docker: stop %s: %w", short(in.id), err))
	}
	select {
	case <-in.exited:
	case <-ctx.Done():
	}
	if s, err := in.fetchLogs(ctx); err == nil {
		in.kept.Keep(s)
	}
	if err := in.api.ContainerRemove(ctx, in.id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("docker: remove %s: %w", short(in.id), err))
	}
	in.cancelWait()
	<-in.waitDone
	return errors.Join(errs...)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

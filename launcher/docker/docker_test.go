package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/trial"
)

func TestDockerContainerConfig(t *testing.T) {
	t.Setenv("SERVETUNE_TEST_TOKEN", "hf_secretvalue")
	spec := launcher.Spec{Model: "org/m", Extra: []string{"--tensor-parallel-size", "2"}, GPUs: []int{2, 3}, Study: "s1", Trial: 7, Port: 18123, Env: []string{"A=1"}}
	tests := []struct {
		name    string
		d       *Docker
		engine  engine.Engine // default vLLM
		wantCmd []string
		check   func(t *testing.T, cfg *container.Config, hc *container.HostConfig)
		wantErr error
	}{
		{
			name:    "vllm with GPUs and ipc host",
			d:       &Docker{Image: "vllm/vllm-openai:v0.11.0", PassEnv: []string{"SERVETUNE_TEST_TOKEN", "SERVETUNE_TEST_UNSET"}, HFCache: "/data/hf"},
			wantCmd: []string{"--model", "org/m", "--tensor-parallel-size", "2"},
			check: func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
				if len(hc.DeviceRequests) != 1 || !slices.Equal(hc.DeviceRequests[0].DeviceIDs, []string{"2", "3"}) || hc.DeviceRequests[0].Driver != "nvidia" {
					t.Errorf("DeviceRequests = %+v", hc.DeviceRequests)
				}
				if hc.IpcMode != container.IPCModeHost {
					t.Errorf("IpcMode = %q", hc.IpcMode)
				}
				if !slices.Contains(cfg.Env, "SERVETUNE_TEST_TOKEN=hf_secretvalue") || !slices.Contains(cfg.Env, "A=1") {
					t.Errorf("Env lacks the passed-through or spec variables")
				}
				if slices.ContainsFunc(cfg.Env, func(s string) bool { return strings.HasPrefix(s, "SERVETUNE_TEST_UNSET") }) {
					t.Errorf("an unset host variable was passed")
				}
				if len(hc.Mounts) != 1 || hc.Mounts[0].Source != "/data/hf" || hc.Mounts[0].Target != "/root/.cache/huggingface" {
					t.Errorf("Mounts = %+v", hc.Mounts)
				}
				if cfg.Labels[launcher.LabelStudy] != "s1" || cfg.Labels[launcher.LabelTrial] != "7" || cfg.Labels[launcher.LabelManaged] != "true" {
					t.Errorf("Labels = %v", cfg.Labels)
				}
				b := hc.PortBindings["8000/tcp"]
				if len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "18123" {
					t.Errorf("PortBindings = %v", hc.PortBindings)
				}
			},
		},
		{
			name:    "sglang with shm and limits",
			d:       &Docker{Image: "lmsysorg/sglang", ShmSize: 16 << 30, MemoryBytes: 1 << 30, CPUs: 1.5},
			engine:  engine.SGLang,
			wantCmd: []string{"python3", "-m", "sglang.launch_server", "--model-path", "org/m", "--tensor-parallel-size", "2", "--host", "0.0.0.0", "--port", "8000"},
			check: func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
				if hc.ShmSize != 16<<30 || hc.IpcMode != "" || hc.Memory != 1<<30 || hc.NanoCPUs != 1_500_000_000 {
					t.Errorf("shm %d ipc %q mem %d cpus %d", hc.ShmSize, hc.IpcMode, hc.Memory, hc.NanoCPUs)
				}
			},
		},
		{
			name:    "sim image has no GPU request",
			d:       &Docker{Image: engine.SimImage, NoGPU: true, Env: []string{"SERVETUNE_SIM_GPU=H100-SXM"}},
			wantCmd: []string{"--model", "org/m", "--tensor-parallel-size", "2"},
			check: func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
				if len(hc.DeviceRequests) != 0 {
					t.Errorf("DeviceRequests = %+v", hc.DeviceRequests)
				}
			},
		},
		{
			name:    "custom",
			d:       &Docker{Image: "x", Command: []string{"serve", "{model}", "--port", "{port}", "--host", "{host}"}},
			wantCmd: []string{"serve", "org/m", "--port", "8000", "--host", "0.0.0.0", "--tensor-parallel-size", "2"},
		},
		{
			name:    "remote host publishes on all interfaces",
			d:       &Docker{Image: "x", Host: "ssh://gpu-a", Address: "gpu-a.internal"},
			wantCmd: []string{"--model", "org/m", "--tensor-parallel-size", "2"},
			check: func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
				if b := hc.PortBindings["8000/tcp"]; len(b) != 1 || b[0].HostIP != "0.0.0.0" {
					t.Errorf("PortBindings = %v", hc.PortBindings)
				}
			},
		},
		{
			name:    "loopback address keeps 127.0.0.1",
			d:       &Docker{Image: "x", Host: "ssh://gpu-a", Address: "localhost"},
			wantCmd: []string{"--model", "org/m", "--tensor-parallel-size", "2"},
			check: func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
				if b := hc.PortBindings["8000/tcp"]; len(b) != 1 || b[0].HostIP != "127.0.0.1" {
					t.Errorf("PortBindings = %v", hc.PortBindings)
				}
			},
		},
		{name: "no image", d: &Docker{}, wantErr: launcher.ErrBadSpec},
		{name: "entry point without command", d: &Docker{Image: "x", Entrypoint: []string{"/bin/sh"}}, wantErr: launcher.ErrBadSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := spec
			spec.Engine = tt.engine
			cfg, hc, port, err := tt.d.containerConfig(spec)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if port != 18123 {
				t.Errorf("port = %d", port)
			}
			if !slices.Equal(cfg.Cmd, tt.wantCmd) {
				t.Errorf("Cmd = %q, want %q", cfg.Cmd, tt.wantCmd)
			}
			if tt.check != nil {
				tt.check(t, cfg, hc)
			}
		})
	}
}

func TestContainerName(t *testing.T) {
	n := containerName(launcher.Spec{Study: "my study/ü", Trial: 3})
	if !strings.HasPrefix(n, "servetune-my-study-t3-") {
		t.Errorf("containerName = %q", n)
	}
	if n := containerName(launcher.Spec{Study: "s", Trial: 2, Part: "decode 1"}); !strings.HasPrefix(n, "servetune-s-t2-decode1-") {
		t.Errorf("a part's containerName = %q", n)
	}
}

func TestSSHDialStdio(t *testing.T) {
	tests := []struct {
		host string
		want string
		err  bool
	}{
		{"ssh://gpu-box", "ssh -- gpu-box docker system dial-stdio", false},
		{"ssh://me@gpu-box:2222", "ssh -l me -p 2222 -- gpu-box docker system dial-stdio", false},
		{"ssh://me:pw@gpu-box", "", true},
		{"ssh://", "", true},
		{"ssh://h/path", "", true},
		{"ssh://-oProxyCommand=x", "", true},
		{"ssh://-oProxyCommand=x@h", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			argv, err := sshDialStdio(tt.host)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if got := strings.Join(argv, " "); got != tt.want {
				t.Errorf("argv = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCommandDialer talks to the daemon through `docker system dial-stdio`,
// the very command an ssh:// host runs remotely.
func TestCommandDialer(t *testing.T) {
	requireDocker(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker CLI not on PATH")
	}
	c, err := client.NewClientWithOpts(append(viaCommand([]string{"docker", "system", "dial-stdio"}), client.WithAPIVersionNegotiation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping through dial-stdio: %v", err)
	}
	if _, err := c.ContainerList(ctx, container.ListOptions{}); err != nil {
		t.Fatalf("ContainerList through dial-stdio: %v", err)
	}
}

func TestDockerImageMissing(t *testing.T) {
	c := requireDocker(t)
	d := &Docker{Image: "servetune-test-absent:never", Client: c, NoGPU: true}
	_, err := d.Launch(context.Background(), launcher.Spec{Model: "m", Study: testStudy(t)})
	if !errors.Is(err, ErrImageMissing) {
		t.Fatalf("Launch = %v, want ErrImageMissing", err)
	}
	for _, want := range []string{"servetune-test-absent:never", "make sim-image", "docker pull"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReap(t *testing.T) {
	c := requireDocker(t)
	requireSimImage(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Leftovers of a crashed study: created, never started (no engine needed).
	d := &Docker{Image: engine.SimImage, NoGPU: true}
	for trial := 1; trial <= 3; trial++ {
		spec := launcher.Spec{Model: "m", Study: study, Trial: trial}
		cfg, hc, _, err := d.containerConfig(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ContainerCreate(ctx, cfg, hc, nil, nil, containerName(spec)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(studyContainers(t, c, study)); n != 3 {
		t.Fatalf("%d containers before Reap, want 3", n)
	}
	got, err := Reap(ctx, c, "", study, func(r launcher.Reaped) bool { return r.Trial == 2 })
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	var trials []int
	for _, r := range got {
		trials = append(trials, r.Trial)
	}
	slices.Sort(trials)
	if !slices.Equal(trials, []int{1, 3}) {
		t.Errorf("reaped trials %v, want [1 3]", trials)
	}
	left := studyContainers(t, c, study)
	if len(left) != 1 || left[0].Labels[launcher.LabelTrial] != "2" {
		t.Errorf("left %d containers, want only trial 2's", len(left))
	}
	if _, err := Reap(ctx, c, "", study, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(studyContainers(t, c, study)); n != 0 {
		t.Errorf("%d containers after the second Reap, want 0", n)
	}
}

func TestDockerSimServe(t *testing.T) {
	c := requireDocker(t)
	requireSimImage(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	d := &Docker{
		Image: engine.SimImage, Client: c, NoGPU: true,
		Env:          []string{engine.EnvSimGPU + "=H100-SXM", engine.EnvSimNumGPUs + "=1", engine.EnvSimTimeScale + "=50"},
		PollInterval: 50 * time.Millisecond,
		StopTimeout:  5 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, launcher.Spec{Model: model, Extra: []string{"--sim-load-time", "200ms"}, GPUs: []int{0}, Study: study, Trial: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\nlogs:\n%s", err, in.Logs())
	}
	data := streamCompletion(t, in.Endpoint(), model)
	t.Logf("%d SSE messages", len(data))
	if n := len(studyContainers(t, c, study)); n != 1 {
		t.Errorf("%d containers while running, want 1", n)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := len(studyContainers(t, c, study)); n != 0 {
		t.Errorf("%d containers after Stop, want 0", n)
	}
	if in.Logs() == "" {
		t.Errorf("no logs kept after Stop")
	}
}

func TestDockerStartupOOM(t *testing.T) {
	c := requireDocker(t)
	requireSimImage(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	d := &Docker{
		Image: engine.SimImage, Client: c, NoGPU: true,
		Env:          []string{engine.EnvSimGPU + "=H100-SXM", engine.EnvSimNumGPUs + "=1", engine.EnvSimTimeScale + "=50"},
		PollInterval: 50 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, launcher.Spec{Model: "meta-llama/Llama-3.3-70B-Instruct", Extra: []string{"--quantization", "fp8", "--sim-load-time", "100ms"}, Study: study, Trial: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer in.Stop(context.Background())
	err = in.Ready(ctx)
	var ee *launcher.ExitError
	if !errors.As(err, &ee) || !errors.Is(err, launcher.ErrExited) || ee.Code == 0 {
		t.Fatalf("Ready = %v, want a launcher.ExitError with a non-zero code", err)
	}
	logs := in.Logs()
	if _, ok := engine.OOMLine(logs); !ok {
		t.Errorf("logs lack the engine's memory message:\n%s", logs)
	}
	ex := in.(launcher.Exiter)
	if got, _ := engine.Classify(ex.Exit(), false, logs); got != engine.FailOOM {
		t.Errorf("Classify = %q, want oom", got)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(studyContainers(t, c, study)); n != 0 {
		t.Errorf("%d containers after Stop, want 0", n)
	}
}

// TestDockerExitBeforeReady runs a container whose engine fails at once (the
// sim image's binary given an unknown command): Ready must report the exit
// with the code, Logs must hold the message, and Stop must remove it.
func TestDockerExitBeforeReady(t *testing.T) {
	c := requireDocker(t)
	requireSimImage(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	d := &Docker{
		Image: engine.SimImage, Client: c, NoGPU: true,
		Entrypoint: []string{"/servetune"}, Command: []string{"no-such-engine", "--port", "{port}"},
		PollInterval: 20 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := d.Launch(ctx, launcher.Spec{Model: "m", Study: study, Trial: 9})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	err = in.Ready(ctx)
	var ee *launcher.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || ee.OOMKilled {
		t.Fatalf("Ready = %v, want launcher.ExitError code 2 (usage)", err)
	}
	ex := in.(launcher.Exiter)
	<-ex.Exited()
	if ex.Exit().Code != 2 {
		t.Errorf("ExitCode = %d", ex.Exit().Code)
	}
	logs := in.Logs()
	if !strings.Contains(logs, `unknown command "no-such-engine"`) {
		t.Errorf("Logs lack the engine's message:\n%s", logs)
	}
	if got, _ := engine.Classify(ex.Exit(), true, logs); got != engine.FailCrash {
		t.Errorf("Classify = %q, want crash", got)
	}
	if n := len(studyContainers(t, c, study)); n != 1 {
		t.Errorf("%d containers before Stop, want 1 (exited, kept for its logs)", n)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := len(studyContainers(t, c, study)); n != 0 {
		t.Errorf("%d containers after Stop, want 0", n)
	}
	if !strings.Contains(in.Logs(), "no-such-engine") {
		t.Errorf("Logs after Stop lost the tail: %q", in.Logs())
	}
}

// FuzzSSHDialStdio: whatever the URL, the host never reaches ssh where it
// could be read as an option.
func FuzzSSHDialStdio(f *testing.F) {
	for _, s := range []string{"ssh://h", "ssh://u@h:22", "ssh://-oProxyCommand=x", "ssh://u@-p", "ssh://[::1]:2222"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		argv, err := sshDialStdio(host)
		if err != nil {
			return
		}
		i := slices.Index(argv, "--")
		if i < 0 || len(argv) != i+5 || !slices.Equal(argv[i+2:], []string{"docker", "system", "dial-stdio"}) {
			t.Fatalf("argv %q", argv)
		}
		for _, a := range argv[1:i] {
			if a != "-l" && a != "-p" && strings.HasPrefix(a, "-") {
				t.Fatalf("option-like value %q before --: %q", a, argv)
			}
		}
	})
}

// buildMemHog builds the memhog test image (testdata/memhog), FROM scratch.
func buildMemHog(t *testing.T) string {
	t.Helper()
	const image = "servetune-test-memhog:dev"
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "memhog"), "./testdata/memhog")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build memhog: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY memhog /memhog\nENTRYPOINT [\"/memhog\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "build", "-q", "-t", image, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build memhog: %v\n%s", err, out)
	}
	return image
}

// TestDockerKernelOOMKill: a container the kernel kills for exceeding its
// memory limit is a trial failed with class oom (Docker's State.OOMKilled),
// not a launch error.
func TestDockerKernelOOMKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a container")
	}
	c := requireDocker(t)
	image := buildMemHog(t)
	study := testStudy(t)
	reapAfter(t, c, study)
	d := &Docker{Image: image, Client: c, NoGPU: true, MemoryBytes: 64 << 20, Command: []string{"--port", "{port}"},
		PollInterval: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := trial.Run(ctx, trial.Plan{
		Launcher: d, Spec: launcher.Spec{Model: "m", Study: study},
		ReadyTimeout: time.Minute, Levels: []measure.Load{{MaxConcurrency: 1}}, RequestsPerLevel: 1,
	})
	if res.Status != measure.StatusFailed || res.Failure != engine.FailOOM || !strings.Contains(res.Message, "out-of-memory killer") {
		t.Fatalf("trial = %s/%s %q, want failed/oom by the OOM killer; logs:\n%s", res.Status, res.Failure, res.Message, res.LogTail)
	}
	t.Logf("%s/%s: %s", res.Status, res.Failure, res.Message)
}

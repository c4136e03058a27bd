package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"gopkg.in/yaml.v3"
)

// Process launches an engine as a local process in its own process group, so
// Stop reaches the workers an engine forks (vLLM's tensor-parallel workers).
//
// Command is an argv template. In every element "{port}", "{host}" and
// "{model}" are replaced by the trial's values; an element that is exactly
// "{args}" expands to the rendered settings and extra flags (Spec.Args;
// when absent, they are appended).
type Process struct {
	Command      []string      // argv template, e.g. {"vllm", "serve", "{model}", "--port", "{port}", "{args}"}
	PassEnv      []string      // names of variables of this process handed to the engine (launcher.env)
	Dir          string        // working directory; "" = the current one
	Host         string        // address the engine binds and clients use; default 127.0.0.1
	HealthPath   string        // default /health
	LogBytes     int           // output tail kept for Logs; default DefaultLogBytes
	StopTimeout  time.Duration // SIGTERM→SIGKILL grace; default DefaultStopTimeout
	PollInterval time.Duration // between /health probes; default DefaultPollInterval
}

var _ Launcher = (*Process)(nil)

// Capabilities: a local process runs on this machine's GPUs (LocalGPUs),
// and what a killed run left is reaped by its environment (procreap.go).
func (p *Process) Capabilities() Capabilities {
	return Capabilities{Reap: p.Reap, LocalGPUs: true}
}

// Launch starts the command. The engine inherits this process's environment
// plus Spec.Env (values are passed to the child only, never logged).
func (p *Process) Launch(ctx context.Context, spec Spec) (Instance, error) {
	if len(p.Command) == 0 {
		return nil, fmt.Errorf("%w: process launcher has no command", ErrBadSpec)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	host := p.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := spec.Port
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	nonce := newNonce()
	args, err := spec.Args()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	argv := ExpandCommand(p.Command, spec.Model, args, host, port)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = append(append(append(os.Environ(), PassEnv(p.PassEnv, os.LookupEnv)...), spec.Env...), labelEnv(spec)...)
	cmd.Env = append(cmd.Env, engine.EnvEngineNonce+"="+nonce)
	logs := NewTailBuffer(p.LogBytes)
	cmd.Stdout = logs
	cmd.Stderr = logs
	// A grandchild that keeps the output pipes open must not block Wait forever.
	cmd.WaitDelay = 2 * time.Second
	if err := startEngine(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	in := &processInstance{
		cmd:         cmd,
		pgid:        cmd.Process.Pid,
		endpoint:    "http://" + HostPort(host, port),
		healthPath:  OrDefault(p.HealthPath, "/health"),
		nonce:       nonce,
		logs:        logs,
		exited:      make(chan struct{}),
		stopTimeout: p.StopTimeout,
		poll:        p.PollInterval,
	}
	if in.stopTimeout <= 0 {
		in.stopTimeout = DefaultStopTimeout
	}
	// The instance owns this goroutine: it ends when the process does, and
	// Stop waits for it.
	go in.wait()
	return in, nil
}

// ExpandCommand fills the placeholders of a command template: {port},
// {host} and {model} in every element, and an element that is exactly
// {args} with args (appended when the template has none).
func ExpandCommand(tmpl []string, model string, args []string, host string, port int) []string {
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{host}", host, "{model}", model)
	out := make([]string, 0, len(tmpl)+len(args))
	sawArgs := false
	for _, a := range tmpl {
		if a == "{args}" {
			out = append(out, args...)
			sawArgs = true
			continue
		}
		out = append(out, r.Replace(a))
	}
	if !sawArgs {
		out = append(out, args...)
	}
	return out
}

// OrDefault is s, or def when s is empty.
func OrDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type processInstance struct {
	cmd         *exec.Cmd
	pgid        int
	endpoint    string
	healthPath  string
	nonce       string // its identity (engine.EnvEngineNonce)
	logs        *TailBuffer
	stopTimeout time.Duration
	poll        time.Duration

	exited   chan struct{}
	exitCode int // written before exited is closed

	stopOnce sync.Once
	stopErr  error
}

var (
	_ Instance = (*processInstance)(nil)
	_ Exiter   = (*processInstance)(nil)
)

func init() {
	Register(Kind{
		Name: "process",
		Doc:  "the engine as a local command in its own process group (vllm serve, python3 -m sglang.launch_server, a wrapper script)",
		Keys: []Key{{Name: "command", Doc: "argv template: {model}, {host}, {port} are filled per trial and {args} becomes the rendered settings and extra_args", Required: true}},
		Decode: func(d *yamlpos.Decoder, keys map[string]*yaml.Node, c Common) Launcher {
			return &Process{Command: d.Strings(keys["command"], "launcher.command"), PassEnv: c.Env}
		},
		Cleanup: CleanupLocal("process"),
	})
}

func (in *processInstance) wait() {
	err := in.cmd.Wait()
	in.exitCode = exitCodeOf(in.cmd.ProcessState, err)
	close(in.exited)
}

// exitCodeOf follows the shell's convention, 128+N for death by signal N, so
// process and container exit codes read alike (137 = SIGKILL).
func exitCodeOf(st *os.ProcessState, err error) int {
	if st == nil {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func (in *processInstance) Endpoint() string { return in.endpoint }
func (in *processInstance) Logs() string     { return in.logs.String() }

func (in *processInstance) Exited() <-chan struct{} { return in.exited }

// Exit is valid once Exited is closed; before that its code is -1.
func (in *processInstance) Exit() engine.Exit {
	select {
	case <-in.exited:
		return engine.Exit{Code: in.exitCode}
	default:
		return engine.Exit{Code: -1}
	}
}

func (in *processInstance) Ready(ctx context.Context) error {
	return waitHealthy(ctx, in.endpoint+in.healthPath, in.nonce, in.poll, in.exited, func() error {
		return &ExitError{engine.Exit{Code: in.exitCode}}
	})
}

// Stop sends SIGTERM to the process group, waits up to the stop timeout (or
// until ctx ends), then SIGKILLs the group. It is safe to call more than once.
func (in *processInstance) Stop(ctx context.Context) error {
	in.stopOnce.Do(func() { in.stopErr = in.stop(ctx) })
	return in.stopErr
}

func (in *processInstance) stop(ctx context.Context) error {
	select {
	case <-in.exited:
	default:
		_ = syscall.Kill(-in.pgid, syscall.SIGTERM)
		t := time.NewTimer(in.stopTimeout)
		select {
		case <-in.exited:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// Kill what is left of the group even when the leader exited on its own:
	// orphaned workers would hold GPU memory for the next trial.
	if err := syscall.Kill(-in.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", in.pgid, err)
	}
	<-in.exited // bounded: SIGKILL cannot be ignored and WaitDelay caps pipe draining
	return nil
}

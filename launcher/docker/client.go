package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	"github.com/servetune/servetune/launcher"
)

// NewDockerClient connects to the Docker daemon at host: unix://, tcp:// (TLS
// from DOCKER_CERT_PATH/DOCKER_TLS_VERIFY as the docker CLI does) or
// ssh://[user@]host[:port]. "" means DOCKER_HOST, else the local socket. The
// API version is negotiated, so old daemons (Engine 20.10) work.
//
// For ssh:// the client runs `ssh [-l user] [-p port] -- host docker system
// dial-stdio` per connection, like the docker CLI: the remote user needs the
// docker CLI and access to the daemon, and ssh must log in without a prompt
// (keys or an agent).
func NewDockerClient(host string) (*client.Client, error) {
	if host == "" {
		host = os.Getenv(client.EnvOverrideHost)
	}
	opts := []client.Opt{client.WithTLSClientConfigFromEnv(), client.WithVersionFromEnv(), client.WithAPIVersionNegotiation()}
	switch {
	case strings.HasPrefix(host, "ssh://"):
		argv, err := sshDialStdio(host)
		if err != nil {
			return nil, err
		}
		opts = append(opts, viaCommand(argv)...)
	case host != "":
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: client for %s: %w", launcher.OrDefault(host, "the local daemon"), err)
	}
	return c, nil
}

// viaCommand sends every connection through a process's stdin and stdout.
// The host name is only a placeholder for the HTTP layer.
func viaCommand(argv []string) []client.Opt {
	return []client.Opt{client.WithHost("http://docker.example.com"), client.WithDialContext(commandDialer(argv))}
}

// sshDialStdio returns the ssh command line that reaches the daemon of an
// ssh:// DOCKER_HOST.
func sshDialStdio(host string) ([]string, error) {
	u, err := url.Parse(host)
	if err != nil || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("%w: docker host %q: want ssh://[user@]host[:port]", launcher.ErrBadSpec, host)
	}
	if strings.HasPrefix(u.Hostname(), "-") || strings.HasPrefix(u.User.Username(), "-") {
		return nil, fmt.Errorf("%w: docker host %q: user and host must not start with '-'", launcher.ErrBadSpec, host)
	}
	if _, hasPass := u.User.Password(); hasPass {
		return nil, fmt.Errorf("%w: docker host: passwords in ssh:// URLs are not supported; use keys or an agent", launcher.ErrBadSpec)
	}
	argv := []string{"ssh"}
	if name := u.User.Username(); name != "" {
		argv = append(argv, "-l", name)
	}
	if p := u.Port(); p != "" {
		argv = append(argv, "-p", p)
	}
	return append(argv, "--", u.Hostname(), "docker", "system", "dial-stdio"), nil
}

// commandDialer returns a dialer whose connections are the stdin and stdout
// of a new argv process each.
func commandDialer(argv []string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Not CommandContext: the dial context ends when the dial does, while
		// the connection lives on in the HTTP client's pool.
		cmd := exec.Command(argv[0], argv[1:]...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr := launcher.NewTailBuffer(4096)
		cmd.Stderr = stderr
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("docker: run %s: %w", argv[0], err)
		}
		return &cmdConn{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr}, nil
	}
}

// cmdConn is a net.Conn over a process's stdin and stdout. Deadlines are not
// supported (the HTTP client uses contexts instead).
type cmdConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *launcher.TailBuffer

	once     sync.Once
	closeErr error
}

func (c *cmdConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if errors.Is(err, io.EOF) {
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return n, fmt.Errorf("%s: %s: %w", c.cmd.Args[0], lastLine(msg), err)
		}
	}
	return n, err
}

func (c *cmdConn) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close ends the process and reaps it.
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait() // killed: its exit status says nothing
	})
	return c.closeErr
}

type cmdAddr struct{ s string }

func (a cmdAddr) Network() string { return "cmd" }
func (a cmdAddr) String() string  { return a.s }

func (c *cmdConn) LocalAddr() net.Addr              { return cmdAddr{"local"} }
func (c *cmdConn) RemoteAddr() net.Addr             { return cmdAddr{c.cmd.Args[0]} }
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

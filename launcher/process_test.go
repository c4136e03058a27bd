package launcher

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/proc"
)

func launchHelper(t *testing.T, p *Process, spec Spec) Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p.PollInterval == 0 {
		p.PollInterval = 20 * time.Millisecond
	}
	in, err := p.Launch(ctx, spec)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	return in
}

func TestProcessReadyServeStop(t *testing.T) {
	p := &Process{Command: helperCommand(t, "serve", "--port", "{port}", "--delay", "300ms", "--model", "{model}")}
	in := launchHelper(t, p, Spec{Model: "m", Env: []string{"SECRET_FOR_TEST=hunter2"}})
	if !strings.HasPrefix(in.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("Endpoint = %q", in.Endpoint())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\nlogs:\n%s", err, in.Logs())
	}
	// Spec.Env reaches the engine.
	resp, err := http.Get(in.Endpoint() + "/secret")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hunter2" {
		t.Errorf("engine saw secret %q, want the Spec.Env value", body)
	}
	if err := in.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ex := in.(Exiter)
	select {
	case <-ex.Exited():
	default:
		t.Fatal("Exited not closed after Stop")
	}
	if got := ex.Exit().Code; got != 128+int(syscall.SIGTERM) {
		t.Errorf("ExitCode = %d, want %d (SIGTERM)", got, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(in.Logs(), "serving on port") {
		t.Errorf("Logs lack the engine's stderr:\n%s", in.Logs())
	}
	if err := in.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestProcessExitBeforeReady(t *testing.T) {
	p := &Process{Command: helperCommand(t, "exit")}
	in := launchHelper(t, p, Spec{Model: "m"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := in.Ready(ctx)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Ready = %v, want ErrExited", err)
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Ready = %v, want *ExitError with code 3", err)
	}
	if !strings.Contains(in.Logs(), "No available memory for the cache blocks.") {
		t.Errorf("Logs lack the engine's message:\n%s", in.Logs())
	}
	if c := in.(Exiter).Exit().Code; c != 3 {
		t.Errorf("ExitCode = %d, want 3", c)
	}
}

func TestProcessStopKillsStubbornGroup(t *testing.T) {
	p := &Process{
		Command:     helperCommand(t, "stubborn", "--port", "{port}"),
		StopTimeout: 200 * time.Millisecond,
	}
	in := launchHelper(t, p, Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v\n%s", err, in.Logs())
	}
	m := regexp.MustCompile(`child=(\d+)`).FindStringSubmatch(in.Logs())
	if m == nil {
		t.Fatalf("no child pid in logs:\n%s", in.Logs())
	}
	child, _ := strconv.Atoi(m[1])
	if err := in.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c := in.(Exiter).Exit().Code; c != 128+int(syscall.SIGKILL) {
		t.Errorf("ExitCode = %d, want %d (SIGKILL after the grace period)", c, 128+int(syscall.SIGKILL))
	}
	// The grandchild was in the group: it must be gone (a zombie until init
	// reaps it counts as gone, so look at its state, not only kill(0)).
	ended, cancelEnded := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelEnded()
	if err := proc.WaitEnd(ended, child); err != nil {
		t.Fatalf("child %d survived Stop: %v", child, err)
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Field 3 is the state; the command name in field 2 may contain spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestProcessLogsBounded(t *testing.T) {
	p := &Process{Command: helperCommand(t, "spam", "--port", "{port}"), LogBytes: 4096}
	in := launchHelper(t, p, Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := in.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	logs := in.Logs()
	if len(logs) > 4096 {
		t.Errorf("Logs length %d > 4096", len(logs))
	}
	if !strings.Contains(logs, "END-OF-SPAM") {
		t.Errorf("Logs lost the tail:\n%s", logs)
	}
}

func TestProcessReadyContextEnds(t *testing.T) {
	p := &Process{Command: helperCommand(t, "serve", "--port", "{port}", "--delay", "1h")}
	in := launchHelper(t, p, Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := in.Ready(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready = %v, want DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("error does not name the last probe: %v", err)
	}
}

func TestProcessBadSpec(t *testing.T) {
	tests := []struct {
		name string
		p    Process
		want error
	}{
		{"no command", Process{}, ErrBadSpec},
		{"missing binary", Process{Command: []string{"/nonexistent/engine"}}, os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.p.Launch(context.Background(), Spec{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Launch = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestExpandCommand(t *testing.T) {
	spec := Spec{Model: "org/m", Extra: []string{"--tp", "2"}}
	tests := []struct {
		name string
		tmpl []string
		want string
	}{
		{"args placeholder", []string{"e", "--model={model}", "{args}", "--port", "{port}", "--host", "{host}"}, "e --model=org/m --tp 2 --port 9 --host h"},
		{"args appended", []string{"e", "{model}"}, "e org/m --tp 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(ExpandCommand(tt.tmpl, spec.Model, spec.Extra, "h", 9), " ")
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under", 8, []string{"ab", "cd"}, "abcd"},
		{"exact", 4, []string{"ab", "cd"}, "abcd"},
		{"over", 4, []string{"abc", "def", "gh"}, "efgh"},
		{"one big write", 3, []string{"abcdefgh"}, "fgh"},
		{"many trims", 2, []string{"a", "b", "c", "d", "e", "f", "g"}, "fg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewTailBuffer(tt.max)
			for _, w := range tt.writes {
				if n, _ := b.Write([]byte(w)); n != len(w) {
					t.Fatalf("Write returned %d", n)
				}
			}
			if got := b.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	p := &Process{Command: helperCommand(t, "serve", "--port", "{port}")}
	srv := launchHelper(t, p, Spec{})
	tests := []struct {
		name    string
		url     string
		wantErr error
	}{
		{"running server", srv.Endpoint() + "/", nil},
		{"bad scheme", "ftp://x", ErrBadSpec},
		{"empty", "", ErrBadSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := (&Endpoint{URL: tt.url, PollInterval: 20 * time.Millisecond}).Launch(context.Background(), Spec{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Launch = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if in.Endpoint() != srv.Endpoint() {
				t.Errorf("Endpoint = %q, want %q", in.Endpoint(), srv.Endpoint())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := in.Ready(ctx); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			if err := in.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			// Stop left the server alone.
			if err := in.Ready(ctx); err != nil {
				t.Fatalf("Ready after Stop: %v", err)
			}
		})
	}
}

// BenchmarkTailBufferWrite measures the cost an engine's log line adds.
func BenchmarkTailBufferWrite(b *testing.B) {
	line := []byte(strings.Repeat("x", 119) + "\n")
	buf := NewTailBuffer(DefaultLogBytes)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		_, _ = buf.Write(line)
	}
}

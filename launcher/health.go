package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// DefaultPollInterval is how often Ready asks an engine's /health.
const DefaultPollInterval = 200 * time.Millisecond

// healthClient is shared by all instances: each probe carries its own deadline.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// WaitHealthy polls url until it answers 200, exited is closed (then it
// returns exitErr()), or ctx ends. exited may be nil for engines nobody owns.
func WaitHealthy(ctx context.Context, url string, every time.Duration, exited <-chan struct{}, exitErr func() error) error {
	return waitHealthy(ctx, url, "", every, exited, exitErr)
}

// waitHealthy is WaitHealthy that, given the nonce the engine was started
// with, refuses a 200 carrying another one (engine.NonceHeader): another
// engine that took the port chosen for this one, whose answers would
// otherwise be measured as this trial's. It keeps polling: the engine
// started here fails to bind the port and exits, which it reports.
func waitHealthy(ctx context.Context, url, nonce string, every time.Duration, exited <-chan struct{}, exitErr func() error) error {
	if every <= 0 {
		every = DefaultPollInterval
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("engine not ready at %s: %w (last probe: %v)", url, ctx.Err(), last)
			}
			return fmt.Errorf("engine not ready at %s: %w", url, ctx.Err())
		case <-exited:
			return exitErr()
		case <-t.C:
		}
		ok, err := probe(ctx, url, nonce, every)
		if ok {
			return nil
		}
		if ctx.Err() == nil { // keep the server's last answer, not our own deadline
			last = err
		}
		t.Reset(every)
	}
}

// probe makes one GET with a timeout of a few poll intervals, so a server
// that accepts but never answers does not stall Ready past ctx.
func probe(ctx context.Context, url, nonce string, every time.Duration) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, max(5*every, 2*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if got := resp.Header.Get(engine.NonceHeader); nonce != "" && got != "" && got != nonce {
		return false, fmt.Errorf("GET %s: answered by another engine (its identity %.8s..., not this one's): another process holds the port", url, got)
	}
	return true, nil
}

// newNonce is a random identity for an engine to be started.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// freePort picks the port of an engine to be started (a test narrows it).
var freePort = FreePort

// FreePort asks the kernel for an unused loopback port. Another process may
// take it before the engine binds it: the engine then fails to start and the
// trial reports that, and the readiness check refuses the other process's
// answers (each engine carries its own nonce, engine.EnvEngineNonce).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// HostPort joins a host and a port for a URL.
func HostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

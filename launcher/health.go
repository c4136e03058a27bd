package launcher

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultPollInterval is how often Ready asks an engine's /health.
const DefaultPollInterval = 200 * time.Millisecond

// healthClient is shared by all instances: each probe carries its own deadline.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// WaitHealthy polls url until it answers 200, exited is closed (then it
// returns exitErr()), or ctx ends. exited may be nil for engines nobody owns.
func WaitHealthy(ctx context.Context, url string, every time.Duration, exited <-chan struct{}, exitErr func() error) error {
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
		ok, err := probe(ctx, url, every)
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
func probe(ctx context.Context, url string, every time.Duration) (bool, error) {
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
	return true, nil
}

// FreePort asks the kernel for an unused loopback port. Another process may
// take it before the engine binds it; the engine then fails to start and the
// trial reports that, which is rare enough not to retry here.
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

// Package httpserve is the one listen, ready, serve-until-cancelled
// sequence of the project's HTTP servers (the dashboard, the simulated
// engine and its router), the one test of whether a host is this
// machine's loopback, and a listener that caps the connections one
// address holds.
//
//	err := httpserve.ListenAndServe(ctx, &http.Server{Addr: "127.0.0.1:0", Handler: h}, 5*time.Second,
//		httpserve.Hooks{Ready: func(a net.Addr) { log.Printf("listening on %s", a) }})
//
// ListenAndServe, ServeListener and Serve return once the server has
// stopped; each call owns its server and listener, and calls for different
// servers may run at once.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Hooks are what a server does at the steps of ListenAndServe; each may be
// nil.
type Hooks struct {
	// Listener wraps the bound listener before serving (PerHostLimit),
	// and may read its address.
	Listener func(net.Listener) net.Listener
	// Ready receives the bound address (srv.Addr may ask for port 0)
	// before the first connection is served: a caller may connect once it
	// returns.
	Ready func(net.Addr)
	// Stopping runs when ctx ends, before the shutdown (Serve).
	Stopping func()
}

// ListenAndServe listens on srv.Addr over TCP and serves srv on that
// listener (ServeListener). A listen failure is "listen ADDR: ...".
func ListenAndServe(ctx context.Context, srv *http.Server, grace time.Duration, h Hooks) error {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", srv.Addr, err)
	}
	return ServeListener(ctx, srv, ln, grace, h)
}

// ServeListener runs h.Listener and h.Ready on ln and serves srv on it
// until ctx ends or serving fails (Serve, with grace and h.Stopping).
// ListenAndServe hands it a TCP listener; a test hands it an in-memory
// one, whose connections a testing/synctest bubble can wait on.
func ServeListener(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, h Hooks) error {
	if h.Listener != nil {
		ln = h.Listener(ln)
	}
	if h.Ready != nil {
		h.Ready(ln.Addr())
	}
	return Serve(ctx, srv, ln, grace, h.Stopping)
}

// Serve serves srv on ln until ctx ends or serving fails. When ctx ends it
// calls stopping (if not nil: what a graceful shutdown would otherwise
// wait for, such as event streams or the engine behind the handler), then
// shuts srv down, waiting up to grace for requests in flight. The error is
// serving's ("serve: ...") or the shutdown's ("shutdown: ..."); nil after a
// clean shutdown.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, stopping func()) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if stopping != nil {
		stopping()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// IsLoopback reports whether host names this machine's loopback:
// localhost (any case) or an address in 127.0.0.0/8 or ::1. It takes a
// name or IP, bracketed or not, with or without a port ("host:port", as
// in a listen address or a request's Host); an empty host (listen on
// every interface) is not loopback.
func IsLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// PerHostLimit wraps ln so that one remote address holds at most n of its
// connections at once: past them a new connection from that address is
// answered 503 (the reason in one line) and closed as it is accepted, so
// connections held open by one client (headers sent a byte a second,
// reconnecting) cannot take every place a server has and starve a client
// elsewhere.
func PerHostLimit(ln net.Listener, n int) net.Listener {
	return &hostLimit{Listener: ln, n: n, open: map[string]int{}}
}

type hostLimit struct {
	net.Listener
	n    int
	mu   sync.Mutex
	open map[string]int
}

func (l *hostLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		l.mu.Lock()
		full := l.open[host] >= l.n
		if !full {
			l.open[host]++
		}
		l.mu.Unlock()
		if full {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nRetry-After: 30\r\n\r\n%d connections from %s are open, the most one address may hold\n", l.n, host)
			_ = c.Close()
			continue
		}
		return &hostConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *hostLimit) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// hostConn gives its place back once, on its first Close.
type hostConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *hostConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// Relay writes an upstream response to w as it arrives: the named
// headers (when upstream set them), the status, then the body, each read
// flushed at once so a stream of server-sent events keeps its pacing. It
// returns when the body ends or the client goes away.
func Relay(w http.ResponseWriter, resp *http.Response, headers ...string) {
	for _, h := range headers {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

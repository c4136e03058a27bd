// Package httpserve is the one serve-until-cancelled sequence of the
// project's HTTP servers (the dashboard, the simulated engine) and the one
// test of whether a host is this machine's loopback.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

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

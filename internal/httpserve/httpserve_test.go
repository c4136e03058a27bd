package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "localhost": true, "LocalHost": true, "::1": true, "[::1]": true,
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "127.0.0.2:1": true,
		"10.0.0.5": false, "gpu-a.internal": false, "0.0.0.0": false, "": false, "fe80::1%eth0": false,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.7:8080": false, "example.com:80": false, "nonsense": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestServe: a request is served; when ctx ends, stopping runs before the
// shutdown and Serve returns nil; a listener that fails is serving's error.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, srv, ln, time.Second, func() { close(stopped) }) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("body %q", b)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("stopping not called")
	}

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2.Close()
	err = Serve(context.Background(), &http.Server{}, ln2, time.Second, func() { t.Error("stopping called on a serve error") })
	if err == nil || !strings.HasPrefix(err.Error(), "serve: ") {
		t.Errorf("Serve on a closed listener: %v", err)
	}
}

// TestListenAndServe: the listener hook wraps the bound listener and
// Ready gets the bound address before a request is served there; a port in
// use is a listen error naming the address, with no hook run.
func TestListenAndServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wrapped bool
	ready := make(chan net.Addr, 1)
	srv := &http.Server{Addr: "127.0.0.1:0", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	errc := make(chan error, 1)
	go func() {
		errc <- ListenAndServe(ctx, srv, time.Second, Hooks{
			Listener: func(ln net.Listener) net.Listener { wrapped = true; return ln },
			Ready:    func(a net.Addr) { ready <- a },
		})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("ListenAndServe before ready: %v", err)
	}
	if !wrapped {
		t.Error("Ready ran before the listener hook")
	}
	resp, err := http.Get("http://" + addr.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("body %q", b)
	}

	busy := &http.Server{Addr: addr.String()}
	err = ListenAndServe(context.Background(), busy, time.Second, Hooks{
		Listener: func(net.Listener) net.Listener { t.Error("listener hook on a failed listen"); return nil },
		Ready:    func(net.Addr) { t.Error("ready on a failed listen") },
	})
	if err == nil || !strings.HasPrefix(err.Error(), "listen "+addr.String()+": ") {
		t.Errorf("ListenAndServe on a port in use: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("ListenAndServe after cancel: %v", err)
	}
}

package sim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestServeBusyPort: `sim serve` on a port in use fails at once with the
// listen error, instead of loading and then hanging.
func TestServeBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv, err := NewServer(mustParse(t, "meta-llama/Llama-3.1-8B-Instruct", "--sim-load-time", "30s"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(context.Background(), l.Addr().String(), nil) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("ListenAndServe on a busy port: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ListenAndServe on a busy port did not return")
	}
}

// TestServeBadBodies: a body over the limit is 413 "too large" (not
// invalid JSON), and a body that stalls after the headers is answered 408
// and its connection freed.
func TestServeBadBodies(t *testing.T) {
	_, url := startServer(t, "meta-llama/Llama-3.1-8B-Instruct", "--sim-load-time", "0")

	big := strings.NewReader(`{"prompt": "` + strings.Repeat("a", maxBodyBytes+10) + `"}`)
	resp, err := http.Post(url+"/v1/completions", "application/json", big)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too large") {
		t.Errorf("big body: %d %s", resp.StatusCode, b)
	}

	old := bodyTimeout
	bodyTimeout = 300 * time.Millisecond
	defer func() { bodyTimeout = old }()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\": ")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "408") {
		t.Errorf("stalled body: %q, %v; want 408 within the body timeout", status, err)
	}
}

// TestServeSilentClient: a connection that sends no headers at all is
// closed after the header timeout instead of being held forever.
func TestServeSilentClient(t *testing.T) {
	old := headerTimeout
	headerTimeout = 300 * time.Millisecond
	defer func() { headerTimeout = old }()
	srv, err := NewServer(mustParse(t, "meta-llama/Llama-3.1-8B-Instruct", "--sim-load-time", "0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "127.0.0.1:0", func(a net.Addr) { addr <- a }) }()
	defer func() { cancel(); <-done }()
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = conn.Read(make([]byte, 1))
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("a silent connection: read %v after %v; want it closed by the server within the header timeout", err, time.Since(start))
	}
}

// TestServeBodiesBudget: the bodies a server holds at once are bounded in
// sum, not only each: with two 60 MB bodies arriving, a third waits for
// room and is answered 503 naming the cap (eight such bodies took the
// server to 1.34 GB); once one ends, a new request is served.
func TestServeBodiesBudget(t *testing.T) {
	old := admitWait
	admitWait = 300 * time.Millisecond
	defer func() { admitWait = old }()
	srv, url := startServer(t, "meta-llama/Llama-3.1-8B-Instruct", "--sim-load-time", "0")
	host := strings.TrimPrefix(url, "http://")
	const size = 60 << 20
	open := func() net.Conn {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"prompt\": \"", size)
		return conn
	}
	a, b := open(), open()
	defer b.Close()
	for {
		srv.bodies.mu.Lock()
		used := srv.bodies.used
		srv.bodies.mu.Unlock()
		if used == 2*size {
			break
		}
		runtime.Gosched()
	}
	c := open()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), fmt.Sprint(maxBodiesBytes)) {
		t.Errorf("a third 60 MB body: %d %s; want 503 naming the cap", resp.StatusCode, body)
	}
	a.Close() // its handler ends, its bytes return
	r, text := post(t, url+"/v1/completions", `{"prompt": "hello there", "max_tokens": 2}`)
	if r.StatusCode != http.StatusOK {
		t.Errorf("after a body ended: %d %s", r.StatusCode, text)
	}
}

// TestServeOutOfVocabulary: a prompt of token ids outside the model's
// vocabulary is refused 400, in vLLM's words, not served.
func TestServeOutOfVocabulary(t *testing.T) {
	_, url := startServer(t, "meta-llama/Llama-3.1-8B-Instruct", "--sim-load-time", "0")
	for _, ids := range []string{"[1, -1]", "[99999999999]", "[128256]"} {
		r, text := post(t, url+"/v1/completions", `{"prompt": `+ids+`, "max_tokens": 2}`)
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(text, "out of vocabulary") {
			t.Errorf("prompt %s: %d %s", ids, r.StatusCode, text)
		}
	}
	if r, text := post(t, url+"/v1/completions", `{"prompt": [1, 128255], "max_tokens": 2}`); r.StatusCode != http.StatusOK {
		t.Errorf("ids in the vocabulary: %d %s", r.StatusCode, text)
	}
}

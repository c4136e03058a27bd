package sim

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawStream sends a streaming completions request on a fresh connection in
// the given protocol version and returns the connection and parsed response.
func rawStream(t *testing.T, url, proto string, maxTokens int) (net.Conn, *http.Response) {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"model":"llama-3.1-8b","prompt":"a b c d","max_tokens":` + strconv.Itoa(maxTokens) + `,"stream":true,"stream_options":{"include_usage":true}}`
	req := "POST /v1/completions " + proto + "\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, resp
}

// TestServerStreamFraming checks the hijacked stream's HTTP framing as a
// strict reader sees it: chunked on HTTP/1.1 (the chunked reader rejects
// any framing error), Connection: close, and the plain net/http path on
// HTTP/1.0 (no chunking there).
func TestServerStreamFraming(t *testing.T) {
	_, url := startServer(t, "llama-3.1-8b", "--max-model-len", "2048", "--time-scale", "50", "--sim-load-time", "0")
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			_, resp := rawStream(t, url, proto, 6)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("body: %v", err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Request-Id") == "" || !resp.Close {
				t.Fatalf("status %d header %v close %v", resp.StatusCode, resp.Header, resp.Close)
			}
			if chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"; chunked != (proto == "HTTP/1.1") {
				t.Errorf("transfer encoding %v on %s", resp.TransferEncoding, proto)
			}
			data := sseData(t, string(b))
			if len(data) != 8 || data[7] != "[DONE]" || !strings.Contains(data[5], `"finish_reason":"length"`) || !strings.Contains(data[6], `"completion_tokens":6`) {
				t.Fatalf("stream: %q", data)
			}
		})
	}
}

// running reads vllm:num_requests_running from /metrics.
func running(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "vllm:num_requests_running") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v)
		}
	}
	t.Fatalf("no vllm:num_requests_running in %s", b)
	return 0
}

// TestServerStreamDisconnect checks that a client leaving mid-stream aborts
// its request in the engine.
func TestServerStreamDisconnect(t *testing.T) {
	srv, url := startServer(t, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0")
	conn, resp := rawStream(t, url, "HTTP/1.1", 3000) // ~20 s of real time
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q: %v", line, err)
	}
	if n := running(t, url); n != 1 {
		t.Fatalf("%d running, want 1", n)
	}
	conn.Close()
	srv.await(t, "the request still runs after its client left", func(m *metrics) bool { return m.running == 0 })
	if n := running(t, url); n != 0 {
		t.Fatalf("/metrics says %d running after the engine's figures said none", n)
	}
}

// TestServerStreamShutdown checks that a stream in flight when the engine
// stops ends with an in-stream error and a well-formed end of response.
func TestServerStreamShutdown(t *testing.T) {
	srv, err := NewServer(mustParse(t, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	<-srv.Loaded()
	_, resp := rawStream(t, hs.URL, "HTTP/1.1", 3000)
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("body after shutdown: %v", err)
	}
	data := sseData(t, string(rest))
	if len(data) == 0 || !strings.Contains(data[len(data)-1], `"message":"engine shut down"`) {
		t.Fatalf("stream after shutdown: %q", data)
	}
}

// postStream posts without failing the test from another goroutine.
func postStream(t *testing.T, url, body string) (*http.Response, string) {
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return &http.Response{}, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp, string(b)
}

// await returns once cond holds of the engine's published figures,
// checking at each publish (every engine step and every idle turn); it
// fails the test after 15 s, a bound that only keeps a broken engine
// from hanging it.
func (s *Server) await(t *testing.T, what string, cond func(m *metrics) bool) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		m := s.metrics
		m.mu.Lock()
		ok, next := cond(m), m.published
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatal(what)
		}
	}
}

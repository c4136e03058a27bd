//go:build unix

package sim

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func setRecvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}

// TestServerStreamSlowClient checks that a client that stops reading stalls
// only its own stream: streams sharing its writer still complete, and it is
// aborted when it leaves.
func TestServerStreamSlowClient(t *testing.T) {
	// At time scale 100 the stuck stream reaches 40,000 tokens in about 3 s
	// and has 90,000 more to generate (about 6 s): it is still running when
	// the streams beside it are checked, even on a loaded machine (at 1000
	// and 60,000 tokens it could finish first).
	srv, url := startServer(t, "llama-3.1-8b", "--max-model-len", "131072", "--time-scale", "100", "--sim-load-time", "0")
	addr := strings.TrimPrefix(url, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = setRecvBuf(fd, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"a b c d","max_tokens":130000,"stream":true}`
	if _, err := io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	// 40,000 messages (8 MB) are past any socket buffers: the stream is
	// stuck on its client from here on.
	srv.await(t, "the stream never generated 40,000 tokens", func(m *metrics) bool { return m.genTokens >= 40000 })
	var wg sync.WaitGroup
	for range 2 * len(srv.writers) {
		wg.Go(func() {
			resp, body := postStream(t, url, `{"prompt":"x y","max_tokens":20,"stream":true}`)
			if data := sseData(t, body); resp.StatusCode != 200 || len(data) != 21 || data[20] != "[DONE]" {
				t.Errorf("stream beside a stuck one: %d %q", resp.StatusCode, data)
			}
		})
	}
	wg.Wait()
	if n := running(t, url); n != 1 {
		t.Fatalf("%d running, want the stuck stream alone", n)
	}
	conn.Close()
	srv.await(t, "the stuck request still runs after its client left", func(m *metrics) bool { return m.running == 0 })
}

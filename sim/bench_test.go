package sim

import (
	"bytes"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRunVirtual10k is the `sim run` speed goal: 10,000 requests of 512
// in / 128 out at concurrency 256 in virtual time.
func BenchmarkRunVirtual10k(b *testing.B) {
	cfg := mustParse(b, "llama-3.1-8b", "--max-model-len", "4096")
	reqs := fixedReqs(10000, 512, 128)
	sched := make([]time.Duration, len(reqs))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RunVirtualSchedule(cfg, reqs, sched, 256); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServe1000Streams is the `sim serve` goal: 1,000 concurrent
// streaming requests on loopback. It reports the server-side emission
// lateness at p50 and p99, measured inside the server against the scheduled
// end of the engine step that produced each message: "engine" when the
// engine loop hands the token to its stream (its writer), "write" when the
// message's bytes have been handed to the kernel (the write returned). Lateness counts from the moment every
// stream has received its first token (the steady state of 1,000 open
// streams), not during the connection storm at the start. The clients are minimal raw HTTP/1.1
// readers so that, on a small machine, they take as little CPU from the
// server as possible.
func BenchmarkServe1000Streams(b *testing.B) {
	streams, outTokens := benchStreams, 128
	srv, url := startServer(b, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0")
	addr := strings.TrimPrefix(url, "http://")
	body := `{"model":"llama-3.1-8b","prompt":"` + strings.Repeat("tok ", 100) + `","max_tokens":128,"stream":true}`
	req := "POST /v1/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	for b.Loop() {
		var wg, started sync.WaitGroup
		var failed atomic.Int64
		started.Add(streams)
		for range streams {
			wg.Go(func() {
				first := false
				defer func() {
					if !first {
						started.Done()
					}
				}()
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					failed.Add(1)
					return
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, req); err != nil {
					failed.Add(1)
					return
				}
				var all []byte
				buf := make([]byte, 4096)
				for {
					n, err := conn.Read(buf)
					all = append(all, buf[:n]...)
					if !first && bytes.Contains(all, []byte("data: {")) {
						first = true
						started.Done()
					}
					if err != nil {
						break
					}
				}
				if n := bytes.Count(all, []byte("data: {")); n != outTokens {
					failed.Add(1)
				}
			})
		}
		// Measure the steady state: every stream connected and streaming.
		started.Wait()
		srv.ResetLateness()
		wg.Wait()
		if f := failed.Load(); f > 0 {
			b.Fatalf("%d streams failed", f)
		}
	}
	b.ReportMetric(float64(srv.HandoffLateness(0.5).Microseconds())/1e3, "p50-engine-late-ms")
	b.ReportMetric(float64(srv.HandoffLateness(0.99).Microseconds())/1e3, "p99-engine-late-ms")
	b.ReportMetric(float64(srv.EmitLateness(0.5).Microseconds())/1e3, "p50-write-late-ms")
	b.ReportMetric(float64(srv.EmitLateness(0.99).Microseconds())/1e3, "p99-write-late-ms")
}

// benchStreams is the stream count of BenchmarkServe1000Streams; a variable
// so a quick run can lower it.
var benchStreams = func() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_BENCH_STREAMS")); err == nil && n > 0 {
		return n
	}
	return 1000
}()

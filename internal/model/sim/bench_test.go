package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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
// message's bytes have been handed to the kernel (the write returned).
// Lateness counts from the moment every stream has received its first token
// (the steady state of 1,000 open streams), not during the connection storm
// at the start. The clients (runClients) run in this process.
func BenchmarkServe1000Streams(b *testing.B) { benchServe(b, false) }

// BenchmarkServe1000StreamsExternal is BenchmarkServe1000Streams with the
// clients in a child process (this test binary, running
// TestServeBenchClients), as a load generator runs against a real engine:
// the clients' reader goroutines then do not share the server's Go
// scheduler and run queues, but still compete with it for the same CPUs
// through the kernel's scheduler. Report both.
func BenchmarkServe1000StreamsExternal(b *testing.B) { benchServe(b, true) }

func benchServe(b *testing.B, external bool) {
	streams, outTokens := benchStreams, 128
	srv, url := startServer(b, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0")
	addr := strings.TrimPrefix(url, "http://")
	for b.Loop() {
		var failed int
		if external {
			failed = externalClients(b, srv, addr, streams)
		} else {
			failed = runClients(addr, streams, outTokens, srv.ResetLateness)
		}
		if failed > 0 {
			b.Fatalf("%d streams failed", failed)
		}
	}
	b.ReportMetric(float64(srv.HandoffLateness(0.5).Microseconds())/1e3, "p50-engine-late-ms")
	b.ReportMetric(float64(srv.HandoffLateness(0.99).Microseconds())/1e3, "p99-engine-late-ms")
	b.ReportMetric(float64(srv.EmitLateness(0.5).Microseconds())/1e3, "p50-write-late-ms")
	b.ReportMetric(float64(srv.EmitLateness(0.99).Microseconds())/1e3, "p99-write-late-ms")
}

// runClients runs the benchmark's streams against addr: minimal raw
// HTTP/1.1 readers, so that, on a small machine, they take as little CPU
// from the server as possible. It calls started once every stream has
// received its first token (the steady state of all streams open; the
// connection storm at the start is not measured) and returns the number of
// streams that failed or did not get outTokens messages.
func runClients(addr string, streams, outTokens int, started func()) int {
	body := `{"model":"llama-3.1-8b","prompt":"` + strings.Repeat("tok ", 100) + `","max_tokens":` + strconv.Itoa(outTokens) + `,"stream":true}`
	req := "POST /v1/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	var wg, first sync.WaitGroup
	var failed atomic.Int64
	first.Add(streams)
	for range streams {
		wg.Go(func() {
			got := false
			defer func() {
				if !got {
					first.Done()
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
				if !got && bytes.Contains(all, []byte("data: {")) {
					got = true
					first.Done()
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
	first.Wait()
	started()
	wg.Wait()
	return int(failed.Load())
}

// externalClients runs runClients in a child process and returns its
// failure count; the child says on its stdout when every stream started.
func externalClients(b *testing.B, srv *Server, addr string, streams int) int {
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeBenchClients$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SIM_BENCH_CLIENTS_ADDR="+addr, "SIM_BENCH_STREAMS="+strconv.Itoa(streams))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	failed := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if line == "clients: started" {
			srv.ResetLateness()
		}
		if v, ok := strings.CutPrefix(line, "clients: failed "); ok {
			failed, _ = strconv.Atoi(v)
		}
	}
	if err := cmd.Wait(); err != nil || failed < 0 {
		b.Fatalf("client process: %v (failed %d)", err, failed)
	}
	return failed
}

// TestServeBenchClients is the client process of
// BenchmarkServe1000StreamsExternal; it skips unless started by it.
func TestServeBenchClients(t *testing.T) {
	addr := os.Getenv("SIM_BENCH_CLIENTS_ADDR")
	if addr == "" {
		t.Skip("the client process of BenchmarkServe1000StreamsExternal")
	}
	failed := runClients(addr, benchStreams, 128, func() { fmt.Println("clients: started") })
	fmt.Println("clients: failed", failed)
}

// benchStreams is the stream count of BenchmarkServe1000Streams; a variable
// so a quick run can lower it.
var benchStreams = func() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_BENCH_STREAMS")); err == nil && n > 0 {
		return n
	}
	return 1000
}()

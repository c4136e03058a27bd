package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// serverEnv carries a fakeServer's settings (JSON) to a child process of the
// test binary that serves it; see TestMain.
const serverEnv = "SERVETUNE_BENCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(serverEnv); cfg != "" {
		serveChild(cfg)
		return
	}
	os.Exit(m.Run())
}

// serveChild runs a fakeServer until its stdin closes (the parent exits or
// kills it). It prints its address on the first line of stdout.
func serveChild(cfg string) {
	var fs fakeServer
	if err := json.Unmarshal([]byte(cfg), &fs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_log", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(fs.wallLog())
	})
	mux.Handle("/", &fs)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }() // ends when the process exits
	fmt.Println(ln.Addr().String())
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // EOF when the parent goes
	os.Exit(0)
}

// wallLog is the server's record as Unix nanoseconds (the wall clock is
// shared by processes; monotonic readings are not).
func (f *fakeServer) wallLog() map[string][]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]int64, len(f.byText))
	for p, ts := range f.byText {
		ns := make([]int64, len(ts))
		for i, t := range ts {
			ns[i] = t.UnixNano()
		}
		out[p] = ns
	}
	return out
}

// childServer is a fakeServer running in its own process, so that its CPU
// use is scheduled by the OS apart from the client under test, as a real
// engine would be.
type childServer struct {
	URL string
}

func startChild(t testing.TB, fs *fakeServer) *childServer {
	t.Helper()
	cfg, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	// The server runs at a lower CPU priority (nice 10) when nice exists:
	// on a 2-core machine its writes and the client's reads compete, and
	// the client's timestamps are what is under test. The truth is the
	// server's own write times, so the server being late costs nothing.
	args := []string{os.Args[0], "-test.run=^$"}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "10"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), serverEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("test server process: %v", err)
	}
	return &childServer{URL: "http://" + strings.TrimSpace(line)}
}

// log fetches the child's record: prompt -> chunk write times.
func (c *childServer) log(t testing.TB) map[string][]time.Time {
	t.Helper()
	resp, err := http.Get(c.URL + "/_log")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string][]int64
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]time.Time, len(raw))
	for p, ns := range raw {
		ts := make([]time.Time, len(ns))
		for i, n := range ns {
			ts[i] = time.Unix(0, n)
		}
		out[p] = ts
	}
	return out
}

// truthFor pairs each measured record with the server's record of the same
// prompt and returns true TTFT (server's first write − client's send) and
// the true gaps between the server's writes, in ms. Wall-clock instants:
// the server is another process.
func truthFor(t testing.TB, res *Result, reqs []measure.Request, log map[string][]time.Time) (ttft, itl []float64) {
	t.Helper()
	start := time.Unix(0, res.Start.UnixNano()) // wall reading only
	for _, r := range res.Records {
		if r.Warmup || r.Error != measure.ErrNone {
			continue
		}
		w, ok := log[reqs[r.Index].Prompt]
		if !ok || len(w) == 0 {
			t.Fatalf("request %d: no server record", r.Index)
		}
		ttft = append(ttft, ms(w[0].Sub(start.Add(r.Send))))
		for j := 1; j < len(w); j++ {
			itl = append(itl, ms(w[j].Sub(w[j-1])))
		}
	}
	return ttft, itl
}

package ui

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	_ "github.com/servetune/servetune/launcher/kinds" // the spec's virtual launcher
	"github.com/servetune/servetune/store"
	_ "github.com/servetune/servetune/tuner" // the sampler kinds a spec may name, as in the servetune binary
)

const hubSpec = `name: big
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  max_running_requests: {int: [16, 512]}
workload:
  dataset: {kind: random, input: {lognormal: {median: 256, sigma: 0.5}}, output: {uniform: [32, 96]}}
  load: {concurrency: [8]}
  requests_per_level: 100
slo: {ttft_p99_ms: 800, tpot_p99_ms: 50}
tuner: {sampler: random, trials: 400, seed: 3, confirm: false}
`

// bigStudy stores a study of n finished trials, one level each.
func bigStudy(t testing.TB, n int, finish bool) (*store.Store, store.Study) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "big.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := db.CreateStudy(ctx, store.Study{Name: "big", Spec: hubSpec, Seed: 3, Tool: "servetune test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		addTrial(t, db, st, i)
	}
	if finish {
		if err := db.FinishStudy(ctx, st.ID, store.StudyFinished); err != nil {
			t.Fatal(err)
		}
	}
	return db, st
}

func addTrial(t testing.TB, db *store.Store, st store.Study, i int) {
	t.Helper()
	ctx := context.Background()
	set := engine.Settings{"max_running_requests": 16 + i}
	if err := db.StartTrial(ctx, st.ID, i, set, []int{0}); err != nil {
		t.Fatal(err)
	}
	sum := measure.Summary{Completed: 100, Duration: 10, OutputThroughput: 1000 + float64(i), RequestThroughput: 10, RequestGoodput: 9,
		Errors: map[string]int{}, TTFT: measure.Stats{N: 100, Median: 200, P99: 400}, TPOT: measure.Stats{N: 100, Median: 20, P99: 30},
		E2EL: measure.Stats{N: 100, Median: 2000, P99: 3000}}
	obj := 1000 + float64(i)
	if err := db.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: i, Status: measure.StatusOK, Objective: &obj,
		LoadPoints: []measure.Level{measure.NewLevel(measure.Load{MaxConcurrency: 8}, sum, nil)}}); err != nil {
		t.Fatal(err)
	}
}

// sseClient is a real EventSource-like client: it counts the fragments
// it receives by id.
type sseClient struct {
	mu    sync.Mutex
	frags map[string]int
	last  map[string]string
	cond  chan struct{}
}

func openStream(t *testing.T, ctx context.Context, client *http.Client, url string) (*sseClient, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &sseClient{frags: map[string]int{}, last: map[string]string{}, cond: make(chan struct{}, 1)}
	if resp.StatusCode != http.StatusOK {
		return c, resp
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			id := line[strings.Index(line, `"id":"`)+6:]
			id = id[:strings.IndexByte(id, '"')]
			c.mu.Lock()
			c.frags[id]++
			c.last[id] = line
			c.mu.Unlock()
			select {
			case c.cond <- struct{}{}:
			default:
			}
		}
	}()
	return c, resp
}

// waitFor waits until ok holds of the client's fragments, waking on each
// fragment the client receives; in a synctest bubble the deadline is on
// the fake clock, which moves only while everything waits.
func (c *sseClient) waitFor(t *testing.T, what string, ok func(frags map[string]int, last map[string]string) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		done := ok(c.frags, c.last)
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.cond:
		case <-deadline:
			t.Fatalf("client never saw %s", what)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pipeListener is an in-memory listener whose connections are net.Pipe
// pairs. In a synctest bubble a read on a pipe blocks durably, as a read
// on a socket does not, so the fake clock moves on while the server, its
// hubs and its clients all wait on each other.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a loopback address, so that Serve turns on its Host check as it
// does on 127.0.0.1.
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// DialContext returns the client's end of a new pipe once the server has
// accepted the other end.
func (l *pipeListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	var err error
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	server.Close()
	client.Close()
	return nil, err
}

// servePiped serves srv (Serve, on a pipeListener) until the test ends,
// and returns the base URL with a client that dials the listener. It runs
// inside a synctest bubble, as do the server's goroutines it starts; the
// test's cleanup stops the server and waits for it, so that no goroutine
// of the bubble outlives it.
func servePiped(t *testing.T, srv *Server) (base string, client *http.Client, ln *pipeListener) {
	t.Helper()
	ln = newPipeListener()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.serve(ctx, "", ln, nil) }()
	tr := &http.Transport{DialContext: ln.DialContext}
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		tr.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String(), &http.Client{Transport: tr}, ln
}

// TestFinishedStudyRendersOnce opens 50 live pages on a finished
// 300-trial study: the study is read and rendered once for all of them,
// not once per page per poll, over a quiet window of 25 polls on the
// synctest bubble's fake clock; a trial stored afterwards is rendered
// once more and reaches every page. The CPU the process used over the
// quiet window's polls is printed.
func TestFinishedStudyRendersOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const trials, clients, polls = 300, 50, 25
		db, st := bigStudy(t, trials, true)
		srv := &Server{DB: db, Tool: "servetune test", Poll: 20 * time.Millisecond, MaxConnsPerAddr: 2 * clients}
		base, client, _ := servePiped(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := make([]*sseClient, clients)
		for i := range cs {
			c, resp := openStream(t, ctx, client, base+"/study/big/events")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("client %d: %s", i, resp.Status)
			}
			cs[i] = c
		}
		all := func(fs map[string]int, _ map[string]string) bool {
			return fs["summary"] > 0 && fs["trials"] > 0 && fs["pareto"] > 0 && fs["running"] > 0 && fs["failures"] > 0
		}
		for _, c := range cs {
			c.waitFor(t, "every fragment", all)
		}
		before := srv.Renders()
		cpu0 := cpuTime()
		time.Sleep(polls * srv.Poll)
		synctest.Wait()
		t.Logf("%d pages open on a finished %d-trial study for %d polls: process CPU time %v", clients, trials, polls, (cpuTime() - cpu0).Round(time.Millisecond))
		if r := srv.Renders(); before != 1 || r != 1 {
			t.Errorf("%d renders for %d pages (%d before the quiet window), want 1", r, clients, before)
		}
		for i, c := range cs {
			c.mu.Lock()
			if n := c.frags["trials"]; n != 1 {
				t.Errorf("client %d got the unchanged trials table %d times", i, n)
			}
			c.mu.Unlock()
		}
		addTrial(t, db, st, trials+1)
		for _, c := range cs {
			c.waitFor(t, "the new trial", func(fs map[string]int, last map[string]string) bool {
				return fs["trials"] == 2 && strings.Contains(last["trials"], fmt.Sprintf(`data-trial=\"%d\"`, trials+1))
			})
		}
		if r := srv.Renders(); r != 2 {
			t.Errorf("%d renders after one new trial, want 2", r)
		}
		// The page itself is served from the same render.
		resp, err := client.Get(base + "/study/big")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf(`data-trial="%d"`, trials+1)) {
			t.Errorf("page: %s, new trial missing", resp.Status)
		}
		if r := srv.Renders(); r != 2 {
			t.Errorf("%d renders after a page load, want 2", r)
		}
	})
}

// TestRunningStudyRendersPerPoll: pages open on a study a run is
// measuring, whose Live moves on every request, cost at most one render
// per poll between them all, however many there are. The polls are
// counted on the synctest bubble's fake clock.
func TestRunningStudyRendersPerPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const clients = 100
		db, _ := bigStudy(t, 20, false)
		live := &Live{}
		srv := &Server{DB: db, Tool: "servetune test", Poll: 20 * time.Millisecond, Live: live, LiveStudy: "big",
			MaxStreams: clients, MaxConnsPerAddr: 2 * clients}
		base, client, _ := servePiped(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		live.Start(21, nil, []int{0})
		cs := make([]*sseClient, clients)
		for i := range cs {
			c, resp := openStream(t, ctx, client, base+"/study/big/events")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("client %d: %s", i, resp.Status)
			}
			cs[i] = c
		}
		for _, c := range cs {
			c.waitFor(t, "the summary", func(fs map[string]int, _ map[string]string) bool { return fs["summary"] > 0 })
		}
		r0, t0 := srv.Renders(), time.Now()
		for i := range 2000 {
			live.Progress(21, "concurrency=8", i%100, 100)
			if i%100 == 0 {
				time.Sleep(srv.Poll / 2)
			}
		}
		time.Sleep(3 * srv.Poll)
		synctest.Wait()
		renders, polls := srv.Renders()-r0, time.Since(t0)/srv.Poll
		t.Logf("%d pages, %d polls: %d renders", clients, polls, renders)
		if renders > int64(polls) {
			t.Errorf("%d renders in %d polls for %d pages: more than one per poll", renders, polls, clients)
		}
		if renders == 0 {
			t.Error("the level's progress was never drawn")
		}
	})
}

// TestStreamCap: past MaxStreams live pages the next is refused with 503
// and a message saying why; a page that closes frees its place. Past
// MaxConns connections, Serve answers 503 to any request. It runs in a
// synctest bubble: synctest.Wait is the moment the server has handled
// what a client did (a page closed, a connection accepted).
func TestStreamCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, _ := bigStudy(t, 3, true)
		srv := &Server{DB: db, Tool: "servetune test", Poll: 20 * time.Millisecond, MaxStreams: 3, MaxConns: 6}
		base, client, ln := servePiped(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var cancels []context.CancelFunc
		for i := range 3 {
			cctx, ccancel := context.WithCancel(ctx)
			cancels = append(cancels, ccancel)
			c, resp := openStream(t, cctx, client, base+"/study/big/events")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %d: %s", i, resp.Status)
			}
			c.waitFor(t, "the summary", func(fs map[string]int, _ map[string]string) bool { return fs["summary"] > 0 })
		}
		_, resp := openStream(t, ctx, client, base+"/events")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "3 live pages are open") {
			t.Errorf("fourth stream: %s %q, want 503 naming the cap", resp.Status, body)
		}
		cancels[0]()
		synctest.Wait()
		rctx, rcancel := context.WithCancel(ctx)
		_, resp = openStream(t, rctx, client, base+"/events")
		rcancel()
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Fatalf("a closed page's place was not freed: %s", resp.Status)
		}
		// Idle connections that never send a request count too.
		for range 6 {
			c, err := ln.DialContext(ctx, "", "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		synctest.Wait()
		tr := &http.Transport{DialContext: ln.DialContext, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "6 connections are open") {
			t.Errorf("over MaxConns: %s %q, want 503 naming the cap", resp.Status, body)
		}
	})
}

// TestReportRenderedPerChange: the full report is rendered once for any
// number of requests while the study stays as it is, and again once it
// changes.
func TestReportRenderedPerChange(t *testing.T) {
	db, st := bigStudy(t, 30, true)
	srv := &Server{DB: db, Tool: "servetune test"}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func() string {
		resp, err := http.Get(ts.URL + "/study/big/report")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("report: %s %s", resp.Status, b)
		}
		return string(b)
	}
	for range 5 {
		get()
	}
	if r := srv.Renders(); r != 1 {
		t.Errorf("%d renders for 5 requests of an unchanged report, want 1", r)
	}
	addTrial(t, db, st, 31)
	if page := get(); !strings.Contains(page, "max_running_requests=47") {
		t.Error("the report misses the trial stored since")
	}
	if r := srv.Renders(); r != 2 {
		t.Errorf("%d renders after a change, want 2", r)
	}
	resp, err := http.Get(ts.URL + "/study/nope/report")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing study: %s", resp.Status)
	}
}

// TestSlowClientsOneAddress: 300 connections from one address that send
// their headers a byte at a time and never finish hold at most
// MaxConnsPerAddr places; the rest are answered 503 as they are accepted,
// and a client from another address (127.0.0.2, loopback too) is served
// its page (260 such connections kept 18 of 20 page loads at 503).
func TestSlowClientsOneAddress(t *testing.T) {
	db, _ := bigStudy(t, 3, true)
	srv := &Server{DB: db, Tool: "servetune test", Poll: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, "127.0.0.1:0", func(a net.Addr) { addrc <- a }) }()
	addr := (<-addrc).String()
	from := func(ip string) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	}
	refused := 0
	for range 300 {
		c, err := from("127.0.0.1").Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHo")); err != nil {
			refused++ // closed at once
		}
	}
	// The 301st from the same address is answered at once, naming the cap.
	c, err := from("127.0.0.1").Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.Contains(line, "503") {
		t.Errorf("a connection past the address's cap: %q, want 503", line)
	}
	if n := srv.conns.Load(); n > 32+1 {
		t.Errorf("%d connections held by one address", n)
	}
	tr := &http.Transport{DialContext: from("127.0.0.2").DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "big") {
		t.Errorf("a new client while one address holds 300 slow connections: %s", resp.Status)
	}
	cancel()
	if err := <-served; err != nil {
		t.Error(err)
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/servetune/servetune/internal/browser"
	"github.com/servetune/servetune/store"
)

// liveSpec is a virtual study long enough to watch (1,000 trials of 3,000
// requests a level, one at a time: minutes, however fast the simulator);
// the tests cancel it once they have seen what they look for.
const liveSpec = `name: live
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  max_running_requests: {int: [16, 256], log: true}
  gpu_memory_fraction: {float: [0.80, 0.95], step: 0.05}
  kv_cache_dtype: [auto, fp8]
workload:
  dataset: {kind: random, input: {lognormal: {median: 1024, sigma: 0.5, max: 4096}}, output: {uniform: [64, 256]}}
  load: {concurrency: [8, 64]}
  requests_per_level: 3000
  warmup: 4
slo: {ttft_p99_ms: 2000, tpot_p99_ms: 60}
objectives: [max output_throughput_per_gpu, max tokens_per_user]
tuner: {sampler: random, trials: 1000, seed: 1, confirm: false}
`

// startTune runs `servetune tune args...` in the background; the returned
// function interrupts it (as Ctrl-C does) and waits for its exit code.
func startTune(t *testing.T, args ...string) (stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"tune"}, args...), io.Discard, stderr) }()
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	return stderr, stop
}

var dashboardURL = regexp.MustCompile(`dashboard: (http://\S+)`)

// TestDashboardLive drives the dashboard of `tune --ui` in headless
// Chromium while the virtual study runs: trials appear and the page is
// never reloaded, the running trial shows its load level, and nothing
// is logged to the console. With SERVETUNE_SCREENSHOTS=DIR it saves
// DIR/dashboard.png.
func TestDashboardLive(t *testing.T) {
	page := browser.New(t, 1000, 1000)
	db := filepath.Join(t.TempDir(), "live.db")
	stderr, stop := startTune(t, writeSpec(t, liveSpec), "--db", db, "--ui", "127.0.0.1:0")
	url := stderr.await(t, dashboardURL, 30*time.Second)[1]
	ctx, cancel := context.WithTimeout(page.Ctx, 90*time.Second)
	defer cancel()
	rows := func() int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#trials tr[data-trial]").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("#summary"),
		chromedp.Evaluate[chromedp.Void](`window.servetuneMark = 42`)); err != nil {
		t.Fatal(err)
	}
	first := rows()
	// Wait for more trials than the page was served with.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("#trials tr[data-trial]").length > `+itoa(first+2),
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("no new trial appeared (had %d rows): %v", first, err)
	}
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.GetStudy(context.Background(), "live"); err != nil || st.Status != store.StudyRunning {
		t.Fatalf("study %+v, %v: the trials must appear while it runs", st, err)
	}
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.servetuneMark || 0`)); err != nil || mark != 42 {
		t.Errorf("the page was reloaded (mark %d, %v)", mark, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`/concurrency=\d+/.test(document.getElementById("running").textContent)`,
		chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Errorf("the running trial's load level never showed: %v", err)
	}
	conn, _ := chromedp.Run(ctx, chromedp.Text("#conn"))
	if conn != "live" {
		t.Errorf("connection badge %q, want live", conn)
	}
	svgs, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#pareto svg").length`))
	if svgs != 1 {
		t.Errorf("%d Pareto charts on the page, want 1", svgs)
	}
	if dir := os.Getenv("SERVETUNE_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if msgs := page.Console(); len(msgs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(msgs, "\n"))
	}
	if code := stop(); code != exitFailed {
		t.Errorf("interrupted tune: exit %d, want %d", code, exitFailed)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestUICommandWaitsForStudy serves `servetune ui` on a database before
// the study starts: the event stream says it waits, then sends the first
// trials as another process stores them. Only GET is served, and a
// request naming another host is refused on loopback.
func TestUICommandWaitsForStudy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ui.db")
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"ui", "--db", db, "--addr", "127.0.0.1:0"}, out, io.Discard) }()
	base := strings.TrimSuffix(out.await(t, dashboardURL, 10*time.Second)[1], "/")
	resp, err := http.Get(base + "/study/live/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := bufio.NewScanner(resp.Body)
	events.Buffer(make([]byte, 1<<20), 8<<20)
	waitFor := func(what string) {
		t.Helper()
		for events.Scan() {
			if strings.Contains(events.Text(), what) {
				return
			}
		}
		t.Fatalf("the event stream ended before %q: %v", what, events.Err())
	}
	waitFor("Waiting for study")
	_, stop := startTune(t, writeSpec(t, liveSpec), "--db", db)
	waitFor(`data-trial=\"0\"`)
	stop()

	post, err := http.Post(base+"/study/live", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", post.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Host = "evil.example:8080"
	foreign, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	foreign.Body.Close()
	if foreign.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d, want 421", foreign.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("ui: exit %d after Ctrl-C", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ui did not stop with its context")
	}
	if code, _, errs := runCLI(t, "ui", "--db", db, "--addr", "nonsense"); code != exitUsage || !strings.Contains(errs, "--addr") {
		t.Errorf("bad --addr: exit %d %q", code, errs)
	}
}

package trial

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

func plan(t *testing.T, mode string, env ...string) Plan {
	t.Helper()
	return Plan{
		Launcher: &launcher.Process{
			Command:      []string{os.Args[0], "{port}"},
			PollInterval: 20 * time.Millisecond,
			StopTimeout:  2 * time.Second,
		},
		Spec:             launcher.Spec{Engine: "vllm", Model: "test-model", Env: append([]string{engineEnv + "=" + mode}, env...)},
		ReadyTimeout:     10 * time.Second,
		Dataset:          bench.DatasetSpec{Kind: bench.DatasetRandom, Input: bench.Dist{Kind: bench.DistFixed, Value: 16}, Output: bench.Dist{Kind: bench.DistFixed, Value: 4}},
		Levels:           []measure.Load{{MaxConcurrency: 1}, {MaxConcurrency: 4}},
		RequestsPerLevel: 8,
		Warmup:           1,
		Timeout:          5 * time.Second,
		Seed:             1,
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name        string
		mode        string
		env         []string
		tweak       func(*Plan)
		wantStatus  measure.Status
		wantFailure engine.Failure
		wantMsg     string
		wantLevels  int
	}{
		{name: "ok", mode: "ok", wantStatus: measure.StatusOK, wantLevels: 2},
		{name: "oom at start-up", mode: "oom", wantStatus: measure.StatusFailed, wantFailure: engine.FailOOM, wantMsg: "No available memory for the cache blocks"},
		{name: "not ready", mode: "hang", tweak: func(p *Plan) { p.ReadyTimeout = 300 * time.Millisecond },
			wantStatus: measure.StatusFailed, wantFailure: engine.FailNotReady, wantMsg: "within 300ms"},
		{name: "crash under load", mode: "ok", env: []string{"CRASH_AFTER=5"}, tweak: func(p *Plan) { p.Levels = p.Levels[:1] },
			wantStatus: measure.StatusFailed, wantFailure: engine.FailCrash, wantMsg: "engine core died"},
		{name: "capacity", mode: "ok", tweak: func(p *Plan) {
			p.Levels = nil
			// "Met" below concurrency 3: doubling probes 1, 2, 4, then bisects to 3.
			p.Capacity = &Capacity{MaxConcurrency: 64, Met: func(s measure.Summary) bool { return s.MaxConcurrency < 3 }}
		}, wantStatus: measure.StatusOK, wantLevels: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.mode, tc.env...)
			if tc.tweak != nil {
				tc.tweak(&p)
			}
			res := Run(context.Background(), p)
			if res.Status != tc.wantStatus || res.Failure != tc.wantFailure {
				t.Fatalf("status %s/%s (%s), want %s/%s\nlogs: %s", res.Status, res.Failure, res.Message, tc.wantStatus, tc.wantFailure, res.LogTail)
			}
			if !strings.Contains(res.Message, tc.wantMsg) {
				t.Errorf("message %q lacks %q", res.Message, tc.wantMsg)
			}
			if len(res.Levels) != tc.wantLevels {
				t.Fatalf("%d levels, want %d", len(res.Levels), tc.wantLevels)
			}
			for _, lv := range res.Levels {
				if lv.Summary.Completed == 0 {
					t.Errorf("level %s completed nothing: %+v", lv.Label, lv.Summary.Errors)
				}
			}
		})
	}
}

// launchedThen runs a launcher and calls then once its engine is launched.
type launchedThen struct {
	launcher.Launcher
	then func()
}

func (l launchedThen) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	inst, err := l.Launcher.Launch(ctx, spec)
	l.then()
	return inst, err
}

// TestRunInterrupted cancels a trial while it waits for an engine that
// never becomes ready: the trial is interrupted, not failed.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := plan(t, "hang")
	p.Launcher = launchedThen{Launcher: p.Launcher, then: cancel}
	if res := Run(ctx, p); res.Status != measure.StatusInterrupted {
		t.Fatalf("status %s/%s, want interrupted", res.Status, res.Failure)
	}
}

func TestLoadLabel(t *testing.T) {
	tests := []struct {
		load measure.Load
		want string
	}{
		{measure.Load{MaxConcurrency: 8}, "concurrency=8"},
		{measure.Load{Rate: 2.5}, "rate=2.5"},
		{measure.Load{Rate: 4, MaxConcurrency: 16}, "rate=4,concurrency=16"},
	}
	for _, tc := range tests {
		if got, _, _ := tc.load.Label(); got != tc.want {
			t.Errorf("Label(%+v) = %q, want %q", tc.load, got, tc.want)
		}
	}
}

func TestSearchCapacity(t *testing.T) {
	tests := []struct {
		name     string
		capacity int // highest concurrency that meets the SLOs
		max      int
		steps    int
		want     int
		probes   []int
	}{
		{"bisects", 3, 64, 3, 3, []int{1, 2, 4, 3}},
		{"narrows within steps", 45, 1024, 3, 44, []int{1, 2, 4, 8, 16, 32, 64, 48, 40, 44}},
		{"capped", 1000, 100, 3, 100, []int{1, 2, 4, 8, 16, 32, 64, 100}},
		{"nothing meets", 0, 64, 3, 0, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var probes []int
			got, err := SearchCapacity(tc.max, tc.steps, func(n int) (bool, error) {
				probes = append(probes, n)
				return n <= tc.capacity, nil
			})
			if err != nil || got != tc.want || fmt.Sprint(probes) != fmt.Sprint(tc.probes) {
				t.Errorf("got %d (%v), probes %v; want %d, %v", got, err, probes, tc.want, tc.probes)
			}
		})
	}
}

// countingGPU is a gpu.Reader for hosts without NVML: it reports a fixed
// power draw and counts its reads.
type countingGPU struct {
	mu    sync.Mutex
	reads int
}

func (c *countingGPU) Read(i int) (gpu.Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return gpu.Sample{Time: time.Now(), GPU: i, PowerW: 300}, nil
}

func TestRunSamplesGPUs(t *testing.T) {
	p := plan(t, "ok")
	p.Spec.GPUs = []int{2, 3}
	g := &countingGPU{}
	p.GPUs, p.GPUInterval = g, 5*time.Millisecond
	res := Run(context.Background(), p)
	if res.Status != measure.StatusOK {
		t.Fatalf("%s/%s: %s", res.Status, res.Failure, res.Message)
	}
	seen := map[int]bool{}
	for _, s := range res.GPU {
		seen[s.GPU] = true
	}
	if len(res.GPU) < 4 || !seen[2] || !seen[3] || len(seen) != 2 {
		t.Errorf("%d samples of GPUs %v, want start and stop readings of 2 and 3", len(res.GPU), seen)
	}
}

// scaled is a launcher whose engines run k times faster than real time.
type scaled struct {
	launcher.Launcher
	k float64
}

func (s scaled) Capabilities() launcher.Capabilities {
	c := s.Launcher.Capabilities()
	c.TimeScale = s.k
	return c
}

// TestRunTimeScale: with an engine k times faster than real time (the
// launcher says so), the benchmark gets the level in the engine's time
// and the time scale (it sends on the real clock: bench.TestRealClock).
func TestRunTimeScale(t *testing.T) {
	p := plan(t, "ok")
	p.Launcher = scaled{p.Launcher, 10}
	p.Levels = []measure.Load{{Rate: 2, MaxConcurrency: 4}}
	p.Goodput = measure.SLO{TTFTms: 500}
	var got bench.Config
	p.Bench = func(ctx context.Context, cfg bench.Config) (*bench.Result, error) {
		got = cfg
		return bench.Run(ctx, cfg)
	}
	if res := Run(context.Background(), p); res.Status != measure.StatusOK {
		t.Fatalf("status %s/%s: %s", res.Status, res.Failure, res.Message)
	}
	if got.TimeScale != 10 || got.Load.Rate != 2 || got.Timeout != p.Timeout || got.Summary.Goodput.TTFTms != 500 {
		t.Errorf("time scale %v, rate %v, timeout %v, goodput TTFT %v ms; want 10, 2/s, %v, 500 ms",
			got.TimeScale, got.Load.Rate, got.Timeout, got.Summary.Goodput.TTFTms, p.Timeout)
	}
}

// TestRunNoSuccess: a server that answers every request with an error (500,
// or 401 for a missing key) is a failed trial naming the dominant failure
// and the server's own message, not an ok trial with zero goodput.
func TestRunNoSuccess(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{500, `{"object":"error","message":"engine is overloaded","type":"InternalServerError","code":500}`, "http_5xx: HTTP 500: engine is overloaded"},
		{401, `{"error":{"message":"Unauthorized","type":"Unauthorized"}}`, "http_4xx: HTTP 401: Unauthorized"},
		// A stream cut after its first token, every time.
		{200, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n", "truncated"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			p := plan(t, "ok")
			p.Launcher = &launcher.Endpoint{URL: srv.URL}
			p.Spec.Env = nil
			res := Run(context.Background(), p)
			if res.Status != measure.StatusFailed || res.Failure != engine.FailRequests || !strings.Contains(res.Message, tc.want) {
				t.Fatalf("%s/%s %q, want failed/requests_failed with %q", res.Status, res.Failure, res.Message, tc.want)
			}
			if len(res.Levels) != 2 {
				t.Errorf("%d levels kept, want 2 (the measurements stay)", len(res.Levels))
			}
		})
	}
}

func TestSearchRate(t *testing.T) {
	tests := []struct {
		name     string
		capacity float64 // highest rate that meets the SLOs
		rs       RateSearch
		probes   int // at most
	}{
		{"up from below", 37.3, RateSearch{Start: 4, Min: 0.01, Max: 1e4, Precision: 0.02}, 12},
		{"down from above", 0.8, RateSearch{Start: 64, Min: 0.01, Max: 1e4, Precision: 0.02}, 14},
		{"start is the capacity", 10, RateSearch{Start: 10, Min: 0.01, Max: 1e4, Precision: 0.05}, 8},
		// A precision under the spacing of floats never closed the bracket.
		{"precision past floats", 37.3, RateSearch{Start: 4, Min: 0.01, Max: 1e4, Precision: 1e-300}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			got, err := SearchRate(tc.rs, func(r float64) (bool, error) {
				n++
				if n > 1000 {
					return false, fmt.Errorf("endless search at %g", r)
				}
				return r <= tc.capacity, nil
			})
			prec := max(tc.rs.Precision, 1e-3)
			if err != nil || got > tc.capacity || got < tc.capacity/(1+prec) || n > tc.probes {
				t.Errorf("got %.4g after %d probes (%v); want in [%.4g, %.4g] within %d probes", got, n, err, tc.capacity/(1+tc.rs.Precision), tc.capacity, tc.probes)
			}
		})
	}
	// Bounds: nothing meets, everything meets.
	if got, _ := SearchRate(RateSearch{Start: 1, Min: 0.5, Max: 100}, func(float64) (bool, error) { return false, nil }); got != 0 {
		t.Errorf("nothing meets: got %g, want 0", got)
	}
	if got, _ := SearchRate(RateSearch{Start: 1, Min: 0.5, Max: 100}, func(float64) (bool, error) { return true, nil }); got != 100 {
		t.Errorf("everything meets: got %g, want the upper bound 100", got)
	}
}

func TestRateProbeSpanAndSustained(t *testing.T) {
	p := Plan{RequestsPerLevel: 100, Capacity: &Capacity{Rate: &RateSearch{MinSpan: 30 * time.Second}}}
	for _, tc := range []struct {
		rate float64
		want int
	}{{1, 100}, {10, 300}, {1e5, bench.MaxRequests}} {
		if got := p.BenchConfig(0, measure.Load{Rate: tc.rate}).NumRequests; got != tc.want {
			t.Errorf("rate %g: %d requests, want %d", tc.rate, got, tc.want)
		}
	}
	// A steady queue, then one that grows by 50 ms a request.
	recs := func(growth time.Duration) []measure.Record {
		var out []measure.Record
		for i := range 200 {
			sched := time.Duration(i) * 100 * time.Millisecond
			ttft := 80*time.Millisecond + time.Duration(i%7)*10*time.Millisecond + time.Duration(i)*growth
			out = append(out, measure.Record{Sched: sched, Send: sched, First: sched + ttft})
		}
		return out
	}
	if !Sustained(recs(0)) {
		t.Error("a steady queue is not sustained")
	}
	if Sustained(recs(50 * time.Millisecond)) {
		t.Error("a growing queue is sustained")
	}
}

// TestRunDisaggregatedPartOOM: the decode engine of a disaggregated trial
// runs out of memory at start-up: the trial is failed/oom naming the
// decode part with its own line, and no part of it is left running.
func TestRunDisaggregatedPartOOM(t *testing.T) {
	p := plan(t, "ok", "OOM_IF_ARG=kv_consumer")
	p.Launcher = &launcher.Disaggregated{
		Base:   &launcher.Process{Command: []string{os.Args[0], "{args}", "{port}"}, PollInterval: 20 * time.Millisecond, StopTimeout: 2 * time.Second},
		Router: launcher.Router{Command: []string{os.Args[0], "{port}"}},
		KV:     engine.KVTransfer{DecodeConfig: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_consumer"}`},
	}
	p.Spec.Study = fmt.Sprintf("trial-disagg-%d", os.Getpid())
	p.Spec.Settings = engine.Settings{"disaggregated": true, "prefill_replicas": 2}
	res := Run(context.Background(), p)
	if res.Status != measure.StatusFailed || res.Failure != engine.FailOOM || !strings.HasPrefix(res.Message, "decode 0: ") || !strings.Contains(res.Message, "No available memory") {
		t.Fatalf("%s/%s %q, want failed/oom naming decode 0", res.Status, res.Failure, res.Message)
	}
	reaped, err := launcher.ReapLocal(context.Background(), "process", p.Spec.Study, func(launcher.Reaped) bool { return false }, time.Second)
	if err != nil || len(reaped) != 0 {
		t.Errorf("%d processes of the trial left running (%v)", len(reaped), err)
	}
}

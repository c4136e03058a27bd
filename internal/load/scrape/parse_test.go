package scrape

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

func readSnap(t *testing.T, name string) Snapshot {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestParseVLLM reads a vLLM V1 server's exposition: the current family
// names win over the deprecated ones served beside them, and _created
// series are not mistaken for values.
func TestParseVLLM(t *testing.T) {
	s := readSnap(t, "vllm-0.10-mid.prom")
	if s.Engine != engine.VLLM {
		t.Fatalf("engine %q", s.Engine)
	}
	checks := []struct {
		name string
		v    Value
		want float64
	}{
		{"running", s.Running, 64}, {"waiting", s.Waiting, 17}, {"kv", s.KVUsage, 0.8731},
		{"preemptions", s.Preemptions, 3}, {"queries", s.PrefixQueries, 32768 + 102400},
		{"hits", s.PrefixHits, 4096 + 25600}, {"prompt", s.PromptTokens, 32768 + 102400}, {"gen", s.OutTokens, 4096 + 12800},
	}
	for _, c := range checks {
		if !c.v.OK || c.v.V != c.want {
			t.Errorf("%s = %+v, want %v", c.name, c.v, c.want)
		}
	}
	if s.HitRate.OK {
		t.Errorf("vLLM V1 has no hit-rate gauge, got %+v", s.HitRate)
	}
	for name, h := range map[string]*Histogram{"ttft": s.TTFT, "queue": s.QueueTime, "itl": s.ITL, "e2e": s.E2E} {
		if h == nil || h.Count == 0 || !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) || h.Counts[len(h.Counts)-1] != h.Count {
			t.Errorf("%s histogram %+v", name, h)
		}
	}
	if len(s.TTFT.Bounds) != 23 { // vLLM's 22 TTFT bounds and +Inf
		t.Errorf("TTFT has %d buckets, want 23", len(s.TTFT.Bounds))
	}
}

func TestParseSGLang(t *testing.T) {
	s := readSnap(t, "sglang-0.5-mid.prom")
	if s.Engine != engine.SGLang {
		t.Fatalf("engine %q", s.Engine)
	}
	if s.Running.V != 40 || s.Waiting.V != 24 || s.KVUsage.V != 0.9612 || s.Preemptions.V != 2 || !near(s.HitRate.V, 0.3, 1e-12) {
		t.Errorf("gauges/counters %+v", s)
	}
	if s.PrefixHits.V != 30720 || s.PrefixQueries.V != 16*2048+50*2048 {
		t.Errorf("prefix hits %v of %v", s.PrefixHits, s.PrefixQueries)
	}
	if s.QueueTime == nil || s.ITL == nil || s.TTFT == nil || s.E2E == nil {
		t.Errorf("histograms missing: %+v", s)
	}
}

// TestAggregateLevel: the level's figures from three scrapes of each
// engine, against the deltas the testdata was written with.
func TestAggregateLevel(t *testing.T) {
	tests := []struct {
		engine                  string
		files                   []string
		running, waiting, kv    float64
		preempt, hit            float64
		ttft, queue, itl, e2eMs float64
		count                   float64
	}{
		{"vllm", []string{"vllm-0.10-start.prom", "vllm-0.10-mid.prom", "vllm-0.10-end.prom"},
			64, 17, 0.8731, 5, 0.25, 96409.8 / 200, 58687.1 / 200, 888509.3 / 25400, 940467.1 / 200, 200},
		{"sglang", []string{"sglang-0.5-start.prom", "sglang-0.5-mid.prom", "sglang-0.5-end.prom"},
			40, 24, 0.9612, 7, 0.3, 134590.4 / 100, 106078.8 / 100, 510146.8 / 25500, 601438.7 / 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			var snaps []Snapshot
			for _, f := range tt.files {
				snaps = append(snaps, readSnap(t, f))
			}
			m := Aggregate(snaps, time.Second)
			if m.Engine != tt.engine || m.Samples != 3 || m.Source != "scrape" {
				t.Errorf("header %+v", m)
			}
			if m.NumRequestsRunningPeak != tt.running || m.NumRequestsWaitingPeak != tt.waiting || m.KVCacheUsagePeak != tt.kv {
				t.Errorf("peaks running %v waiting %v kv %v", m.NumRequestsRunningPeak, m.NumRequestsWaitingPeak, m.KVCacheUsagePeak)
			}
			if !near(m.NumRequestsRunningMean, tt.running/3, 1e-9) {
				t.Errorf("running mean %v", m.NumRequestsRunningMean)
			}
			if !near(m.WaitingShare, 1.0/3, 1e-9) || m.NumRequestsRunningWhenWaiting != tt.running {
				t.Errorf("waiting share %v, running when waiting %v", m.WaitingShare, m.NumRequestsRunningWhenWaiting)
			}
			if m.Preemptions != tt.preempt || m.PrefixCacheHitRate == nil || !near(*m.PrefixCacheHitRate, tt.hit, 1e-9) {
				t.Errorf("preemptions %v, hit rate %v", m.Preemptions, m.PrefixCacheHitRate)
			}
			for _, c := range []struct {
				name string
				l    *measure.ServerLatency
				mean float64
			}{{"ttft", m.TTFT, tt.ttft}, {"queue", m.QueueTime, tt.queue}, {"itl", m.ITL, tt.itl}, {"e2e", m.E2E, tt.e2eMs}} {
				if c.l == nil || !near(c.l.MeanMs, c.mean, 1e-6) {
					t.Errorf("server %s %+v, want mean %.4f ms", c.name, c.l, c.mean)
					continue
				}
				if !(c.l.P50Ms <= c.l.P90Ms && c.l.P90Ms <= c.l.P99Ms) || c.l.P50Ms <= 0 {
					t.Errorf("server %s quantiles out of order: %+v", c.name, c.l)
				}
			}
			if m.TTFT.Count != tt.count {
				t.Errorf("TTFT count %v, want %v (the level's requests, not the warm-up's)", m.TTFT.Count, tt.count)
			}
			if len(m.Missing) != 0 {
				t.Errorf("missing %v", m.Missing)
			}
		})
	}
}

// TestParseDataParallel: two engine cores report a series each; requests,
// counters and histograms add up, KV usage is their mean.
func TestParseDataParallel(t *testing.T) {
	text := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
vllm:num_preemptions_total{engine="1",model_name="m"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.25
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 0.15
`
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.Running.V != 8 || !near(s.KVUsage.V, 0.4, 1e-12) || s.Preemptions.V != 3 {
		t.Errorf("running %v kv %v preemptions %v", s.Running, s.KVUsage, s.Preemptions)
	}
	if s.TTFT.Count != 5 || !near(s.TTFT.Sum, 0.4, 1e-12) || s.TTFT.Counts[0] != 4 {
		t.Errorf("TTFT %+v", s.TTFT)
	}
	if s.Waiting.OK {
		t.Errorf("waiting reported present: %+v", s.Waiting)
	}
}

// TestParseOlderVLLM: a V0 server spells KV usage gpu_cache_usage_perc and
// has no queue histogram; Aggregate names what is missing.
func TestParseOlderVLLM(t *testing.T) {
	text := `# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.31
# HELP vllm:gpu_prefix_cache_hit_rate GPU prefix cache block hit rate.
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.5
`
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if !s.KVUsage.OK || s.KVUsage.V != 0.31 {
		t.Fatalf("KV usage %+v", s.KVUsage)
	}
	m := Aggregate([]Snapshot{s, s}, time.Second)
	if m.PrefixCacheHitRate == nil || *m.PrefixCacheHitRate != 0.5 {
		t.Errorf("hit rate from the gauge: %v", m.PrefixCacheHitRate)
	}
	want := "preemptions prompt_tokens generation_tokens prefix_cache_queries prefix_cache_hits server_ttft server_queue_time server_itl server_e2el"
	if got := strings.Join(m.Missing, " "); got != want {
		t.Errorf("missing %q, want %q", got, want)
	}
}

func TestParseNotAnEngine(t *testing.T) {
	for _, text := range []string{
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12\n",
		"",
		"tgi_queue_size 3\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err != ErrNoEngineMetrics {
			t.Errorf("%q: err %v, want ErrNoEngineMetrics", text, err)
		}
	}
	if _, err := Parse(strings.NewReader("vllm:num_requests_running{ 3\n")); err == nil || err == ErrNoEngineMetrics {
		t.Errorf("malformed text: err %v", err)
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := &Histogram{Bounds: []float64{0.1, 0.5, 1, math.Inf(1)}, Counts: []float64{10, 60, 90, 100}, Count: 100, Sum: 40}
	for _, c := range []struct{ q, want float64 }{
		{0.05, 0.05}, {0.1, 0.1}, {0.35, 0.3}, {0.75, 0.75}, {0.95, 1}, {1, 1},
	} {
		if got := h.Quantile(c.q); !near(got, c.want, 1e-12) {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	if !math.IsNaN((&Histogram{}).Quantile(0.5)) {
		t.Error("empty histogram has a quantile")
	}
	earlier := &Histogram{Bounds: h.Bounds, Counts: []float64{5, 5, 5, 5}, Count: 5, Sum: 0.2}
	d := h.Sub(earlier)
	if d.Count != 95 || d.Counts[0] != 5 || !near(d.Sum, 39.8, 1e-12) {
		t.Errorf("Sub %+v", d)
	}
	if restarted := earlier.Sub(h); restarted != earlier {
		t.Errorf("a histogram that went down is returned whole")
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm-0.10-mid.prom", "sglang-0.5-mid.prom"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("vllm:num_requests_running 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		m := Aggregate([]Snapshot{s, s}, time.Second)
		if m == nil || m.Preemptions != 0 {
			t.Fatalf("a snapshot against itself changed: %+v", m)
		}
	})
}

// TestAggregateKeepsBuckets: a queue-time histogram whose requests all
// waited almost nothing (sum 0) interpolates a p50 of 150 ms inside its
// first bucket (0, 0.3] s; the level keeps that bucket, all the
// histogram knows, and past the last bound the bucket is open.
func TestAggregateKeepsBuckets(t *testing.T) {
	h := func(counts ...float64) *Histogram {
		return &Histogram{Bounds: []float64{0.3, 0.5, math.Inf(1)}, Counts: counts, Count: counts[len(counts)-1]}
	}
	snaps := []Snapshot{{QueueTime: h(0, 0, 0), TTFT: h(0, 0, 0)}, {QueueTime: h(10, 10, 10), TTFT: h(0, 0, 10)}}
	m := Aggregate(snaps, time.Second)
	q := m.QueueTime
	if q == nil || q.MeanMs != 0 || q.P50Ms != 150 {
		t.Fatalf("queue %+v: want the mean 0 and the interpolated p50 150 ms", q)
	}
	if q.P50Bucket == nil || *q.P50Bucket != (measure.Bucket{LoMs: 0, HiMs: 300}) || q.P50Bucket.String() != "≤ 300" {
		t.Errorf("p50 bucket %+v, want (0, 300] ms written ≤ 300", q.P50Bucket)
	}
	if b := m.TTFT.P99Bucket; b == nil || !b.Open || b.LoMs != 500 || b.String() != "> 500" {
		t.Errorf("TTFT p99 bucket %+v, want open above 500 ms", b)
	}
}

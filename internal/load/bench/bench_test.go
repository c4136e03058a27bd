package bench

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
)

// BenchmarkClientStream measures the whole client loop (HTTP request, SSE
// framing, chunk JSON, record keeping) against a local server that streams
// 1000 one-token chunks per request as fast as it can, with several streams
// in parallel. "flush-each" writes every event in its own TCP segment (one
// read per event on the client, the worst case); "coalesced" lets writes
// batch when the server runs ahead, as busy engines do. The server shares
// the process and the CPUs, so events/s is a lower bound for the client.
func BenchmarkClientStream(b *testing.B) {
	for _, mode := range []struct {
		name     string
		coalesce bool
	}{{"flush-each", false}, {"coalesced", true}} {
		b.Run(mode.name, func(b *testing.B) {
			fs := &fakeServer{Tokens: 1000, Coalesce: mode.coalesce}
			srv := fs.start(b)
			hc := newHTTPClient(16)
			c := newClient(hc, openai.Target{BaseURL: srv.URL, Model: "m"}, true, Sampling{})
			req := measure.Request{Prompt: "hello world", MaxTokens: 1000}
			start := time.Now()
			b.ReportAllocs()
			var events atomic.Int64
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				var rec measure.Record
				for pb.Next() {
					rec = measure.Record{Chunks: rec.Chunks[:0]}
					body, err := c.body(req)
					c.send(context.Background(), req, body, err, start, time.Minute, &rec)
					if rec.Error != measure.ErrNone {
						b.Error(rec.Error, rec.ErrorMsg)
						return
					}
					events.Add(int64(len(rec.Chunks)))
				}
			})
			b.ReportMetric(float64(events.Load())/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(events.Load())/float64(b.N), "events/op")
		})
	}
}

// BenchmarkConcurrentStreams runs 2000 concurrent streams through Run
// against a server in its own process (20 tokens, one every 100 ms after a
// 20 ms TTFT; 2000 warm-up requests open the connections first) and reports
// how many completed and the median TTFT and ITL the client measured
// (nominal 20 ms and 100 ms).
func BenchmarkConcurrentStreams(b *testing.B) {
	srv := startChild(b, &fakeServer{TTFT: 20 * time.Millisecond, PerToken: 100 * time.Millisecond})
	cfg := Config{
		Target:      openai.Target{BaseURL: srv.URL, Model: "m"},
		Dataset:     DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 8}, Output: Dist{Value: 20}},
		Load:        measure.Load{MaxConcurrency: 2000},
		NumRequests: 2000,
		Warmup:      2000,
		Timeout:     time.Minute,
		NoAlign:     true,
		Summary:     measure.SummaryOptions{Bootstrap: 10},
	}
	var s measure.Summary
	for b.Loop() {
		res, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		s = res.Summary
	}
	b.ReportMetric(float64(s.Completed), "completed")
	b.ReportMetric(float64(s.Failed), "failed")
	b.ReportMetric(s.TTFT.Median, "ttft_median_ms")
	b.ReportMetric(s.ITL.Median, "itl_median_ms")
	b.ReportMetric(float64(s.TotalOutputTokens)/s.Duration, "events/s")
}

// BenchmarkSendLateness runs an open loop at 200 requests/s for 2 s against
// a fast server in its own process and reports the p99 and median of
// actual − intended send time.
func BenchmarkSendLateness(b *testing.B) {
	srv := startChild(b, &fakeServer{TTFT: time.Millisecond, PerToken: time.Millisecond})
	cfg := Config{
		Target:      openai.Target{BaseURL: srv.URL, Model: "m"},
		Dataset:     DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 8}, Output: Dist{Value: 10}},
		Load:        measure.Load{Rate: 200},
		NumRequests: 400,
		Warmup:      20,
		Timeout:     time.Minute,
		NoAlign:     true,
		Summary:     measure.SummaryOptions{Bootstrap: 10},
	}
	var s measure.Summary
	for b.Loop() {
		res, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		s = res.Summary
	}
	b.ReportMetric(s.Queue.P99, "lateness_p99_ms")
	b.ReportMetric(s.Queue.Median, "lateness_median_ms")
	b.ReportMetric(float64(s.Failed), "failed")
	b.ReportMetric(baselineLatenessP99(cfg.Load, cfg.NumRequests), "baseline_p99_ms")
}

// baselineLatenessP99 paces n empty "sends" on l's schedule with the same
// sleepUntil and no HTTP at all: the p99 lateness that the machine's own
// scheduling stalls cause, to read the client's figure against.
func baselineLatenessP99(l measure.Load, n int) float64 {
	sched := l.Schedule(newRNG(9, 9), n)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	late := make([]float64, n)
	for i, at := range sched {
		sleepUntil(context.Background(), timer, start.Add(at))
		late[i] = ms(time.Since(start) - at)
	}
	slices.Sort(late)
	return measure.Percentile(late, 99)
}

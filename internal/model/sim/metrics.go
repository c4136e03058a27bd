package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// histogram is a Prometheus histogram with fixed buckets (seconds).
type histogram struct {
	bounds []float64
	counts []uint64 // cumulative on output, per bucket here
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

// vLLM's bucket boundaries (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// metrics is the server's Prometheus state. The engine loop writes it under
// mu; /metrics reads it under mu.
type metrics struct {
	mu               sync.Mutex
	running, waiting int
	kvUsage          float64
	promptTokens     int64
	genTokens        int64
	preemptions      int64
	prefixQueries    int64
	prefixHits       int64
	success          int64
	// Speculative decoding's counters (core's); spec says it is on.
	spec                                      bool
	specDrafts, specDraftTokens, specAccepted int64
	specAcceptedAt                            []int64
	ttft, itl, e2e, queue                     *histogram
	prefill, decode                           *histogram
	genWindow                                 [2]int64 // generation tokens at the start of the current/previous second
	genWindowAt                               time.Time
	genThroughput                             float64
	// published is closed and replaced at every publish: whoever waits
	// for the figures to change (the tests' await) selects on it.
	published chan struct{}
}

func newMetrics() *metrics {
	return &metrics{
		published: make(chan struct{}),
		ttft:      newHistogram(ttftBuckets), itl: newHistogram(itlBuckets), e2e: newHistogram(e2eBuckets),
		queue: newHistogram(e2eBuckets), prefill: newHistogram(e2eBuckets), decode: newHistogram(e2eBuckets),
	}
}

// write renders the metrics in the Prometheus text format with the engine's
// names (docs/reference.md (Engines)).
func (m *metrics) write(w io.Writer, eng engine.Engine, model string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lbl := `{model_name="` + escapeLabel(model) + `"}`
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n", name, help, name, name, lbl, fmtFloat(v))
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s%s %d\n", name, help, name, name, lbl, v)
	}
	hist := func(name, help string, h *histogram) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
		var cum uint64
		for i, b := range h.bounds {
			cum += h.counts[i]
			fmt.Fprintf(w, "%s_bucket{le=\"%s\",model_name=\"%s\"} %d\n", name, fmtFloat(b), escapeLabel(model), cum)
		}
		fmt.Fprintf(w, "%s_bucket{le=\"+Inf\",model_name=\"%s\"} %d\n", name, escapeLabel(model), h.n)
		fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", name, lbl, fmtFloat(h.sum), name, lbl, h.n)
	}
	n := engine.Metrics(eng)
	hit := 0.0
	if m.prefixQueries > 0 {
		hit = float64(m.prefixHits) / float64(m.prefixQueries)
	}
	// The families servetune reads (engine.Metrics, current names), then
	// the engines' others.
	switch eng {
	case engine.SGLang:
		gauge(n.Running[0], "The number of running requests.", float64(m.running))
		gauge(n.Waiting[0], "The number of requests in the waiting queue.", float64(m.waiting))
		gauge(n.KVUsage[0], "The token usage.", m.kvUsage)
		gauge(n.HitRate[0], "The prefix cache hit rate.", hit)
		gauge("sglang:gen_throughput", "The generation throughput (token/s).", m.genThroughput)
		// SGLang counts every prompt token, cached or computed.
		counter(n.PromptTokens[0], "Number of prefill tokens processed.", m.promptTokens+m.prefixHits)
		counter(n.OutputTokens[0], "Number of generation tokens processed.", m.genTokens)
		counter(n.PrefixHits[0], "Number of cached prompt tokens.", m.prefixHits)
		counter(n.Preemptions[0], "Total number of retracted requests.", m.preemptions)
		hist(n.TTFT[0], "Histogram of time to first token in seconds.", m.ttft)
		hist(n.ITL[0], "Histogram of inter-token latency in seconds.", m.itl)
		hist(n.E2E[0], "Histogram of End-to-end request latency in seconds", m.e2e)
		hist(n.QueueTime[0], "Histogram of queueing time in seconds.", m.queue)
	default:
		gauge(n.Running[0], "Number of requests in model execution batches.", float64(m.running))
		gauge(n.Waiting[0], "Number of requests waiting to be processed.", float64(m.waiting))
		gauge(n.KVUsage[0], "KV-cache usage. 1 means 100 percent usage.", m.kvUsage)
		gauge(n.KVUsage[1], "GPU KV-cache usage. 1 means 100 percent usage.", m.kvUsage)
		counter(n.PromptTokens[0], "Number of prefill tokens processed.", m.promptTokens)
		counter(n.OutputTokens[0], "Number of generation tokens processed.", m.genTokens)
		counter(n.Preemptions[0], "Cumulative number of preemption from the engine.", m.preemptions)
		counter(n.PrefixQueries[0], "Prefix cache queries, in terms of number of queried tokens.", m.prefixQueries)
		counter(n.PrefixHits[0], "Prefix cache hits, in terms of number of cached tokens.", m.prefixHits)
		fmt.Fprintf(w, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason=\"length\",model_name=\"%s\"} %d\n", escapeLabel(model), m.success)
		hist(n.TTFT[0], "Histogram of time to first token in seconds.", m.ttft)
		hist(n.ITL[0], "Histogram of inter-token latency in seconds.", m.itl)
		hist(n.E2E[0], "Histogram of e2e request latency in seconds.", m.e2e)
		hist(n.QueueTime[0], "Histogram of time spent in WAITING phase for request.", m.queue)
		if m.spec {
			counter(n.SpecDrafts[0], "Number of spec decoding drafts.", m.specDrafts)
			counter(n.SpecDraftTokens[0], "Number of draft tokens.", m.specDraftTokens)
			counter(n.SpecAccepted[0], "Number of accepted tokens.", m.specAccepted)
			name := n.SpecAcceptedPerPos[0]
			fmt.Fprintf(w, "# HELP %s Accepted tokens per draft position.\n# TYPE %s counter\n", name, name)
			for i, v := range m.specAcceptedAt {
				fmt.Fprintf(w, "%s{model_name=\"%s\",position=\"%d\"} %d\n", name, escapeLabel(model), i, v)
			}
		}
		hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", m.prefill)
		hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", m.decode)
	}
}

func fmtFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escapeLabel(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// latencyRecorder is a lock-free histogram of emission lateness (actual
// write time minus the step's scheduled end) with 10 us bins up to 100 ms.
type latencyRecorder struct {
	bins [10001]atomic.Int64
	n    atomic.Int64
}

const latencyBin = 10 * time.Microsecond

func (l *latencyRecorder) observe(d time.Duration) {
	i := int(max(d, 0) / latencyBin)
	if i >= len(l.bins) {
		i = len(l.bins) - 1
	}
	l.bins[i].Add(1)
	l.n.Add(1)
}

// quantile returns the q-quantile (upper edge of its bin); 0 when empty.
func (l *latencyRecorder) quantile(q float64) time.Duration {
	n := l.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var cum int64
	for i := range l.bins {
		cum += l.bins[i].Load()
		if cum >= rank {
			return time.Duration(i+1) * latencyBin
		}
	}
	return time.Duration(len(l.bins)) * latencyBin
}

func (l *latencyRecorder) reset() {
	for i := range l.bins {
		l.bins[i].Store(0)
	}
	l.n.Store(0)
}

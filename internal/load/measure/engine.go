package measure

import "strconv"

// EngineMetrics is what the engine itself reported while one load level
// was measured (its Prometheus /metrics scraped during the level, or the
// simulated engine's own state): how full its batch, queue and KV cache
// were, what it preempted, what its prefix cache saved, and its own view
// of the latencies, so that the client's figures can be set against the
// server's. Gauges are sampled (peak and mean over the samples); counters
// and histograms are the change from the level's start to its end.
type EngineMetrics struct {
	// Engine is the engine whose metric names were found: vllm or sglang.
	Engine string `json:"engine"`
	// Source says how they were read: "scrape" (GET /metrics every
	// IntervalS seconds) or "simulator" (the virtual engine's own state,
	// exact, time-weighted).
	Source    string  `json:"source"`
	Samples   int     `json:"samples"`
	IntervalS float64 `json:"interval_s,omitempty"`

	NumRequestsRunningPeak float64 `json:"num_requests_running_peak"`
	NumRequestsRunningMean float64 `json:"num_requests_running_mean"`
	NumRequestsWaitingPeak float64 `json:"num_requests_waiting_peak"`
	NumRequestsWaitingMean float64 `json:"num_requests_waiting_mean"`
	// WaitingShare is the share of the level during which requests were
	// waiting, and NumRequestsRunningWhenWaiting the median of running
	// requests then: a batch held at its peak whenever requests queue is
	// a cap (max running requests), not a ramp. (The median, not the mean:
	// the batch dips for an instant each time requests finish together.)
	WaitingShare                  float64 `json:"waiting_share"`
	NumRequestsRunningWhenWaiting float64 `json:"num_requests_running_when_waiting"`
	KVCacheUsagePeak              float64 `json:"kv_cache_usage_peak"` // share of the KV cache held by requests, 0..1
	KVCacheUsageMean              float64 `json:"kv_cache_usage_mean"`
	Preemptions                   float64 `json:"preemptions"` // requests preempted (vLLM) or retracted (SGLang) during the level
	// PrefixCacheHitRate is the share of prompt tokens the prefix cache
	// served during the level (0 when prompts were processed and none
	// was looked up: the cache is off); nil when the engine processed no
	// prompt or does not say.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate"`
	PromptTokens       float64  `json:"prompt_tokens"`
	GenerationTokens   float64  `json:"generation_tokens"`

	// The server's latency histograms over the level (nil when the engine
	// exposes none), in the engine's time.
	TTFT      *ServerLatency `json:"server_ttft,omitempty"`
	QueueTime *ServerLatency `json:"server_queue_time,omitempty"`
	ITL       *ServerLatency `json:"server_itl,omitempty"`
	E2E       *ServerLatency `json:"server_e2el,omitempty"`

	// Missing names what the engine did not expose (a metric family an
	// older release lacks), so a zero is never mistaken for a measurement.
	Missing []string `json:"missing,omitempty"`
}

// ServerLatency summarises the change of one server-side latency histogram
// over a level. MeanMs is exact (the histogram's sum over its count); the
// percentiles are interpolated inside the engine's buckets (as Prometheus'
// histogram_quantile does), so they are only as fine as the buckets, unless
// Exact says the values themselves were at hand (the simulator).
type ServerLatency struct {
	Count  float64 `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	Exact  bool    `json:"exact,omitempty"`
	// P50Bucket, P90Bucket and P99Bucket are the histogram buckets that
	// hold each percentile: all a histogram knows of it (nil when Exact,
	// or read from an older file).
	P50Bucket *Bucket `json:"p50_bucket_ms,omitempty"`
	P90Bucket *Bucket `json:"p90_bucket_ms,omitempty"`
	P99Bucket *Bucket `json:"p99_bucket_ms,omitempty"`
}

// Bucket is one histogram bucket, (LoMs, HiMs] in milliseconds; Open
// marks the last one, above LoMs without bound (HiMs is then 0).
type Bucket struct {
	LoMs float64 `json:"lo"`
	HiMs float64 `json:"hi"`
	Open bool    `json:"open,omitempty"`
}

// String writes the bucket as a value at its resolution: "≤ 300" for the
// first bucket, "300-500" inside, "> 20000" past the last bound.
func (b Bucket) String() string {
	f := func(v float64) string { return strconv.FormatFloat(sig4(v), 'f', -1, 64) }
	switch {
	case b.Open:
		return "> " + f(b.LoMs)
	case b.LoMs <= 0:
		return "≤ " + f(b.HiMs)
	}
	return f(b.LoMs) + "-" + f(b.HiMs)
}

// Scale multiplies every duration of m by k (from a time-scaled engine's
// real clock back to its own time); counts and gauges stay.
func (m *EngineMetrics) Scale(k float64) {
	if m == nil || k == 1 {
		return
	}
	for _, l := range []*ServerLatency{m.TTFT, m.QueueTime, m.ITL, m.E2E} {
		if l != nil {
			l.MeanMs, l.P50Ms, l.P90Ms, l.P99Ms = l.MeanMs*k, l.P50Ms*k, l.P90Ms*k, l.P99Ms*k
			for _, b := range []*Bucket{l.P50Bucket, l.P90Bucket, l.P99Bucket} {
				if b != nil {
					b.LoMs, b.HiMs = b.LoMs*k, b.HiMs*k
				}
			}
		}
	}
}

// GPUUsage is what NVML saw of the level's GPUs while it was measured
// (gpu.Usage, the summary of GPU samples that a level's and a trial's in
// the report both come from). Over GPUs, power and energy are sums (the GPUs serve one
// engine together); utilisation and clock are means over every sample of
// every GPU; peaks are the one GPU's highest.
type GPUUsage struct {
	GPUs    int `json:"gpus"`
	Samples int `json:"samples"`
	// EnergyJ is the energy the GPUs drew during the level, summed over
	// GPUs: from each GPU's energy counter where it has one, else the
	// power readings integrated over time.
	EnergyJ float64 `json:"energy_j"`
	// OutputTokensPerJoule is the level's output tokens over EnergyJ.
	OutputTokensPerJoule float64 `json:"output_tokens_per_joule"`
	MeanPowerW           float64 `json:"mean_power_w"` // the sum over GPUs of each GPU's mean power
	PeakPowerW           float64 `json:"peak_power_w"` // the highest one GPU drew
	MeanUtilPct          float64 `json:"mean_util_pct"`
	MeanMemUtilPct       float64 `json:"mean_mem_util_pct"`
	PeakMemUsedBytes     uint64  `json:"peak_mem_used_bytes"` // the fullest GPU
	MeanSMClockMHz       float64 `json:"mean_sm_clock_mhz"`
	PeakTempC            float64 `json:"peak_temp_c"`
}

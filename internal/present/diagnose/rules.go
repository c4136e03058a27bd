package diagnose

import (
	"fmt"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// The thresholds of the rules, and why they sit where they do.
const (
	// kvRoom: below this KV usage peak the cache had room for more
	// requests (vLLM preempts near 100%; 10% spare is room for a few
	// more sequences of typical length).
	kvRoom = 0.90
	// kvFull: at or above this peak, with requests waiting, the cache is
	// what holds them back.
	kvFull = 0.95
	// waitedMostly: requests queued for at least this share of the level:
	// a queue that persists, not the first instants of a burst.
	waitedMostly = 0.5
	// pinned: the batch held within 10% of its peak whenever requests
	// waited: a ceiling, not a ramp.
	pinned = 0.9
	// minQueue: at least one request waiting on average: a queue, not a
	// request between two steps.
	minQueue = 1
	// minTTFTms: below this server-side TTFT, where it goes matters little.
	minTTFTms = 50
	// mostly: the share of TTFT that makes one part of it the dominant one.
	mostly = 0.5
	// underusedPct: GPUs busy less than half the time, with nothing
	// waiting, have room for more load.
	underusedPct = 50
	// overheadMs and overheadShare: the client's TTFT exceeds the
	// server's by more than both (20 ms is a loaded LAN round trip and
	// first-chunk handling; a quarter of the server's own time).
	overheadMs    = 20
	overheadShare = 0.25
	// lateMs: p99 send lateness of an open-loop client past which the
	// offered load is not the asked one.
	lateMs = 10
	// coldHitRate: the share of prompt tokens a prefix cache may serve on
	// a workload whose prompts share no prefix before the prompts must
	// have been seen before. A chat template or a common first block
	// reaches a few percent (one 16-token block of a 1,024-token prompt is
	// 1.6%); a repeated prompt is served whole.
	coldHitRate = 0.10
)

// Rules are the diagnoses, most pressing first.
var Rules = []Rule{
	{"max_running_requests", "requests wait while the KV cache has room: the cap on running requests binds", maxRunning},
	{"kv_memory", "preemptions, or a full KV cache with requests waiting: the cache needs memory", kvMemory},
	{"ttft_queueing", "server-side TTFT is mostly time in the queue", ttftQueueing},
	{"ttft_prefill", "server-side TTFT is mostly prefill (the prompt's computation)", ttftPrefill},
	{"gpu_underused", "the GPUs are idle half the time with nothing waiting", gpuUnderused},
	{"client_overhead", "the client's TTFT is far above the server's: network or client overhead", clientOverhead},
	{"client_late", "the client sent requests later than the arrival schedule", clientLate},
	{"overloaded", "most completed requests missed the goodput limits and TTFT is long: the load is past the configuration's capacity", overloaded},
	{"prefix_cache_warm", "the prefix cache served many prompt tokens of a workload that shares no prefixes: the prompts were sent before", prefixCacheWarm},
}

func pct(v float64) float64 { return 100 * v }

func maxRunning(in Input) (Finding, bool) {
	e := in.Level.Summary.Engine
	if e == nil || e.Preemptions > 0 || e.KVCacheUsagePeak >= kvRoom {
		return Finding{}, false
	}
	if e.WaitingShare < waitedMostly || e.NumRequestsWaitingMean < minQueue {
		return Finding{}, false
	}
	if e.NumRequestsRunningPeak <= 0 || e.NumRequestsRunningWhenWaiting < pinned*e.NumRequestsRunningPeak {
		return Finding{}, false
	}
	// The batch took every request the client had in flight: the client,
	// not the engine, set its size.
	if c := in.Level.Load.MaxConcurrency; c > 0 && e.NumRequestsRunningPeak >= float64(c) {
		return Finding{}, false
	}
	// A known cap the batch stayed clear of is not what binds (the token
	// budget or the scheduler's reserve is).
	if limit, ok := in.Settings.Int("max_running_requests"); ok && e.NumRequestsRunningPeak < pinned*float64(limit) {
		return Finding{}, false
	}
	f := Finding{Severity: Action,
		Summary: fmt.Sprintf("requests waited while the KV cache had room: the batch held at %g running requests while %.1f waited on average (peak %g, %.0f%% of the level), and the KV cache peaked at %.1f%% with no preemption",
			e.NumRequestsRunningPeak, e.NumRequestsWaitingMean, e.NumRequestsWaitingPeak, pct(e.WaitingShare), pct(e.KVCacheUsagePeak)),
		Advice: fmt.Sprintf("raise %s so the batch grows into the free cache", in.flag("max_running_requests")),
		Evidence: []Evidence{
			{"num_requests_running_peak", e.NumRequestsRunningPeak, "requests"},
			{"num_requests_running_when_waiting", e.NumRequestsRunningWhenWaiting, "requests"},
			{"num_requests_waiting_mean", e.NumRequestsWaitingMean, "requests"},
			{"num_requests_waiting_peak", e.NumRequestsWaitingPeak, "requests"},
			{"waiting_share", pct(e.WaitingShare), "%"},
			{"kv_cache_usage_peak", pct(e.KVCacheUsagePeak), "%"},
		},
	}
	if e.QueueTime != nil {
		f.Summary += fmt.Sprintf("; requests spent %.0f ms in the queue on average", e.QueueTime.MeanMs)
		f.Evidence = append(f.Evidence, Evidence{"server_queue_time_mean", e.QueueTime.MeanMs, "ms"})
	}
	if limit, ok := in.Settings.Int("max_running_requests"); ok {
		f.Evidence = append(f.Evidence, Evidence{"max_running_requests", float64(limit), "requests"})
	}
	return f, true
}

func kvMemory(in Input) (Finding, bool) {
	e := in.Level.Summary.Engine
	if e == nil {
		return Finding{}, false
	}
	full := e.KVCacheUsagePeak >= kvFull && e.NumRequestsWaitingMean >= 1
	if e.Preemptions <= 0 && !full {
		return Finding{}, false
	}
	what := fmt.Sprintf("%g requests were preempted (their KV recomputed)", e.Preemptions)
	if e.Preemptions <= 0 {
		what = "no preemption, but"
	} else {
		what += ";"
	}
	return Finding{Severity: Action,
		Summary: fmt.Sprintf("the KV cache ran out: %s the cache peaked at %.1f%% while %.1f requests waited on average",
			what, pct(e.KVCacheUsagePeak), e.NumRequestsWaitingMean),
		Advice: fmt.Sprintf("give the KV cache more memory: raise %s, store it in FP8 with %s fp8, or shard the model over more GPUs with a higher %s",
			in.flag("gpu_memory_fraction"), engine.Flag(in.engine(), "kv_cache_dtype"), in.flag("tensor_parallel")),
		Evidence: []Evidence{
			{"preemptions", e.Preemptions, ""},
			{"kv_cache_usage_peak", pct(e.KVCacheUsagePeak), "%"},
			{"kv_cache_usage_mean", pct(e.KVCacheUsageMean), "%"},
			{"num_requests_waiting_mean", e.NumRequestsWaitingMean, "requests"},
		},
	}, true
}

// ttftSplit returns the server's mean TTFT and queue time when both are
// known and TTFT is long enough to matter.
func ttftSplit(in Input) (ttft, queue float64, ok bool) {
	e := in.Level.Summary.Engine
	if e == nil || e.TTFT == nil || e.QueueTime == nil || e.TTFT.MeanMs < minTTFTms {
		return 0, 0, false
	}
	return e.TTFT.MeanMs, min(e.QueueTime.MeanMs, e.TTFT.MeanMs), true
}

func ttftQueueing(in Input) (Finding, bool) {
	ttft, queue, ok := ttftSplit(in)
	if !ok || queue < mostly*ttft {
		return Finding{}, false
	}
	return Finding{Severity: Info,
		Summary: fmt.Sprintf("TTFT is mostly queueing: requests waited %.0f ms of their %.0f ms server-side TTFT (%.0f%%) before their prompt was scheduled",
			queue, ttft, 100*queue/ttft),
		Advice: fmt.Sprintf("the scheduler admits prompts more slowly than they come: offer fewer at once or add replicas; with KV cache to spare, a larger token budget per step admits more prompts per step: raise %s",
			in.flag("max_batched_tokens")),
		Evidence: []Evidence{{"server_ttft_mean", ttft, "ms"}, {"server_queue_time_mean", queue, "ms"}, {"queue_share_of_ttft", 100 * queue / ttft, "%"}},
	}, true
}

func ttftPrefill(in Input) (Finding, bool) {
	ttft, queue, ok := ttftSplit(in)
	if !ok || ttft-queue < mostly*ttft {
		return Finding{}, false
	}
	s := in.Level.Summary
	f := Finding{Severity: Info,
		Summary: fmt.Sprintf("TTFT is mostly prefill: %.0f ms of the %.0f ms server-side TTFT (%.0f%%) went to computing the prompt after it was scheduled",
			ttft-queue, ttft, 100*(ttft-queue)/ttft),
		Advice: fmt.Sprintf("prefill-bound: %sgive prefill a larger token budget per step with a higher %s, or compute it on more GPUs with a higher %s",
			prefixReuse(in), in.flag("max_batched_tokens"), in.flag("tensor_parallel")),
		Evidence: []Evidence{{"server_ttft_mean", ttft, "ms"}, {"server_queue_time_mean", queue, "ms"}, {"prefill_share_of_ttft", 100 * (ttft - queue) / ttft, "%"}},
	}
	if s.Completed > 0 {
		f.Evidence = append(f.Evidence, Evidence{"mean_prompt_tokens", float64(s.TotalInputTokens) / float64(s.Completed), "tokens"})
	}
	return f, true
}

// prefixReuse is the prefix-cache advice of a prefill-bound level, ""
// where the run's own state rules it out: prompts that share nothing
// (random prompts: nothing to reuse), a cache already on, or one already
// serving prompt tokens (its hit rate above zero).
func prefixReuse(in Input) string {
	if in.CacheCold {
		return ""
	}
	if e := in.Level.Summary.Engine; e != nil && e.PrefixCacheHitRate != nil && *e.PrefixCacheHitRate > 0 {
		return ""
	}
	on, known := in.Settings.Bool("prefix_caching")
	if !known || on {
		// Unknown: both engines cache prefixes by default (vLLM V1,
		// SGLang's radix cache), so the advice would be to do nothing.
		return ""
	}
	return "reuse shared prompt prefixes with " + prefixCache(in) + ", "
}

// prefixCache names how the engine reuses prefixes: vLLM's flag turns it
// on; SGLang's radix cache is on unless its flag turns it off.
func prefixCache(in Input) string {
	if in.engine() == engine.SGLang {
		return "SGLang's radix cache (on unless " + engine.Flag(engine.SGLang, "prefix_caching") + ")"
	}
	return in.flag("prefix_caching")
}

func gpuUnderused(in Input) (Finding, bool) {
	s := in.Level.Summary
	g, e := s.GPU, s.Engine
	if g == nil || g.Samples == 0 || g.MeanUtilPct >= underusedPct || (e != nil && e.NumRequestsWaitingMean >= 1) {
		return Finding{}, false
	}
	return Finding{Severity: Warning,
		Summary: fmt.Sprintf("the GPUs were busy %.0f%% of the level on average (%d GPUs, %.0f W) with no queue to work off", g.MeanUtilPct, g.GPUs, g.MeanPowerW),
		Advice: fmt.Sprintf("this load does not fill the configuration: raise the load to find its capacity, or serve it on fewer GPUs with a lower %s",
			in.flag("tensor_parallel")),
		Evidence: []Evidence{{"gpu_util_mean", g.MeanUtilPct, "%"}, {"gpus", float64(g.GPUs), ""}, {"gpu_power_mean", g.MeanPowerW, "W"}},
	}, true
}

func clientOverhead(in Input) (Finding, bool) {
	s := in.Level.Summary
	e := s.Engine
	if e == nil || e.TTFT == nil || s.TTFT.N == 0 {
		return Finding{}, false
	}
	gap := s.TTFT.Mean - e.TTFT.MeanMs
	if gap <= overheadMs || gap <= overheadShare*e.TTFT.MeanMs {
		return Finding{}, false
	}
	return Finding{Severity: Warning,
		Summary: fmt.Sprintf("the client's TTFT is %.0f ms above the server's (mean %.1f ms measured here, %.1f ms by the engine): network or client overhead, so the latency figures are suspect",
			gap, s.TTFT.Mean, e.TTFT.MeanMs),
		Advice:   "benchmark from closer to the server (the same host or network), from a less loaded machine, or with fewer streams per client process",
		Evidence: []Evidence{{"client_ttft_mean", s.TTFT.Mean, "ms"}, {"server_ttft_mean", e.TTFT.MeanMs, "ms"}, {"overhead", gap, "ms"}},
	}, true
}

func clientLate(in Input) (Finding, bool) {
	s := in.Level.Summary
	// With a concurrency cap, lateness is also the wait for a free slot,
	// by design; only a pure open-loop schedule tells on the client.
	if in.Level.Load.Rate <= 0 || in.Level.Load.MaxConcurrency > 0 || s.Queue.N == 0 || s.Queue.P99 <= lateMs {
		return Finding{}, false
	}
	return Finding{Severity: Warning,
		Summary: fmt.Sprintf("the client sent requests late: p99 %.1f ms (mean %.2f ms) behind the arrival schedule at %s requests/s", s.Queue.P99, s.Queue.Mean, measure.FormatRate(in.Level.Load.Rate)),
		Advice:  "the offered load was lower and smoother than asked: run the benchmark on a less loaded machine, or split the load over several clients",
		Evidence: []Evidence{{"send_lateness_p99", s.Queue.P99, "ms"}, {"send_lateness_mean", s.Queue.Mean, "ms"},
			{"request_rate", in.Level.Load.Rate, "req/s"}},
	}, true
}

func prefixCacheWarm(in Input) (Finding, bool) {
	e := in.Level.Summary.Engine
	if !in.CacheCold || e == nil || e.PrefixCacheHitRate == nil || *e.PrefixCacheHitRate <= coldHitRate {
		return Finding{}, false
	}
	hit := *e.PrefixCacheHitRate
	f := Finding{Severity: Warning,
		Summary:  fmt.Sprintf("the prefix cache served %.1f%% of the prompt tokens although the workload's prompts share no prefix: the server had seen these prompts before (an earlier run or level with the same seed), so TTFT is lower than a cold cache gives", pct(hit)),
		Advice:   "measure with fresh prompts (leave --seed unset: each run and level draws its own) or empty the server's prefix cache first (vLLM: POST /reset_prefix_cache, served with VLLM_SERVER_DEV_MODE=1; SGLang: POST /flush_cache)",
		Evidence: []Evidence{{"prefix_cache_hit_rate", pct(hit), "%"}},
	}
	if e.PromptTokens > 0 {
		f.Evidence = append(f.Evidence, Evidence{"prompt_tokens", e.PromptTokens, "tokens"})
	}
	return f, true
}

// overloadGoodShare and overloadTTFTms: a level whose goodput is under
// half its request throughput with a median TTFT over a second is past
// capacity: requests queue, and most of them miss the limits.
const (
	overloadGoodShare = 0.5
	overloadTTFTms    = 1000
)

func overloaded(in Input) (Finding, bool) {
	s := in.Level.Summary
	if s.GoodputSLO == nil || !(s.RequestThroughput > 0) || s.RequestGoodput >= overloadGoodShare*s.RequestThroughput || s.TTFT.Median < overloadTTFTms {
		return Finding{}, false
	}
	return Finding{Severity: Warning,
		Summary: fmt.Sprintf("overloaded: %.3g of %.3g req/s met the goodput limits (%.0f%%) and the median TTFT is %.1f s: requests queue past the configuration's capacity, so throughput here is not a rate it serves within the SLO",
			s.RequestGoodput, s.RequestThroughput, 100*s.RequestGoodput/s.RequestThroughput, s.TTFT.Median/1000),
		Advice:   "offer less load (a lower --request-rate or --max-concurrency) to find the rate it serves within the limits, or add replicas",
		Evidence: []Evidence{{"request_goodput", s.RequestGoodput, "req/s"}, {"request_throughput", s.RequestThroughput, "req/s"}, {"ttft_median", s.TTFT.Median, "ms"}},
	}, true
}

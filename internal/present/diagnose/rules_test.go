package diagnose

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
)

// healthy is a level no rule has anything to say about: a batch that took
// every request offered, KV to spare, short TTFT, client and server agree,
// busy GPUs.
func healthy() Input {
	s := measure.Summary{Completed: 200, TotalInputTokens: 200 * 1024, TotalOutputTokens: 200 * 128, MaxConcurrency: 48,
		TTFT: measure.Stats{N: 200, Mean: 42}, Queue: measure.Stats{N: 200, Mean: 0.1, P99: 0.4},
		Engine: &measure.EngineMetrics{Engine: "vllm", Source: "scrape", Samples: 30,
			NumRequestsRunningPeak: 48, NumRequestsRunningMean: 44, NumRequestsWaitingPeak: 12, NumRequestsWaitingMean: 0.6,
			WaitingShare: 0.1, NumRequestsRunningWhenWaiting: 20, KVCacheUsagePeak: 0.3, KVCacheUsageMean: 0.25,
			TTFT:      &measure.ServerLatency{Count: 200, MeanMs: 40},
			QueueTime: &measure.ServerLatency{Count: 200, MeanMs: 5}},
		GPU: &measure.GPUUsage{GPUs: 1, Samples: 40, EnergyJ: 9000, MeanUtilPct: 92, MeanPowerW: 600},
	}
	load := measure.Load{MaxConcurrency: 48}
	return Input{Engine: engine.VLLM, Level: measure.NewLevel(load, s, nil)}
}

// with returns healthy() changed by fn (on a deep enough copy).
func with(fn func(*Input, *measure.EngineMetrics, *measure.Summary)) Input {
	in := healthy()
	e := *in.Level.Summary.Engine
	tt, qt := *e.TTFT, *e.QueueTime
	e.TTFT, e.QueueTime = &tt, &qt
	g := *in.Level.Summary.GPU
	in.Level.Summary.Engine, in.Level.Summary.GPU = &e, &g
	fn(&in, &e, &in.Level.Summary)
	return in
}

// capped is the done-when case: a cap of 8 under 48 concurrent requests.
func capped(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
	e.NumRequestsRunningPeak, e.NumRequestsRunningMean, e.NumRequestsRunningWhenWaiting = 8, 7.9, 8
	e.NumRequestsWaitingPeak, e.NumRequestsWaitingMean, e.WaitingShare = 40, 33.4, 0.95
	e.KVCacheUsagePeak = 0.02
}

func TestRules(t *testing.T) {
	tests := []struct {
		rule     string
		fires    Input
		notFires Input
		want     []string // substrings of the finding's line
	}{
		{"max_running_requests",
			with(func(in *Input, e *measure.EngineMetrics, s *measure.Summary) {
				capped(in, e, s)
				in.Settings = engine.Settings{"max_running_requests": 8}
			}),
			// The same queue with the batch ramping, not held (a burst at
			// the start of a level under a cap of 256).
			with(func(in *Input, e *measure.EngineMetrics, s *measure.Summary) {
				capped(in, e, s)
				e.NumRequestsRunningPeak, e.NumRequestsRunningWhenWaiting, e.NumRequestsWaitingMean, e.WaitingShare = 48, 35.6, 5.2, 0.42
			}),
			[]string{"[action] concurrency=48", "--max-num-seqs (now 8)", "held at 8 running", "33.4 waited", "peak 40", "KV cache peaked at 2.0%"}},
		{"max_running_requests",
			// The quick start's trial 0 at concurrency 64: a cap of 57 keeps
			// a queue of 8 that costs most of its TTFT.
			with(func(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				in.Level.Load.MaxConcurrency = 64
				in.Settings = engine.Settings{"max_running_requests": 57}
				e.NumRequestsRunningPeak, e.NumRequestsRunningMean, e.NumRequestsRunningWhenWaiting = 57, 52.2, 57
				e.NumRequestsWaitingPeak, e.NumRequestsWaitingMean, e.WaitingShare, e.KVCacheUsagePeak = 63, 8.1, 0.91, 0.10
			}),
			// Less than one request waiting on average is a request between
			// two steps, not a queue.
			with(func(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				in.Level.Load.MaxConcurrency = 64
				e.NumRequestsRunningPeak, e.NumRequestsRunningMean, e.NumRequestsRunningWhenWaiting = 57, 56, 57
				e.NumRequestsWaitingPeak, e.NumRequestsWaitingMean, e.WaitingShare = 3, 0.7, 0.6
			}),
			[]string{"held at 57 running", "8.1 waited", "--max-num-seqs (now 57)"}},
		{"kv_memory",
			with(func(_ *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				e.Preemptions, e.KVCacheUsagePeak, e.NumRequestsWaitingMean = 17, 0.99, 6.5
			}),
			// A full cache with nobody waiting is a cache doing its job.
			with(func(_ *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				e.KVCacheUsagePeak, e.NumRequestsWaitingMean = 0.97, 0.2
			}),
			[]string{"17 requests were preempted", "99.0%", "--gpu-memory-utilization", "--kv-cache-dtype fp8", "--tensor-parallel-size"}},
		{"ttft_queueing",
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) {
				e.TTFT.MeanMs, e.QueueTime.MeanMs, s.TTFT.Mean = 5005, 4871, 5010
			}),
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) {
				e.TTFT.MeanMs, e.QueueTime.MeanMs, s.TTFT.Mean = 45, 40, 46 // short: where it goes hardly matters
			}),
			[]string{"waited 4871 ms of their 5005 ms", "97%"}},
		{"ttft_prefill",
			with(func(in *Input, e *measure.EngineMetrics, s *measure.Summary) {
				e.TTFT.MeanMs, e.QueueTime.MeanMs, s.TTFT.Mean = 900, 100, 905
				in.Settings = engine.Settings{"prefix_caching": false}
			}),
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) {
				e.TTFT.MeanMs, e.QueueTime.MeanMs, s.TTFT.Mean = 900, 600, 905
			}),
			[]string{"800 ms of the 900 ms", "--max-num-batched-tokens", "--enable-prefix-caching"}},
		{"gpu_underused",
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) { s.GPU.MeanUtilPct = 31 }),
			// Idle GPUs while requests queue are not under-used: something else binds.
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) {
				s.GPU.MeanUtilPct, e.NumRequestsWaitingMean = 31, 4
			}),
			[]string{"busy 31%", "fewer GPUs with a lower --tensor-parallel-size"}},
		{"client_overhead",
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) {
				s.TTFT.Mean, e.TTFT.MeanMs = 862.9, 430.2
			}),
			with(func(_ *Input, e *measure.EngineMetrics, s *measure.Summary) { s.TTFT.Mean, e.TTFT.MeanMs = 57, 40 }),
			[]string{"433 ms above the server's", "862.9", "430.2", "suspect"}},
		{"client_late",
			with(func(in *Input, _ *measure.EngineMetrics, s *measure.Summary) {
				in.Level.Load = measure.Load{Rate: 50}
				s.Queue.P99, s.Queue.Mean = 37.5, 4.2
			}),
			// The same lateness under a concurrency cap is the wait for a slot.
			with(func(in *Input, _ *measure.EngineMetrics, s *measure.Summary) {
				in.Level.Load = measure.Load{Rate: 50, MaxConcurrency: 16}
				s.Queue.P99, s.Queue.Mean = 37.5, 4.2
			}),
			[]string{"p99 37.5 ms", "50 requests/s"}},
		{"prefix_cache_warm",
			with(func(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				r := 0.969
				in.CacheCold, e.PrefixCacheHitRate = true, &r
			}),
			// Shared prefixes are what a prefix cache is for.
			with(func(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				r := 0.969
				e.PrefixCacheHitRate = &r
			}),
			[]string{"[warning] concurrency=48", "96.9%", "share no prefix", "/reset_prefix_cache", "/flush_cache"}},
	}
	tests = append(tests, struct {
		rule     string
		fires    Input
		notFires Input
		want     []string
	}{"overloaded",
		// The observed bench: goodput 0.26 of 5.77 req/s, median TTFT 3.3 s.
		with(func(_ *Input, _ *measure.EngineMetrics, s *measure.Summary) {
			s.GoodputSLO = &measure.SLO{TTFTms: 2000}
			s.RequestThroughput, s.RequestGoodput, s.TTFT.Median = 5.77, 0.26, 3300
		}),
		with(func(_ *Input, _ *measure.EngineMetrics, s *measure.Summary) {
			s.GoodputSLO = &measure.SLO{TTFTms: 2000}
			s.RequestThroughput, s.RequestGoodput, s.TTFT.Median = 5.77, 5.5, 3300
		}),
		[]string{"[warning]", "Overloaded: 0.26 of 5.77 req/s", "3.3 s", "Offer less load"}})
	tested := map[string]bool{}
	for _, tt := range tests {
		tested[tt.rule] = true
	}
	for _, r := range Rules {
		if !tested[r.Name] {
			t.Errorf("rule %s has no test", r.Name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			fs := Level(tt.fires)
			i := slices.IndexFunc(fs, func(f Finding) bool { return f.Rule == tt.rule })
			if i < 0 {
				t.Fatalf("no %s finding in %v", tt.rule, fs)
			}
			line := fs[i].String()
			for _, w := range tt.want {
				if !strings.Contains(line, w) {
					t.Errorf("finding %q lacks %q", line, w)
				}
			}
			if len(fs[i].Evidence) == 0 {
				t.Error("a finding without evidence")
			}
			for _, f := range Level(tt.notFires) {
				if f.Rule == tt.rule {
					t.Errorf("near miss produced %s", f)
				}
			}
		})
	}
	if fs := Level(healthy()); len(fs) != 0 {
		t.Errorf("a healthy level has findings: %v", fs)
	}
}

// TestNoEngineMetrics: without the engine's view only the client- and
// GPU-side rules can speak, and none invents an engine figure.
func TestNoEngineMetrics(t *testing.T) {
	in := with(capped)
	in.Level.Summary.Engine = nil
	in.Level.Summary.GPU = nil
	if fs := Level(in); len(fs) != 0 {
		t.Errorf("findings without metrics: %v", fs)
	}
}

// TestSGLangSpelling: advice names SGLang's own flags.
func TestSGLangSpelling(t *testing.T) {
	in := with(capped)
	in.Engine = ""
	in.Level.Summary.Engine.Engine = "sglang"
	fs := Level(in)
	if len(fs) == 0 || !strings.Contains(fs[0].Advice, "--max-running-requests") || strings.Contains(fs[0].Advice, "--max-num-seqs") {
		t.Errorf("SGLang advice %v", fs)
	}
	in.Level.Summary.Engine.TTFT.MeanMs, in.Level.Summary.Engine.QueueTime.MeanMs = 900, 100
	in.Settings = engine.Settings{"prefix_caching": false}
	for _, f := range Level(in) {
		if f.Rule == "ttft_prefill" && (!strings.Contains(f.Advice, "radix cache") || !strings.Contains(f.Advice, "--chunked-prefill-size")) {
			t.Errorf("SGLang prefill advice %q", f.Advice)
		}
	}
}

// TestFindingJSON: the shape a report renders.
func TestFindingJSON(t *testing.T) {
	fs := Level(with(capped))
	b, err := json.Marshal(fs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"rule":"max_running_requests"`, `"severity":"action"`, `"level":"concurrency=48"`, `"summary":`, `"advice":`,
		`"evidence":[{"name":"num_requests_running_peak","value":8,"unit":"requests"}`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s lacks %s", b, key)
		}
	}
}

// TestPrefixCacheWarm: a cache-cold workload (no shared prefixes) whose
// prompt tokens the cache served at 96.9% (prompts re-sent to a server
// that kept its cache) is a warning with its numbers; a few percent (a
// chat template's first block), or a workload built on shared prefixes,
// is not.
func TestPrefixCacheWarm(t *testing.T) {
	rate := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		cold bool
		hit  *float64
		want bool
	}{
		{"cold workload, cache hit 96.9%", true, rate(0.969), true},
		{"cold workload, cache hit 2%", true, rate(0.02), false},
		{"shared prefixes, cache hit 96.9%", false, rate(0.969), false},
		{"no hit rate exposed", true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := with(func(in *Input, e *measure.EngineMetrics, _ *measure.Summary) {
				in.CacheCold, e.PrefixCacheHitRate, e.PromptTokens = tc.cold, tc.hit, 204800
			})
			var got *Finding
			for _, f := range Level(in) {
				if f.Rule == "prefix_cache_warm" {
					got = &f
				}
			}
			if (got != nil) != tc.want {
				t.Fatalf("finding %v, want %v", got, tc.want)
			}
			if got != nil && (!strings.Contains(got.Summary, "96.9%") || got.Severity != Warning || !strings.Contains(got.Advice, "/reset_prefix_cache")) {
				t.Errorf("finding %+v: want a warning with the hit rate and the reset", got)
			}
		})
	}
}

// TestPrefillAdviceFollowsTheRun: a prefill-bound level is told to cache
// prefixes only where that can help: not with the cache on, not while it
// already serves prompt tokens (a trace at a 66.5% hit rate), not with
// random prompts that share nothing.
func TestPrefillAdviceFollowsTheRun(t *testing.T) {
	base := func(fn func(*Input, *measure.EngineMetrics)) Input {
		return with(func(in *Input, e *measure.EngineMetrics, s *measure.Summary) {
			e.TTFT.MeanMs, e.QueueTime.MeanMs, s.TTFT.Mean = 900, 100, 905
			in.Settings = engine.Settings{"prefix_caching": false}
			fn(in, e)
		})
	}
	hit := 0.665
	for name, in := range map[string]Input{
		"cache on":         base(func(in *Input, _ *measure.EngineMetrics) { in.Settings["prefix_caching"] = true }),
		"hits already":     base(func(_ *Input, e *measure.EngineMetrics) { e.PrefixCacheHitRate = &hit }),
		"random prompts":   base(func(in *Input, _ *measure.EngineMetrics) { in.CacheCold = true }),
		"settings unknown": base(func(in *Input, _ *measure.EngineMetrics) { in.Settings = nil }),
	} {
		for _, f := range Level(in) {
			if f.Rule == "ttft_prefill" && strings.Contains(f.Advice, "prefix") {
				t.Errorf("%s: advice %q names prefix caching", name, f.Advice)
			}
		}
	}
}

// TestAdviceSaysWhatWasSearched: advice to change a setting the study
// searched says so, with the values searched and the one recommended;
// without Searched it keeps the current value alone.
func TestAdviceSaysWhatWasSearched(t *testing.T) {
	in := with(capped)
	in.Settings = engine.Settings{"max_running_requests": 8}
	plain := Level(in)
	if len(plain) == 0 || !strings.Contains(plain[0].Advice, "(now 8)") || strings.Contains(plain[0].Advice, "searched") {
		t.Fatalf("advice without a search: %v", plain)
	}
	in.Searched = map[string]string{"max_running_requests": "8 to 512"}
	fs := Level(in)
	if len(fs) == 0 || !strings.Contains(fs[0].Advice, "(now 8: the study searched 8 to 512 and recommends 8)") {
		t.Errorf("advice on a searched setting: %v", fs)
	}
}

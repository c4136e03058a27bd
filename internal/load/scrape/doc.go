// Package scrape reads an inference engine's Prometheus /metrics while a
// load level runs and turns the readings into the level's engine metrics
// (measure.EngineMetrics): running and waiting requests (peak and mean),
// KV-cache usage, preemptions, the prefix-cache hit rate, and the change of
// the server's own TTFT, queue-time, inter-token and end-to-end histograms,
// so the client's latencies can be set against the server's.
//
// Parse reads the text exposition with prometheus/common's expfmt and
// picks vLLM's or SGLang's families by the names in engine.Metrics (the
// current name first, older spellings after: vllm:kv_cache_usage_perc, then
// vllm:gpu_cache_usage_perc). Series of data-parallel ranks are summed
// (requests, counters, histograms) or averaged (KV usage). Aggregate
// reduces a level's snapshots; a Scraper takes them over HTTP:
//
//	s := scrape.New("http://127.0.0.1:8000/metrics", scrape.DefaultInterval, nil, nil)
//	s.Start(ctx)
//	// ... run the level ...
//	m, err := s.Stop() // m.KVCacheUsagePeak, m.NumRequestsWaitingPeak, m.TTFT.MeanMs ...
//
// Concurrency: Parse and Aggregate are pure and safe for concurrent use. A
// Scraper's Start and Stop are called once each from one goroutine; its
// reading goroutine has ended when Stop returns.
package scrape

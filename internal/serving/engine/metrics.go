package engine

// MetricNames are the Prometheus families an engine exposes at /metrics
// that servetune reads, by what they measure. Where a release renamed a
// family, the current name comes first and older ones follow; a reader
// takes the first one present. Counters carry their _total suffix as the
// exposition text spells them; histograms are in seconds.
type MetricNames struct {
	Running     []string // gauge: requests in the running batch
	Waiting     []string // gauge: requests queued, not yet scheduled
	KVUsage     []string // gauge: share of KV cache held by requests, 0..1
	Preemptions []string // counter: requests preempted (vLLM) or retracted (SGLang)
	// PrefixQueries and PrefixHits count prompt tokens looked up in the
	// prefix cache and found there; their ratio is the hit rate.
	PrefixQueries []string
	PrefixHits    []string
	HitRate       []string // gauge: the engine's own recent hit rate, when it has no counters
	PromptTokens  []string // counter
	OutputTokens  []string // counter
	TTFT          []string // histogram: arrival to first token, server side
	QueueTime     []string // histogram: arrival to first scheduled
	ITL           []string // histogram: between output tokens
	E2E           []string // histogram: arrival to last token
	// Speculative decoding (vLLM; counters, present only when it is on):
	// drafts verified (one per sequence and step), draft tokens proposed,
	// those accepted, and those accepted by position (label "position").
	// Accepted over draft tokens is the acceptance rate.
	SpecDrafts, SpecDraftTokens, SpecAccepted, SpecAcceptedPerPos []string
}

// Metrics returns e's metric names: vLLM's V1 families (vllm/v1/metrics
// loggers) with their V0 and pre-0.11 spellings, SGLang's
// (srt/metrics collector).
func Metrics(e Engine) MetricNames {
	if e == SGLang {
		return MetricNames{
			Running:       []string{"sglang:num_running_reqs"},
			Waiting:       []string{"sglang:num_queue_reqs"},
			KVUsage:       []string{"sglang:token_usage"},
			Preemptions:   []string{"sglang:num_retracted_requests_total"},
			PrefixQueries: []string{"sglang:prompt_tokens_total"},
			PrefixHits:    []string{"sglang:cached_tokens_total"},
			HitRate:       []string{"sglang:cache_hit_rate"},
			PromptTokens:  []string{"sglang:prompt_tokens_total"},
			OutputTokens:  []string{"sglang:generation_tokens_total"},
			TTFT:          []string{"sglang:time_to_first_token_seconds"},
			QueueTime:     []string{"sglang:queue_time_seconds"},
			ITL:           []string{"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"},
			E2E:           []string{"sglang:e2e_request_latency_seconds"},
		}
	}
	return MetricNames{
		Running:       []string{"vllm:num_requests_running"},
		Waiting:       []string{"vllm:num_requests_waiting"},
		KVUsage:       []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		Preemptions:   []string{"vllm:num_preemptions_total"},
		PrefixQueries: []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"},
		PrefixHits:    []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
		HitRate:       []string{"vllm:gpu_prefix_cache_hit_rate"},
		PromptTokens:  []string{"vllm:prompt_tokens_total"},
		OutputTokens:  []string{"vllm:generation_tokens_total"},
		TTFT:          []string{"vllm:time_to_first_token_seconds"},
		QueueTime:     []string{"vllm:request_queue_time_seconds"},
		ITL:           []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
		E2E:           []string{"vllm:e2e_request_latency_seconds"},

		SpecDrafts:         []string{"vllm:spec_decode_num_drafts_total"},
		SpecDraftTokens:    []string{"vllm:spec_decode_num_draft_tokens_total"},
		SpecAccepted:       []string{"vllm:spec_decode_num_accepted_tokens_total"},
		SpecAcceptedPerPos: []string{"vllm:spec_decode_num_accepted_tokens_per_pos_total"},
	}
}

// MetricPrefix is the prefix of every family e exposes ("vllm:", "sglang:").
func MetricPrefix(e Engine) string { return string(e) + ":" }

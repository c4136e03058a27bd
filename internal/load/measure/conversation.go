package measure

// Conversation is what a multi-turn level adds to its summary (the
// benchmark's conversation dataset): its sessions, each turn index's
// latencies, and how much of the prompts was new and how much repeated
// history a prefix cache could hold. Written under "conversation" in the
// result file; the vLLM keys beside it count every turn as a request.
type Conversation struct {
	Sessions          int `json:"sessions"`
	SessionsCompleted int `json:"sessions_completed"` // every turn answered
	SessionsFailed    int `json:"sessions_failed"`    // ended by a failed turn
	// TurnsNotSent are the turns of failed sessions after the failure:
	// never sent, and counted nowhere else.
	TurnsNotSent int `json:"turns_not_sent"`
	// NewInputTokens are the prompt tokens of answered turns that were not
	// in the turn's history: the new user messages (and a chat template's
	// own tokens). ReusedInputTokens are the history part: the previous
	// turn's prompt and answer, as the server counted them.
	NewInputTokens    int     `json:"new_input_tokens"`
	ReusedInputTokens int     `json:"reused_input_tokens"`
	ReusedShare       float64 `json:"reused_input_share"` // reused / (new + reused)
	// Session latency: a completed session's first send to its last
	// answer, think times included.
	MeanSessionMS   float64 `json:"mean_session_latency_ms"`
	MedianSessionMS float64 `json:"median_session_latency_ms"`
	P99SessionMS    float64 `json:"p99_session_latency_ms"`
	// PrefixCacheHitRate is the engine's own over the level (its
	// counters' change, engine_metrics.prefix_cache_hit_rate); null when
	// the engine's metrics were not read.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate"`
	Turns              []Turn   `json:"turns"`
}

// Turn is one turn index's figures over every session that reached it.
type Turn struct {
	Turn      int `json:"turn"` // 1 for the first
	Sent      int `json:"sent"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// Mean prompt tokens of the completed turns, and their history part.
	MeanInputTokens  float64 `json:"mean_input_tokens"`
	MeanReusedTokens float64 `json:"mean_reused_tokens"`
	MedianTTFTMS     float64 `json:"median_ttft_ms"`
	P99TTFTMS        float64 `json:"p99_ttft_ms"`
	MedianE2ELMS     float64 `json:"median_e2el_ms"`
	P99E2ELMS        float64 `json:"p99_e2el_ms"`
}

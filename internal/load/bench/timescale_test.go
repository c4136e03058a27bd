package bench

import (
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// TestRealClock: a level in the engine's time is sent k times faster, and
// a real-time engine's level is sent as it is.
func TestRealClock(t *testing.T) {
	cfg := Config{Load: measure.Load{Rate: 2, MaxConcurrency: 4}, Timeout: 5 * time.Second, Duration: time.Minute,
		Summary: measure.SummaryOptions{Goodput: measure.SLO{TTFTms: 500}}, TimeScale: 10}
	got := cfg.realClock()
	if got.Load.Rate != 20 || got.Load.MaxConcurrency != 4 || got.Timeout != 500*time.Millisecond || got.Duration != 6*time.Second ||
		got.Summary.Goodput.TTFTms != 500 {
		t.Errorf("sent %+v", got)
	}
	for _, k := range []float64{0, 1} {
		cfg.TimeScale = k
		if got := cfg.realClock(); got.Load != cfg.Load || got.Timeout != cfg.Timeout || got.Duration != cfg.Duration {
			t.Errorf("time scale %v: sent %+v", k, got)
		}
	}
}

// TestSummarizeEngineTime: records of an engine k times faster are
// summarised in its time: the client's instants scale by k, the engine's
// own offsets count as they are.
func TestSummarizeEngineTime(t *testing.T) {
	ms := time.Millisecond
	rec := func() []measure.Record {
		return []measure.Record{{Index: 0, Sched: 10 * ms, Send: 10 * ms, First: 12 * ms, Last: 14 * ms, End: 14 * ms,
			PromptTokens: 8, OutputTokens: 2, EngineClock: true,
			Chunks: []measure.Chunk{{At: 12 * ms, Tokens: 1, Engine: 20 * ms}, {At: 14 * ms, Tokens: 1, Engine: 40 * ms}}}}
	}
	asIs := summarize(rec(), measure.SummaryOptions{}, 1)
	scaled := summarize(rec(), measure.SummaryOptions{}, 10)
	if asIs.TTFT.Median != 2 || scaled.TTFT.Median != 20 || scaled.E2EL.Median != 40 {
		t.Errorf("TTFT %v ms real, %v ms (E2EL %v) in engine time; want 2, 20, 40", asIs.TTFT.Median, scaled.TTFT.Median, scaled.E2EL.Median)
	}
}

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/trace"
)

// DatasetTrace replays a trace file (DatasetSpec.Trace says how to read
// it): each request at its time in the trace, divided by the speed.
const DatasetTrace = "trace"

// validateTrace reports a trace dataset that cannot be read, without
// reading the file.
func (d DatasetSpec) validateTrace() error {
	if d.Path == "" {
		return fmt.Errorf("%w: trace needs a dataset path", ErrBadDataset)
	}
	t := d.Trace
	if t == nil {
		return fmt.Errorf("%w: trace needs a trace format", ErrBadDataset)
	}
	if _, err := trace.ParseFormat(t.Format); err != nil {
		return fmt.Errorf("%w: %w", ErrBadDataset, err)
	}
	if t.Speed < 0 || math.IsNaN(t.Speed) || math.IsInf(t.Speed, 0) {
		return fmt.Errorf("%w: trace speed %g: want a number > 0", ErrBadDataset, t.Speed)
	}
	if t.Start < 0 || t.Duration < 0 {
		return fmt.Errorf("%w: trace start %v and duration %v must not be negative", ErrBadDataset, t.Start, t.Duration)
	}
	return nil
}

// traceRequests reads at most n requests of the trace's window, each with
// its send offset. Lengths are the trace's (at least 1 token each way: a
// BurstGPT row of a failed request asks for 0 and is sent asking for 1);
// prompts (with text) are trace.Prompts rendered by trace.Text, seeded from
// rng, so requests whose hash ids repeat share those token blocks and no
// other text. PrefixID and PrefixTokens carry, for the simulated engine in
// virtual time (which has no text), the longest block prefix a request
// shares with another request of the window (tracePrefixes).
func (d DatasetSpec) traceRequests(rng *rand.Rand, n int, text bool) ([]measure.Request, []time.Duration, error) {
	reqs, offsets, build, err := d.traceRequestsLazy(rng, n, text)
	if err != nil || build == nil {
		return reqs, offsets, err
	}
	for i := range reqs {
		reqs[i].Prompt = build(i)
	}
	return reqs, offsets, nil
}

// traceRequestsLazy is traceRequests leaving every prompt empty: build
// gives request i's (nil without text). A replay builds each as it sends
// it, so memory holds the prompts in flight, not a whole window's (200,000
// requests of thousands of tokens each).
func (d DatasetSpec) traceRequestsLazy(rng *rand.Rand, n int, text bool) ([]measure.Request, []time.Duration, func(i int) string, error) {
	if err := d.validateTrace(); err != nil {
		return nil, nil, nil, err
	}
	t := d.Trace
	tr, err := trace.Load(d.Path, trace.Format(t.Format), trace.Options{Speed: t.Speed, Start: t.Start, Duration: t.Duration, Max: n})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrBadDataset, err)
	}
	if len(tr) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: %s: no request in the window (start %v, duration %v)", ErrBadDataset, d.Path, t.Start, t.Duration)
	}
	seed := rng.Uint64()
	var build func(i int) string
	if text {
		build = func(i int) string {
			p := trace.Prompt(tr[i], i, seed)
			if len(p) == 0 {
				p = []int{0}
			}
			return trace.Text(p)
		}
	}
	ids, lens := tracePrefixes(tr)
	reqs := make([]measure.Request, len(tr))
	offsets := make([]time.Duration, len(tr))
	for i, q := range tr {
		in := max(q.Input, 1)
		reqs[i] = measure.Request{PromptTokens: in, MaxTokens: max(q.Output, 1), PrefixID: ids[i], PrefixTokens: lens[i]}
		offsets[i] = q.Offset
	}
	return reqs, offsets, build, nil
}

// tracePrefixes gives each request the longest run of leading hash ids
// (whole blocks) that another request of reqs also starts with: its group
// (the run's hash) and tokens (the run's length, at most the prompt). -1
// and 0 for a request that shares none. The simulator caches one prefix a
// request (internal/model/sim/core.go), so a request sharing a shorter run
// with one request and a longer one with another counts the longer.
func tracePrefixes(reqs []trace.Request) (ids, tokens []int) {
	runs, names := trace.SharedRuns(reqs)
	ids, tokens = make([]int, len(reqs)), make([]int, len(reqs))
	for i, q := range reqs {
		ids[i] = -1
		if runs[i] > 0 {
			ids[i], tokens[i] = int(names[i]>>2), min(runs[i]*q.BlockSize, q.Input)
		}
		if tokens[i] <= 0 {
			ids[i], tokens[i] = -1, 0
		}
	}
	return ids, tokens
}

// traceWorkload is requests' replacement for a trace dataset: the measured
// requests of the window (at most NumRequests when set) with their
// offsets, and the warm-up's, which are the window's first Warmup requests
// with prompts of their own.
func (cfg Config) traceWorkload(text bool) (reqs, warm []measure.Request, offsets []time.Duration, build func(int) string, err error) {
	n := cfg.NumRequests
	if n == 0 {
		n = MaxRequests + 1
	}
	reqs, offsets, build, err = cfg.Dataset.traceRequestsLazy(rand.New(rand.NewPCG(cfg.Seed, streamData)), n, text)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if len(reqs) > MaxRequests {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: the window holds over %d requests; narrow it (start, duration) or cap it (requests)", ErrBadConfig, cfg.Dataset.Path, MaxRequests)
	}
	keyPrefixes(reqs, cfg.Seed, streamData)
	if cfg.Warmup > 0 {
		if warm, _, err = cfg.Dataset.traceRequests(rand.New(rand.NewPCG(cfg.Seed, streamWarmup)), min(cfg.Warmup, countPool), text); err != nil {
			return nil, nil, nil, nil, err
		}
		keyPrefixes(warm, cfg.Seed, streamWarmup)
	}
	return reqs, warm, offsets, build, nil
}

package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/servetune/servetune/bench"
)

// ErrNoRequests is returned by RunVirtual for an empty workload.
var ErrNoRequests = errors.New("no requests to run")

// RunVirtual runs reqs against the simulated engine in virtual time and
// returns one record per request, as bench.Run would have measured them
// against a real server: Sched from load.Schedule (seeded with seed), Send
// equal to Sched unless the concurrency cap held the request back (then
// when a slot freed), one Chunk per emitted stream message (one token per
// engine step), First/Last at the steps that produced the first and last
// tokens. Requests that do not fit max_model_len fail with http_4xx as the
// engine's 400 would. The error is a *StartupError when cfg does not fit in
// memory.
func RunVirtual(cfg Config, reqs []bench.Request, load bench.Load, seed uint64) ([]bench.Record, error) {
	// The schedule stream matches bench.Run's (PCG(seed, 2)), so `sim run` and
	// `bench` against `sim serve` send on the same schedule for one seed.
	rng := rand.New(rand.NewPCG(seed, 2))
	sched := load.Schedule(rng, len(reqs))
	if len(sched) != len(reqs) {
		if load.Rate > 0 {
			return nil, fmt.Errorf("load schedule gave %d send times for %d requests", len(sched), len(reqs))
		}
		// Rate 0: every request at t=0.
		sched = make([]time.Duration, len(reqs))
	}
	return RunVirtualSchedule(cfg, reqs, sched, load.MaxConcurrency)
}

// RunVirtualSchedule is RunVirtual with explicit intended send offsets
// (sched[i] for reqs[i]) and a client concurrency cap (0 = none).
func RunVirtualSchedule(cfg Config, reqs []bench.Request, sched []time.Duration, maxConcurrency int) ([]bench.Record, error) {
	if len(reqs) == 0 {
		return nil, ErrNoRequests
	}
	if len(sched) != len(reqs) {
		return nil, fmt.Errorf("%d send times for %d requests", len(sched), len(reqs))
	}
	if maxConcurrency < 0 {
		return nil, fmt.Errorf("negative concurrency cap %d", maxConcurrency)
	}
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	est, err := Estimate(cfg)
	if err != nil {
		return nil, err
	}
	cores := make([]*core, cfg.DP)
	busy := make([]bool, cfg.DP)
	ends := make([]float64, cfg.DP)
	for i := range cores {
		cores[i] = newCore(cfg, est)
	}

	recs := make([]bench.Record, len(reqs))
	seqs := make([]seq, len(reqs))
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDur(sched[a], sched[b]) })

	dur := func(sec float64) time.Duration { return time.Duration(math.Round(sec * 1e9)) }
	inflight := 0
	nowSec := 0.0 // the virtual clock, seconds
	emit := func(s *seq, last bool) {
		r := &recs[s.id]
		at := dur(nowSec)
		if s.generated == 1 {
			r.First = at
		}
		r.Last, r.End = at, at
		r.OutputTokens = s.generated
		r.Chunks = append(r.Chunks, bench.Chunk{At: at, Tokens: 1})
		if last {
			inflight--
		}
	}
	start := func(k int, now float64) {
		b, secs := cores[k].schedule()
		if b.tokens == 0 {
			busy[k] = false
			return
		}
		busy[k], ends[k] = true, now+secs
	}

	next := 0
	for {
		tArr := math.Inf(1)
		if next < len(order) && (maxConcurrency == 0 || inflight < maxConcurrency) {
			tArr = math.Max(sched[order[next]].Seconds(), nowSec)
		}
		tStep, k := math.Inf(1), -1
		for i := range cores {
			if busy[i] && ends[i] < tStep {
				tStep, k = ends[i], i
			}
		}
		switch {
		case tArr <= tStep && !math.IsInf(tArr, 1):
			nowSec = tArr
			i := order[next]
			next++
			q := reqs[i]
			r := &recs[i]
			r.Index, r.Sched, r.Send = q.Index, sched[i], dur(nowSec)
			prompt := q.PromptTokens
			if prompt <= 0 {
				prompt = CountTokens(q.Prompt)
			}
			r.PromptTokens = prompt
			maxOut := q.MaxTokens
			if maxOut <= 0 {
				maxOut = cfg.MaxModelLen - prompt
			}
			if prompt+maxOut > cfg.MaxModelLen || prompt <= 0 || maxOut < 1 {
				// The messages sim serve answers with (server.go).
				r.Status, r.Error = 400, bench.ErrHTTP4xx
				switch {
				case prompt <= 0:
					r.ErrorMsg = "The decoder prompt cannot be empty"
				case maxOut < 1:
					r.ErrorMsg = fmt.Sprintf("max_tokens must be at least 1, got %d.", maxOut)
				default:
					r.ErrorMsg = contextLengthMessage(cfg.MaxModelLen, prompt, maxOut)
				}
				r.End = r.Send
				continue
			}
			r.Status = 200
			r.Chunks = make([]bench.Chunk, 0, maxOut)
			s := &seqs[i]
			*s = seq{id: i, prompt: prompt, maxOut: maxOut, prefixID: -1, arrival: nowSec}
			if q.PrefixTokens > 0 {
				s.prefixID, s.prefixTokens = q.PrefixID, q.PrefixTokens
			}
			inflight++
			best := 0
			for j := range cores {
				if cores[j].load() < cores[best].load() {
					best = j
				}
			}
			cores[best].add(s)
			if !busy[best] {
				start(best, nowSec)
			}
		case k >= 0:
			nowSec = tStep
			cores[k].commit(nowSec, emit)
			start(k, nowSec)
		default:
			for i := range recs {
				if recs[i].Status == 200 && recs[i].OutputTokens < seqs[i].maxOut {
					return recs, fmt.Errorf("simulation stalled with request %d unfinished", i)
				}
			}
			return recs, nil
		}
	}
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// contextLengthMessage is vLLM's 400 message for a request that does not fit.
func contextLengthMessage(maxLen, prompt, maxOut int) string {
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		maxLen, prompt+maxOut, prompt, maxOut)
}

package measure

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// foldRecords makes n finished records with chunk times on the engine's
// clock, some failed and some warm-up.
func foldRecords(n int) []Record {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.Index = i
		r.Sched = time.Duration(i) * 7 * time.Millisecond
		r.Send = r.Sched + time.Duration(rng.IntN(3000))*time.Microsecond
		at := r.Send + time.Duration(20+rng.IntN(80))*time.Millisecond
		for j := range 5 + rng.IntN(40) {
			tok := 1 + rng.IntN(3)*(j%7/6)
			r.Chunks = append(r.Chunks, Chunk{At: at, Tokens: tok, Engine: 3 * (at - r.Send), Lag: time.Duration(j) * time.Microsecond})
			r.OutputTokens += tok
			at += time.Duration(5+rng.IntN(30)) * time.Millisecond
		}
		r.First, r.Last = r.Chunks[0].At, r.Chunks[len(r.Chunks)-1].At
		r.End = r.Last + time.Millisecond
		r.PromptTokens = 100
		r.EngineClock = i%3 != 0
		switch i % 11 {
		case 3:
			r.Fail(ErrTimeout, "slow")
		case 5:
			r.Warmup = true
		}
	}
	return recs
}

// TestFoldedMatchesChunks: a level whose chunks are folded as requests end
// summarizes as the same level with its chunks kept (the ITL exactly, the
// peak output on its 10 ms grid), on the real clock and on a time-scaled
// engine's, and keeps no chunk.
func TestFoldedMatchesChunks(t *testing.T) {
	for _, k := range []float64{1, 4} {
		kept, folded := foldRecords(3000), foldRecords(3000)
		if k != 1 {
			EngineTime(kept, k)
		}
		opts := SummaryOptions{Seed: 3, Goodput: SLO{TTFTms: 60}}
		want := Summarize(kept, opts)
		f := NewFolded(9)
		for i := range folded {
			f.Add(&folded[i], k)
			f.Add(&folded[i], k) // a second Add changes nothing
		}
		EngineTime(folded, k) // what bench's summarize does: folded records are left alone
		for i := range folded {
			if folded[i].Chunks != nil {
				t.Fatalf("k=%g: record %d keeps its chunks", k, i)
			}
			if folded[i].First != kept[i].First || folded[i].Send != kept[i].Send || folded[i].End != kept[i].End {
				t.Fatalf("k=%g: record %d: %v/%v/%v, want %v/%v/%v", k, i, folded[i].Send, folded[i].First, folded[i].End, kept[i].Send, kept[i].First, kept[i].End)
			}
		}
		opts.Folded = f
		got := Summarize(folded, opts)
		if got.ITL != want.ITL || got.ITLPerToken != want.ITLPerToken || got.TTFT != want.TTFT || got.TPOT != want.TPOT {
			t.Errorf("k=%g: ITL %+v\nwant %+v", k, got.ITL, want.ITL)
		}
		if got.RequestGoodput != want.RequestGoodput || got.Completed != want.Completed || got.Failed != want.Failed {
			t.Errorf("k=%g: goodput %g completed %d failed %d, want %g %d %d", k, got.RequestGoodput, got.Completed, got.Failed, want.RequestGoodput, want.Completed, want.Failed)
		}
		if d := math.Abs(got.PeakOutputThroughput - want.PeakOutputThroughput); d > 0.05*want.PeakOutputThroughput {
			t.Errorf("k=%g: peak output %g, want %g", k, got.PeakOutputThroughput, want.PeakOutputThroughput)
		}
	}
}

// TestReservoirPastCap: past foldedCap gaps the count, mean and standard
// deviation stay exact and the percentiles come from a uniform sample.
func TestReservoirPastCap(t *testing.T) {
	r := reservoir{rng: rand.New(rand.NewPCG(1, 1))}
	n := 3 * foldedCap
	all := make([]float64, n)
	for i := range all {
		all[i] = float64(i % 1000)
		r.add(all[i])
	}
	if len(r.values) != foldedCap {
		t.Fatalf("kept %d values", len(r.values))
	}
	s := r.stats(nil, 0)
	exact := NewStats(slices.Clone(all), nil, 0)
	if s.N != n || math.Abs(s.Mean-exact.Mean) > 1e-9 || math.Abs(s.Std-exact.Std) > 1e-6 {
		t.Errorf("N %d mean %g std %g, want %d %g %g", s.N, s.Mean, s.Std, n, exact.Mean, exact.Std)
	}
	if math.Abs(s.P99-exact.P99) > 3 || math.Abs(s.Median-exact.Median) > 5 {
		t.Errorf("p50 %g p99 %g, want about %g %g", s.Median, s.P99, exact.Median, exact.P99)
	}
}

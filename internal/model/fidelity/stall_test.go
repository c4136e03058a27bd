package fidelity

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// closedLoop is a scored closed-loop result at one point: c requests in
// flight, in tokens in and out out, with measured and simulated mean TTFT
// and TPOT.
func closedLoop(id string, in, out, c int, ttft, tpot, simTTFT, simTPOT float64) Result {
	return Result{
		Run: Run{ID: id, Source: "s", Engine: "vllm", Version: "0.12.0", GPU: "H100-SXM", Model: "m", TP: 2, Stat: "mean",
			Workload: Workload{In: in, Out: out, Requests: 50 * c, Concurrency: c},
			Measured: Metrics{TTFT: ttft, ITL: tpot}},
		Predicted: Metrics{TTFT: simTTFT, ITL: simTPOT},
	}
}

// TestStallSplitsAPointByOutputLength reads the stall from two output
// lengths of one point: a loop of 8 whose decode step is 15 ms and whose
// other requests' prefills put 300 ms between a request's tokens a cycle
// measures TPOT 15 + 300/127 at 128 out and 15 + 300/1023 at 1,024 after
// a TTFT of 150 ms; the simulated one has 440 ms before the first token
// and 10 between, the same 450 ms of stall.
func TestStallSplitsAPointByOutputLength(t *testing.T) {
	tpot := func(d, k float64, out int) float64 { return d + k/float64(out-1) }
	results := []Result{
		closedLoop("a-128", 1024, 128, 8, 150, tpot(15, 300, 128), 440, tpot(15, 10, 128)),
		closedLoop("a-512", 1024, 512, 8, 150, tpot(15, 300, 512), 440, tpot(15, 10, 512)),
		closedLoop("a-1024", 1024, 1024, 8, 150, tpot(15, 300, 1024), 440, tpot(15, 10, 1024)),
		// One output length: no split.
		closedLoop("b-128", 4096, 128, 8, 700, 26, 500, 28),
	}
	// Left out: a spread of lengths, an unscored run, a Poisson run.
	spread := closedLoop("c-128", 1024, 128, 16, 1, 1, 1, 1)
	r := 0.8
	spread.Run.Workload.RangeRatio = &r
	unscored := closedLoop("d-128", 1024, 128, 16, 1, 1, 1, 1)
	unscored.Run.Unscored = "burst"
	poisson := closedLoop("e-128", 1024, 128, 16, 1, 1, 1, 1)
	poisson.Run.Workload.Stages = [][2]float64{{1, 10}}
	for _, x := range []Result{spread, unscored, poisson} {
		y := x
		y.Run.ID, y.Run.Workload.Out = x.Run.ID+"-1024", 1024
		results = append(results, x, y)
	}

	points := StallPoints(results)
	if len(points) != 1 {
		t.Fatalf("%d points, want the one measured at two output lengths: %+v", len(points), points)
	}
	p := points[0]
	if p.Outs != [2]int{128, 1024} || p.In != 1024 || p.Concurrency != 8 {
		t.Errorf("point %+v: want 1,024 in, concurrency 8, outputs 128 and 1,024", p)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	near("measured between", p.Measured.Between(), 300)
	near("simulated between", p.Simulated.Between(), 10)
	near("measured stall", p.Measured.Total, 450)
	near("simulated stall", p.Simulated.Total, 450)
	// 450 ms of stall over 8 requests is 56.25 ms a prefill: the measured
	// TTFT holds 150/56.25 of them, the simulated 440/56.25.
	near("measured before the first", p.Measured.BeforeFirst(8), 150/56.25)
	near("simulated before the first", p.Simulated.BeforeFirst(8), 440/56.25)

	sum := SummarizeStalls(points)
	if len(sum) != 1 || sum[0].Points != 1 || sum[0].TotalErr > 1e-9 {
		t.Fatalf("summary %+v: want one group with the stall simulated exactly", sum)
	}
	near("TTFT error", sum[0].TTFTErr, 440.0/150-1)
	var out bytes.Buffer
	writeStalls(&out, points)
	writeStallTable(&out, points)
	for _, want := range []string{"1 closed-loop points", "median |error| 0.0%", "| 450 / 450 (+0.0%) | 150 / 440 | 2.7 / 7.8 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStallIsTheEndToEndIntercept takes the stall from the requests'
// whole times, so a TTFT that differs between the two lengths (a wave
// that formed differently) moves it by no more than it moves E2E:
// SGLang's Qwen3-32B at TP8 and concurrency 16 measured 349.5 ms and
// 7.82 ms at 128 out, 243.4 and 7.97 at 512, E2E 1,342.6 and 4,316.1 ms,
// a decode step of 7.743 ms and a stall of 359.2 ms.
func TestStallIsTheEndToEndIntercept(t *testing.T) {
	points := StallPoints([]Result{
		closedLoop("s-128", 1024, 128, 16, 349.5, 7.82, 300, 8),
		closedLoop("s-512", 1024, 512, 16, 243.4, 7.97, 300, 8),
	})
	if len(points) != 1 {
		t.Fatalf("%d points, want 1", len(points))
	}
	e1, e2 := 349.5+127*7.82, 243.4+511*7.97
	d := (e2 - e1) / 384
	if got, want := points[0].Measured.Total, e1-127*d; math.Abs(got-want) > 1e-9 || math.Abs(got-359.2) > 0.1 {
		t.Errorf("stall %g ms, want %g (359.2)", got, want)
	}
	if got := points[0].Measured.TTFT; math.Abs(got-(349.5+243.4)/2) > 1e-9 {
		t.Errorf("TTFT %g, want the two lengths' mean", got)
	}
}

// TestStallLeavesQueuedPointsOut drops a point whose TTFT grows with the
// output length: SGLang 0.5.8's Qwen3-32B on one H100 at concurrency 16
// measured 6,776 ms at 128 out and 28,881 at 512, its requests waiting
// for others to finish, where the stall's line does not hold (its
// intercept is negative).
func TestStallLeavesQueuedPointsOut(t *testing.T) {
	points := StallPoints([]Result{
		closedLoop("q-128", 1024, 128, 16, 6775.5, 25.48, 1212.6, 31.1),
		closedLoop("q-512", 1024, 512, 16, 28880.6, 26.56, 1741.7, 31.37),
	})
	if len(points) != 0 {
		t.Errorf("%d points, want the queued one left out: %+v", len(points), points)
	}
}

package sim

import (
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// run is one closed-loop measurement: n requests of in/out tokens at a
// concurrency cap, all wanting to start at t=0.
func run(t testing.TB, args []string, n, in, out, conc int) measure.Summary {
	t.Helper()
	cfg := mustParse(t, args...)
	recs, err := RunVirtualSchedule(cfg, fixedReqs(n, in, out), make([]time.Duration, n), conc)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	s := measure.Summarize(recs, measure.SummaryOptions{Bootstrap: 1})
	if s.Failed > 0 {
		t.Fatalf("%v: %d failed", args, s.Failed)
	}
	return s
}

var llama8b = []string{"llama-3.1-8b", "--max-model-len", "8192"}

func TestBatchingRaisesThroughputUntilBound(t *testing.T) {
	var prev float64
	var tput []float64
	for _, conc := range []int{1, 4, 16, 64, 256, 1024} {
		s := run(t, llama8b, max(64, 2*conc), 512, 256, conc)
		t.Logf("concurrency %4d: %8.0f output tok/s, TPOT p50 %.1f ms", conc, s.OutputThroughput, s.TPOT.Median)
		if conc <= 256 && s.OutputThroughput <= prev {
			t.Errorf("throughput fell from %.0f to %.0f at concurrency %d", prev, s.OutputThroughput, conc)
		}
		prev = s.OutputThroughput
		tput = append(tput, s.OutputThroughput)
	}
	// Near-linear gain at small batches (memory-bound decode), strongly
	// sub-linear once compute, attention or KV capacity binds.
	if g := tput[1] / tput[0]; g < 3 {
		t.Errorf("1 -> 4: gain %.2f, want near 4 (weights read once per step)", g)
	}
	if g := tput[5] / tput[4]; g > 2 {
		t.Errorf("256 -> 1024: gain %.2f, want well under 4 (bound)", g)
	}
}

func TestTensorParallelByLink(t *testing.T) {
	tpot := func(gpu string, tp string) float64 {
		args := []string{"llama-3.3-70b", "-q", "fp8", "--max-model-len", "8192", "-tp", tp, "--gpu", gpu}
		return run(t, args, 96, 1000, 200, 16).TPOT.Median
	}
	type ratios struct{ two4, four8 float64 }
	by := map[string]ratios{}
	for _, g := range []string{"H100-SXM", "H100-PCIe"} {
		t2, t4, t8 := tpot(g, "2"), tpot(g, "4"), tpot(g, "8")
		by[g] = ratios{t4 / t2, t8 / t4}
		t.Logf("%-9s TPOT TP2 %.1f, TP4 %.1f, TP8 %.1f ms", g, t2, t4, t8)
	}
	nv, pcie := by["H100-SXM"], by["H100-PCIe"]
	// NVLink: each doubling of TP cuts TPOT substantially.
	if nv.two4 > 0.75 || nv.four8 > 0.8 {
		t.Errorf("NVLink: TP4/TP2 %.2f, TP8/TP4 %.2f; want clear gains", nv.two4, nv.four8)
	}
	// PCIe: all-reduce over the host bridge eats the gain; past TP4 it
	// barely helps.
	if pcie.two4 < nv.two4+0.1 || pcie.four8 < 0.9 {
		t.Errorf("PCIe: TP4/TP2 %.2f, TP8/TP4 %.2f; want little gain (NVLink %.2f, %.2f)", pcie.two4, pcie.four8, nv.two4, nv.four8)
	}
}

func TestFP8RaisesThroughput(t *testing.T) {
	for _, conc := range []int{8, 128} {
		bf16 := run(t, llama8b, 256, 512, 128, conc).OutputThroughput
		fp8 := run(t, append([]string{"-q", "fp8"}, llama8b...), 256, 512, 128, conc).OutputThroughput
		t.Logf("concurrency %d: bf16 %.0f, fp8 %.0f tok/s", conc, bf16, fp8)
		if fp8 <= bf16*1.1 {
			t.Errorf("concurrency %d: fp8 %.0f vs bf16 %.0f tok/s", conc, fp8, bf16)
		}
	}
}

func TestMemoryFractionLimitsSaturation(t *testing.T) {
	// Long contexts at high concurrency: KV capacity binds.
	hi := run(t, append([]string{"--gpu-memory-utilization", "0.9"}, llama8b...), 1024, 2048, 1024, 1024)
	lo := run(t, append([]string{"--gpu-memory-utilization", "0.45"}, llama8b...), 1024, 2048, 1024, 1024)
	t.Logf("utilisation 0.9: %.0f tok/s; 0.45: %.0f tok/s", hi.OutputThroughput, lo.OutputThroughput)
	if lo.OutputThroughput >= 0.9*hi.OutputThroughput {
		t.Errorf("lower memory fraction did not lower the saturation throughput: %.0f vs %.0f", lo.OutputThroughput, hi.OutputThroughput)
	}
}

func TestSmallMaxNumSeqsQueues(t *testing.T) {
	big := run(t, append([]string{"--max-num-seqs", "256"}, llama8b...), 512, 512, 256, 128)
	small := run(t, append([]string{"--max-num-seqs", "8"}, llama8b...), 512, 512, 256, 128)
	t.Logf("TTFT p50: max-num-seqs 256 %.0f ms, 8 %.0f ms", big.TTFT.Median, small.TTFT.Median)
	if small.TTFT.Median < 10*big.TTFT.Median {
		t.Errorf("TTFT with max-num-seqs 8 = %.0f ms, want it to explode vs %.0f ms", small.TTFT.Median, big.TTFT.Median)
	}
}

// TestNIMCurveShape reproduces the shape of calibration point 4: NIM
// Llama-3.3-70B FP8 TP2 on 2x H100, 5000 in / 500 out: TTFT flat, a knee,
// then exploding TTFT at saturation while throughput levels off.
func TestNIMCurveShape(t *testing.T) {
	// NIM's FP8 profiles keep the KV cache in FP8 too.
	args := []string{"llama-3.3-70b", "-q", "fp8", "--kv-cache-dtype", "fp8", "-tp", "2", "--max-model-len", "8192"}
	nim := map[int][3]float64{1: {407, 18.6, 52}, 25: {689, 38.8, 623}, 50: {835, 59.7, 814}, 100: {8000, 93, 920}, 200: {89000, 93, 920}}
	got := map[int]measure.Summary{}
	for _, conc := range []int{1, 25, 50, 100, 200} {
		s := run(t, args, max(16, 8*conc), 5000, 500, conc)
		got[conc] = s
		n := nim[conc]
		t.Logf("concurrency %3d: TTFT %7.0f ms (NIM %5.0f)  ITL %5.1f ms (NIM %4.1f)  %5.0f tok/s (NIM %3.0f)",
			conc, s.TTFT.Median, n[0], s.ITL.Median, n[1], s.OutputThroughput, n[2])
	}
	if got[50].TTFT.Median > 5*got[1].TTFT.Median {
		t.Errorf("TTFT should stay near flat up to 50: %.0f vs %.0f ms", got[50].TTFT.Median, got[1].TTFT.Median)
	}
	if got[200].TTFT.Median < 10*got[50].TTFT.Median {
		t.Errorf("TTFT should explode past saturation: %.0f at 200 vs %.0f at 50", got[200].TTFT.Median, got[50].TTFT.Median)
	}
	if g := got[200].OutputThroughput / got[100].OutputThroughput; g > 1.3 {
		t.Errorf("throughput should level off: 100 -> 200 gained %.2fx", g)
	}
}

// TestPipelineHopOverTheLink: a pipeline stage hands its activations to the
// next over the GPU link whatever the TP size; at TP1 the hop of an 8192-
// token prefill (64 MiB) costs a fraction of a millisecond on NVLink, as it
// does at TP2, not tens of milliseconds.
func TestPipelineHopOverTheLink(t *testing.T) {
	prefill := func(args ...string) float64 {
		st, err := EstimateStepTimes(mustParse(t, append([]string{"llama-3.1-8b", "--max-model-len", "4096"}, args...)...), 1024)
		if err != nil {
			t.Fatal(err)
		}
		return st.Prefill[8192]
	}
	for _, tp := range []string{"1", "2"} {
		one, two := prefill("-tp", tp), prefill("-tp", tp, "-pp", "2")
		if hop := two - one; hop < 0 || hop > 1 {
			t.Errorf("TP%s: PP2 adds %.2f ms to an 8192-token prefill on H100 (%.1f vs %.1f ms), want a fraction of a millisecond", tp, hop, two, one)
		}
	}
}

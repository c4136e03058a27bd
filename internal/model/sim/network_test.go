package sim

import (
	"math"
	"testing"
)

func parseNet(t *testing.T, args ...string) Config {
	t.Helper()
	c, err := ParseArgs(args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decodeStep(c Config, bs int) float64 {
	s := newStepModel(c)
	return s.gpuSeconds(batchShape{tokens: bs, seqs: bs, sampled: bs, decodeCtx: float64(bs * 1024)})
}

// Two HGX H100 nodes at TP8 x PP2: the one stage boundary falls between
// the nodes and its activations cross the NIC, slower than the same hop
// inside one larger domain.
func TestTopologyPipelineAcrossNodes(t *testing.T) {
	c := parseNet(t, "meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--max-model-len", "16000")
	top := c.Topology()
	if top.Nodes != 2 || top.Domain != 8 || top.PPCrossHops != 1 || top.TPCrosses || top.EPCrossShare != 0 {
		t.Fatalf("topology %+v", top)
	}
	n := c.NetworkStep(64)
	// One hop of 64 tokens x 8,192 hidden x 2 bytes.
	if want := 64 * 8192 * 2.0; n.Bytes != want || n.Seconds <= scaleOutLatency.Seconds() {
		t.Errorf("network step %+v, want %g bytes", n, want)
	}
	wide := c
	wide.GPU.Domain = 16
	if top := wide.Topology(); top.Nodes != 1 || top.PPCrossHops != 0 {
		t.Fatalf("one 16-GPU domain: %+v", top)
	}
	if a, b := decodeStep(c, 64), decodeStep(wide, 64); a <= b {
		t.Errorf("decode step across nodes %.3f ms <= inside one domain %.3f ms", a*1e3, b*1e3)
	}
}

// DeepSeek-V3 at TP8 x DP9 with expert parallelism (EP72): inside a GB200
// NVL72 rack nothing crosses the network; on HGX H200 nodes 64 of every 72
// GPUs' experts are in other nodes and the exchange is bound by the NIC.
func TestTopologyWideEP(t *testing.T) {
	args := []string{"deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8", "--data-parallel-size", "9", "--enable-expert-parallel", "--gpu", "GB200"}
	gb := parseNet(t, args...)
	if top := gb.Topology(); top.Nodes != 1 || top.Domain != 72 || top.EPCrossShare != 0 || gb.NetworkStep(64).Bytes != 0 {
		t.Fatalf("GB200 NVL72 EP72: %+v", top)
	}
	args[len(args)-1] = "H200"
	h := parseNet(t, args...)
	top := h.Topology()
	if top.Nodes != 9 || math.Abs(top.EPCrossShare-64.0/72) > 1e-9 {
		t.Fatalf("H200 x 72 EP72: %+v", top)
	}
	n := h.NetworkStep(64)
	if n.Bytes <= 0 || n.Seconds <= 0 {
		t.Fatalf("network step %+v", n)
	}
	// The same GPU in one domain of 72 pays only NVLink.
	one := h
	one.GPU.Domain = 72
	if a, b := decodeStep(h, 64), decodeStep(one, 64); a < b+0.5*n.Seconds {
		t.Errorf("EP72 over nodes %.2f ms, in one domain %.2f ms: the network's %.2f ms is not paid", a*1e3, b*1e3, n.Seconds*1e3)
	}
}

// Tensor parallelism wider than a domain runs its all-reduces at the NIC.
func TestTopologyTPAcrossNodes(t *testing.T) {
	c := parseNet(t, "meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size", "16", "--max-model-len", "16000")
	if top := c.Topology(); !top.TPCrosses || top.Nodes != 2 {
		t.Fatalf("TP16 on H100: %+v", top)
	}
	wide := c
	wide.GPU.Domain = 16
	if a, b := decodeStep(c, 64), decodeStep(wide, 64); a < 1.5*b {
		t.Errorf("TP16 across nodes %.2f ms vs in one domain %.2f ms", a*1e3, b*1e3)
	}
}

// Nothing on one node crosses the network, so one-node step times are
// those of the model without a network.
func TestTopologyOneNodeUnchanged(t *testing.T) {
	for _, args := range [][]string{
		{"meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--max-model-len", "16000"},
		{"deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "1", "--data-parallel-size", "8", "--enable-expert-parallel"},
		{"meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2", "--gpu", "L40S"},
	} {
		c := parseNet(t, args...)
		if top := c.Topology(); top.crossNode() || top.Nodes != 1 {
			t.Errorf("%v: %+v", args, top)
		}
	}
}

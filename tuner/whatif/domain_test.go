package whatif

import (
	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/tuner/recommend"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

func mustGPU(t *testing.T, id string) catalog.GPU {
	t.Helper()
	g, err := catalog.LookupGPU(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// No candidate of an HGX GPU splits tensors over more than its 8 GPUs;
// an NVL72 rack's may go to 64.
func TestTensorParallelWithinDomain(t *testing.T) {
	m, err := catalog.LookupModel("deepseek-ai/DeepSeek-V3")
	if err != nil {
		t.Fatal(err)
	}
	h100, gb200 := mustGPU(t, "H100-SXM"), mustGPU(t, "GB200")
	for _, s := range shapesWithinDomain(h100, moeShapes(m, 16)) {
		if s.tp > 8 {
			t.Errorf("H100 x16 shape %s: TP wider than a node", s)
		}
	}
	if got := withinDomain(h100, []int{1, 2, 4, 8, 16}); len(got) != 4 || got[3] != 8 {
		t.Errorf("H100 tensor choices %v", got)
	}
	if got := withinDomain(gb200, []int{8, 16, 32, 64}); len(got) != 4 {
		t.Errorf("GB200 tensor choices %v", got)
	}
	opts := Options{Model: "deepseek-ai/DeepSeek-V3", MaxGPUs: 16, Engines: []engine.Engine{engine.VLLM}}
	for _, c := range candidates(opts, m, []catalog.GPU{h100}) {
		if c.shape != nil && c.shape.tp > 8 {
			t.Errorf("candidate %s has TP%d", c.name(), c.shape.tp)
		}
	}
}

// A replica of 16 H100s launches per host: vLLM's data-parallel flags
// with a start rank per host, or a Ray cluster for TP x PP; SGLang's
// --nnodes/--node-rank/--dist-init-addr.
func TestHostCommands(t *testing.T) {
	h100, gb200 := mustGPU(t, "H100-SXM"), mustGPU(t, "GB200")
	dpep := engine.Settings{"tensor_parallel": 1, "data_parallel": 16, "dp_attention": true, "expert_parallel": true}
	hosts := hostCommands(h100, engine.VLLM, "deepseek-ai/DeepSeek-V3", dpep, 16)
	if len(hosts) != 2 || hosts[0].GPUs != 8 {
		t.Fatalf("hosts %+v", hosts)
	}
	for _, want := range []string{"VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve", "--data-parallel-size 16", "--data-parallel-size-local 8", `--data-parallel-address "$HEAD_IP"`, "--enable-expert-parallel"} {
		if !strings.Contains(hosts[0].Command, want) {
			t.Errorf("head lacks %q: %s", want, hosts[0].Command)
		}
	}
	if !strings.Contains(hosts[1].Command, "--headless --data-parallel-start-rank 8") || strings.Contains(hosts[0].Command, "--headless") {
		t.Errorf("worker/head: %s / %s", hosts[1].Command, hosts[0].Command)
	}
	tpp := engine.Settings{"tensor_parallel": 8, "pipeline_parallel": 2}
	hosts = hostCommands(h100, engine.VLLM, "meta-llama/Llama-3.3-70B-Instruct", tpp, 16)
	if len(hosts) != 2 || !strings.HasPrefix(hosts[0].Command, "ray start --head") || !strings.Contains(hosts[0].Command, "--distributed-executor-backend ray") ||
		!strings.Contains(hosts[0].Command, "--pipeline-parallel-size 2") || !strings.Contains(hosts[1].Command, `ray start --address="$HEAD_IP":6379`) {
		t.Errorf("TP8xPP2: %+v", hosts)
	}
	hosts = hostCommands(h100, engine.SGLang, "deepseek-ai/DeepSeek-V3", dpep, 16)
	for k, h := range hosts {
		for _, want := range []string{"--nnodes 2", "--node-rank " + string(rune('0'+k)), `--dist-init-addr "$HEAD_IP":5000`, "--tp-size 16", "--dp-size 16"} {
			if !strings.Contains(h.Command, want) {
				t.Errorf("sglang host %d lacks %q: %s", k, want, h.Command)
			}
		}
	}
	// GB200's hosts are 4-GPU trays: TP8 x DP9 spans 18 of them.
	tp8 := engine.Settings{"tensor_parallel": 8, "data_parallel": 9, "dp_attention": true, "expert_parallel": true}
	if hosts := hostCommands(gb200, engine.SGLang, "deepseek-ai/DeepSeek-V3", tp8, 72); len(hosts) != 18 || hosts[17].GPUs != 4 {
		t.Errorf("GB200 x72: %d hosts", len(hosts))
	}
	if hostCommands(h100, engine.VLLM, "m", tpp, 8) != nil {
		t.Error("one host needs no per-host commands")
	}
}

// A 72-GPU question adds the whole rack for an MoE model only.
func TestReplicaSizes(t *testing.T) {
	ds, _ := catalog.LookupModel("deepseek-ai/DeepSeek-V3")
	llama, _ := catalog.LookupModel("meta-llama/Llama-3.3-70B-Instruct")
	o := Options{MaxGPUs: 72, Shapes: []string{ShapeAggregated}}
	if got := replicaSizes(o, ds); len(got) != 8 || got[7] != 72 || got[6] != 64 {
		t.Errorf("DeepSeek sizes %v", got)
	}
	if got := replicaSizes(o, llama); len(got) != 7 || got[6] != 64 {
		t.Errorf("Llama sizes %v", got)
	}
	var tp8 bool
	for _, s := range moeShapes(ds, 72) {
		tp8 = tp8 || s.tp == 8 && s.dp == 9 && s.ep
	}
	if !tp8 {
		t.Errorf("72-GPU shapes lack TP8xDP9+EP72: %v", moeShapes(ds, 72))
	}
}

// An L4 cannot decode an 8B model's token in 20 ms (16 GB of weights at
// 300 GB/s): it is dropped before any simulation; an H100 stays.
func TestPruneBySLO(t *testing.T) {
	o := Options{Model: "meta-llama/Llama-3.1-8B-Instruct", GPUs: []string{"L4", "H100-SXM"}, MaxGPUs: 1,
		Dataset: bench.DatasetSpec{Kind: bench.DatasetRandom, Input: fixed(512), Output: fixed(128)},
		SLO:     recommend.SLO{{Metric: "tpot_p99", Max: 20}}}
	m, gpus, err := o.normalize()
	if err != nil {
		t.Fatal(err)
	}
	cands := candidates(o, m, gpus)
	if err := checkFits(o, m, cands); err != nil {
		t.Fatal(err)
	}
	pruneBySLO(o, cands)
	for _, c := range cands {
		switch c.gpu.ID {
		case "L4":
			if c.anchor != nil || !strings.Contains(c.unfit, "cannot meet TPOT 20 ms") {
				t.Errorf("L4 kept: %q", c.unfit)
			}
		case "H100-SXM":
			if c.anchor == nil {
				t.Errorf("H100 dropped: %s", c.unfit)
			}
		}
	}
}

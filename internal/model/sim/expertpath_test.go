package sim

import (
	"math"
	"testing"
)

// gpt-oss's MXFP4 experts run in Marlin's MoE kernel on Hopper, at its
// issue-bound rate with its tile's padding (constants.go,
// marlinMXFP4Efficiency); A100 keeps the fused MoE law, and a 16-bit
// MoE on H100 too.
func TestMXFP4ExpertsMarlinOnHopper(t *testing.T) {
	for _, c := range []struct {
		args       []string
		share, row float64
	}{
		{[]string{"openai/gpt-oss-120b", "-tp", "4", "--gpu", "H100-SXM"}, marlinMXFP4Efficiency, marlinMoEExpertRows},
		{[]string{"openai/gpt-oss-120b", "-tp", "4", "--gpu", "H200"}, marlinMXFP4Efficiency, marlinMoEExpertRows},
		{[]string{"openai/gpt-oss-120b", "-tp", "4", "--gpu", "A100-80G"}, fusedMoEBF16Efficiency, fusedMoEExpertRows},
		{[]string{"mixtral-8x7b", "-tp", "2", "--gpu", "H100-SXM"}, fusedMoEBF16Efficiency, fusedMoEExpertRows},
	} {
		cfg := mustParse(t, c.args...)
		if err := cfg.Normalize(); err != nil {
			t.Fatal(err)
		}
		s := newStepModel(cfg)
		if share := s.expertRate / (cfg.GPU.BF16TFLOPS * 1e12); math.Abs(share-c.share) > 1e-9 || s.expertRows != c.row {
			t.Errorf("%v: experts at %.3f of the BF16 peak and %v rows an expert, want %.3f and %v", c.args, share, s.expertRows, c.share, c.row)
		}
	}
}

// MiniMax-M2's router gate runs in float32 on the CUDA cores (both
// engines' minimax_m2.py), by catalog id and by config.json; a GPU
// without an FP32 figure, and another MoE's gate, keep the BF16 rate.
func TestRouterFP32(t *testing.T) {
	for _, c := range []struct {
		args []string
		fp32 bool
	}{
		{[]string{"MiniMaxAI/MiniMax-M2.5", "-tp", "4", "--enable-expert-parallel", "--max-model-len", "4096", "--gpu", "H100-SXM"}, true},
		{[]string{"my/minimax", "--model-config", "../../serving/catalog/testdata/minimax-m2.5.json", "-tp", "4", "--enable-expert-parallel", "--max-model-len", "4096", "--gpu", "H100-SXM"}, true},
		{[]string{"MiniMaxAI/MiniMax-M2.5", "-tp", "2", "--enable-expert-parallel", "--max-model-len", "4096", "--gpu", "B200"}, false},
		{[]string{"mixtral-8x7b", "-tp", "2", "--gpu", "H100-SXM"}, false},
	} {
		cfg := mustParse(t, c.args...)
		if err := cfg.Normalize(); err != nil {
			t.Fatal(err)
		}
		s := newStepModel(cfg)
		want := 0.0
		if c.fp32 {
			want = cfg.GPU.FP32TFLOPS * 1e12 * bf16GEMMEfficiency
		}
		if s.routerFP32 != want {
			t.Errorf("%v: router's float32 rate %.3g FLOP/s, want %.3g", c.args, s.routerFP32, want)
		}
	}
}

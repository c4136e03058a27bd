package sim

import (
	"math"
	"time"
)

// Every physical and calibrated constant of the simulated engine lives in
// this file, each with one comment line: what it is, where its value comes
// from (a published figure; "fit", chosen inside a published range against
// docs/reference.md's calibration points; or "estimate"), and a link to its
// derivation in docs/fidelity-accounts.md, "The simulator's constants".
// Never change one to make a single test pass.

// Memory accounting (vLLM V1 worker, docs/reference.md (Engines)).
const (
	// GiB is 2^30 bytes, the unit vLLM logs memory in.
	GiB = 1 << 30

	// vllmNonTorchTP1 is vLLM's non-torch memory at TP1: 0.13 GiB, llm-d-benchmark on H100 (docs/fidelity-accounts.md#vllmnontorchtp1-vllmnontorchtpn).
	vllmNonTorchTP1 = 0.13 * GiB
	// vllmNonTorchTPN is vLLM's non-torch memory at TP > 1: 0.55 GiB, llm-d-benchmark on H100 (docs/fidelity-accounts.md#vllmnontorchtp1-vllmnontorchtpn).
	vllmNonTorchTPN = 0.55 * GiB

	// samplerLogitCopies is the fp32 [seqs x vocab] buffers vLLM's sampler holds at its peak: fit to logged peaks (docs/fidelity-accounts.md#samplerlogitcopies).
	samplerLogitCopies = 8.58

	// activationHiddenCopies is the [tokens x hidden] buffers alive at the forward pass's peak: estimate (docs/fidelity-accounts.md#activationhiddencopies).
	activationHiddenCopies = 2

	// cudaGraphBytesPerLayer is the CUDA graph pool per decoder layer: estimate from vLLM's logged ~0.5 GiB for 8B (docs/fidelity-accounts.md#cudagraphbytesperlayer).
	cudaGraphBytesPerLayer = 0.0166 * GiB

	// sglangContextBytes is SGLang's CUDA context and allocator memory before weights: estimate (docs/fidelity-accounts.md#sglangcontextbytes).
	sglangContextBytes = 0.3 * GiB

	// memoryOverhead scales the memory reservations above together: 1, the model as sourced; calibration moves it (docs/fidelity-accounts.md#memoryoverhead).
	memoryOverhead = 1.0
)

// Bytes per weight element by quantization. AWQ/GPTQ int4 carry one fp16
// scale and zero point per group of 128 weights: 4 + 32/128 = 4.25 bits.
const (
	bytesBF16 = 2.0
	bytesFP8  = 1.0
	bytesInt4 = 4.25 / 8
)

// Achievable fractions of peak (docs/reference.md (GPUs) "Achievable fractions").
const (
	// hbmEfficiency is decode's share of peak HBM bandwidth: fit, the top of the published 0.75-0.85 (docs/fidelity-accounts.md#hbmefficiency).
	hbmEfficiency = 0.85

	// bf16GEMMEfficiency is BF16 GEMMs' share of the BF16 peak: 0.70, the published typical value (docs/fidelity-accounts.md#bf16gemmefficiency).
	bf16GEMMEfficiency = 0.70

	// fp8GEMMEfficiency is FP8 GEMMs' share of the FP8 peak: the top of the published 0.28-0.55, as vLLM PR #17126's benchmark supports (docs/fidelity-accounts.md#fp8gemmefficiency).
	fp8GEMMEfficiency = 0.55

	// blockFP8GEMMEfficiency is block-scaled FP8 linears' share of the FP8 peak: DeepGEMM in SGLang PR #5207, estimate (docs/fidelity-accounts.md#blockfp8gemmefficiency-blockfp8expertefficiency).
	blockFP8GEMMEfficiency = 0.45
	// blockFP8ExpertEfficiency is block-scaled FP8 experts' share of the FP8 peak: the Triton kernel in SGLang PR #5207, estimate (docs/fidelity-accounts.md#blockfp8gemmefficiency-blockfp8expertefficiency).
	blockFP8ExpertEfficiency = 0.26

	// fp4GEMMEfficiency is NVFP4 GEMMs' share of the FP4 peak: the FP8 kernels' share, an estimate (docs/fidelity-accounts.md#fp4gemmefficiency).
	fp4GEMMEfficiency = fp8GEMMEfficiency

	// fusedMoEBF16Efficiency is the fused MoE path's largest share of the BF16 peak: the median of three benchmark_moe.py sweeps (docs/fidelity-accounts.md#fusedmoebf16efficiency-fusedmoeexpertrows).
	fusedMoEBF16Efficiency = 0.60
	// fusedMoEExpertRows is the rows of work each expert with tokens costs more: the median of the same sweeps (docs/fidelity-accounts.md#fusedmoebf16efficiency-fusedmoeexpertrows).
	fusedMoEExpertRows = 80

	// w4a16GEMMEfficiency is Marlin's weight-only GEMMs' share of the BF16 peak: vLLM PR #2497's A100 benchmark (docs/fidelity-accounts.md#w4a16gemmefficiency).
	w4a16GEMMEfficiency = 0.45

	// marlinMXFP4Efficiency is Marlin's MXFP4 MoE GEMMs' share of the BF16 peak on Hopper: 254 TFLOPS on H100 in SGLang PR #38884's profile (docs/fidelity-accounts.md#marlinmxfp4efficiency-marlinmoeexpertrows).
	marlinMXFP4Efficiency = 0.257
	// marlinMoEExpertRows is the rows each expert with tokens costs more in Marlin's MoE: half its 64-row tile, as SGLang PR #34682's sweep shows (docs/fidelity-accounts.md#marlinmxfp4efficiency-marlinmoeexpertrows).
	marlinMoEExpertRows = 32

	// fa2DecodeEfficiency is FlashAttention-2 decode's share of HBM bandwidth on Ampere: microsoft/vidur's A100 profile (docs/fidelity-accounts.md#fa2decodeefficiency).
	fa2DecodeEfficiency = 0.65

	// attentionEfficiency is FlashAttention prefill's share of the BF16 peak: estimate inside the published 35-75% (docs/fidelity-accounts.md#attentionefficiency).
	attentionEfficiency = 0.5

	// linkEfficiency is NCCL all-reduce bus bandwidth over link bandwidth: fit to vidur's 64 MB all-reduce at TP2 (docs/fidelity-accounts.md#linkefficiency).
	linkEfficiency = 0.6
)

// gemmStreamEfficiency is the share of peak HBM bandwidth BF16 GEMMs stream weights at by GPU, where not hbmEfficiency: vidur's A100 profiles (docs/fidelity-accounts.md#gemmstreamefficiency).
var gemmStreamEfficiency = map[string]float64{"A100-80G": 0.75, "A100-40G": 0.75}

// All-reduce start-up latency by TP size (the alpha of alpha + bytes/beta).
var (
	// allReduceLatencyNVLink is the engines' custom all-reduce latency over NVLink: vidur's NCCL at TP2, vLLM PR #2192 estimate above (docs/fidelity-accounts.md#allreducelatencynvlink).
	allReduceLatencyNVLink = map[int]time.Duration{2: 7 * time.Microsecond, 4: 10 * time.Microsecond, 8: 10 * time.Microsecond}
	// allReduceLatencyPCIe is NCCL's all-reduce latency through the host bridge: estimate from nccl-tests on PCIe servers (docs/fidelity-accounts.md#allreducelatencypcie).
	allReduceLatencyPCIe = map[int]time.Duration{2: 20 * time.Microsecond, 4: 45 * time.Microsecond, 8: 70 * time.Microsecond}
)

// Host-side costs.
const (
	// stepOverheadVLLM is vLLM's CPU time per step: fit to calibration point 2 (docs/fidelity-accounts.md#stepoverheadvllm).
	stepOverheadVLLM = 1500 * time.Microsecond
	// stepOverheadSGLang is SGLang's CPU time per step, beside the GPU's: estimate (docs/fidelity-accounts.md#stepoverheadsglang).
	stepOverheadSGLang = 1000 * time.Microsecond
	// sglangNoOverlapSlowdown is an SGLang step's length without the overlap scheduler over with it: SGLang v0.4's release post (docs/fidelity-accounts.md#sglangnooverlapslowdown).
	sglangNoOverlapSlowdown = 1.1
	// perSeqOverhead is the CPU time per scheduled sequence per step: estimate (docs/fidelity-accounts.md#perseqoverhead).
	perSeqOverhead = 3 * time.Microsecond
	// outputProcPerSeq is vLLM V0's output processing per sequence and step without async output: vLLM RFC #6913's profile (docs/fidelity-accounts.md#outputprocperseq).
	outputProcPerSeq = 100 * time.Microsecond
	// eagerLaunchPerLayer is the launch cost per decoder layer of a step outside a CUDA graph: estimate (docs/fidelity-accounts.md#eagerlaunchperlayer).
	eagerLaunchPerLayer = 40 * time.Microsecond
	// sglangExtendHostMLAMoE is the host time per MLA and MoE layer an SGLang extend step adds: estimate from SGLang PR #12160 (docs/fidelity-accounts.md#sglangextendhostmlamoe).
	sglangExtendHostMLAMoE = 975 * time.Microsecond
)

// GPU-side cost of a kernel.
const (
	// kernelOverhead is every GPU kernel's cost beyond its work at kernelOverheadRefMHz: NVIDIA's CUDA Graphs measurement (docs/fidelity-accounts.md#kerneloverhead-kerneloverheadrefmhz).
	kernelOverhead = 3400 * time.Nanosecond
	// kernelOverheadRefMHz is the SM clock kernelOverhead holds at, H100 SXM's boost; it scales inversely with the clock (docs/fidelity-accounts.md#kerneloverhead-kerneloverheadrefmhz).
	kernelOverheadRefMHz = 1980

	// attentionBlockKernels is a layer's kernels besides its linears and MLPs: read from vllm's llama.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	attentionBlockKernels = 5
	// qkNormTPKernels is the kernels of QK norms over every head under TP: read from vLLM's MiniMax-M2 (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	qkNormTPKernels = 2
	// mlpActivationKernels is SiLU-and-mul's kernels per MLP: read from the engines' code (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	mlpActivationKernels = 1
	// moeRoutedKernels is the kernels of the fused MoE path: read from vLLM's fused_moe.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	moeRoutedKernels = 7
	// moeRoutedQuantKernels is the fused MoE path's quantization kernels under W8A8: read from the same file (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	moeRoutedQuantKernels = 2
	// mlaExtraKernels is MLA's latent RMSNorm kernels: read from the engines' deepseek_v2.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	mlaExtraKernels = 2
	// attnOutputGateKernels is a gated attention layer's sigmoid-and-multiply of its output: read from vLLM's qwen3_next.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	attnOutputGateKernels = 1
	// gdnBlockKernels is a Gated DeltaNet layer's kernels besides its linears and MLP: read from vLLM's qwen3_next.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	gdnBlockKernels = 6
	// dsaIndexerKernels is sparse attention's indexer kernels besides its linears: read from vLLM's deepseek_v2.py (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	dsaIndexerKernels = 6
	// stepKernels is a step's kernels outside the layers: estimate (docs/fidelity-accounts.md#the-kernels-of-a-layer-and-a-step).
	stepKernels = 10
)

// The memory-bound work between a layer's GEMMs, and W8A8's activation
// quantization, are counted by newStepModel at the HBM rate
// (docs/fidelity-accounts.md#memory-bound-work-between-the-gemms).

// Host-side cost of a request outside the engine loop.
const (
	// frontendOverhead is a request's time in the API server outside the engine's steps: estimate from vLLM PR #54628 (docs/fidelity-accounts.md#frontendoverhead).
	frontendOverhead = 10 * time.Millisecond
)

// ms and us convert durations for Constants.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Engine defaults (docs/reference.md (Engines)).
const (
	vllmDefaultUtilization   = 0.9
	vllmDefaultBlockSize     = 16
	vllmSmallMaxNumSeqs      = 256
	vllmLargeMaxNumSeqs      = 1024 // V1 on >= 70 GiB non-A100 GPUs
	vllmSmallBatchedTokens   = 2048
	vllmLargeBatchedTokens   = 8192 // V1 on >= 70 GiB non-A100 GPUs
	vllmLargeGPUThresholdGiB = 70
	vllmMaxCaptureSize       = 512 // default largest CUDA graph batch size in V1

	sglangDefaultMaxPrefill = 16384
	sglangMaxRunningCap     = 4096
)

// SGLangOldMemFraction is SGLang's gpu_memory_fraction by TP size in its
// releases before the GPU-memory rule (sgl-project/sglang PR #10975,
// sglangMemoryDefaults), which runs of those releases state with SGLang's
// memory-fraction flag (docs/reference.md (Engines)): 0.88/0.87/0.85/0.81
// for TP 1/2/4/8.
func SGLangOldMemFraction(tp int) float64 {
	switch {
	case tp >= 8:
		return 0.81
	case tp >= 4:
		return 0.85
	case tp >= 2:
		return 0.87
	default:
		return 0.88
	}
}

// sglangMemoryDefaults are SGLang's defaults by the GPU's memory (MiB, as
// torch reports it) since sgl-project/sglang PR #10975 (September 2025;
// python/sglang/srt/server_args.py, _handle_gpu_memory_settings): the
// chunked prefill size and the largest CUDA graph batch by memory bucket,
// then mem_fraction_static = (memory - reserved) / memory, the reserve in
// MiB being 512 of metadata, 1.5 per token of the prefill chunk (at least
// 2,048), 2 per CUDA graph batch row, 1,024 per 8 GPUs of TP x PP, 3 (and
// past 300 rows 1.5 more) per graph row and attention-DP rank under DP
// attention, at least 10 GiB on GPUs over 60 GiB, and 2 GiB more for an
// EAGLE draft. chunk and graphBS, where positive, are the user's.
func sglangMemoryDefaults(gpuMiB float64, tp, pp, dpAttention int, spec bool, chunk, graphBS int) (int, int, float64) {
	small := tp < 4
	pick := func(c, gSmall, gLarge int) {
		if chunk == 0 {
			chunk = c
		}
		if graphBS == 0 {
			graphBS = gLarge
			if small {
				graphBS = gSmall
			}
		}
	}
	switch {
	case gpuMiB < 20*1024:
		pick(2048, 8, 8)
	case gpuMiB < 35*1024:
		pick(2048, 24, 80)
	case gpuMiB < 60*1024:
		pick(4096, 32, 160)
	case gpuMiB < 160*1024:
		pick(8192, 256, 512)
	default:
		pick(16384, 512, 512)
	}
	reserved := 512 + 1.5*float64(max(chunk, 2048)) + 2*float64(graphBS) + float64(tp*pp)/8*1024
	if dpAttention > 1 {
		reserved += 3 * float64(graphBS*dpAttention)
		if graphBS > 300 {
			reserved += 1.5 * float64(graphBS*dpAttention)
		}
	}
	if gpuMiB > 60*1024 {
		reserved = max(reserved, 10*1024)
	}
	if spec {
		reserved += 2 * 1024
	}
	return chunk, graphBS, math.Round((gpuMiB-reserved)/gpuMiB*1000) / 1000
}

// DefaultGPU is the GPU the simulator models when none is named.
const DefaultGPU = defaultGPU

// Sim-only defaults.
const (
	defaultGPU      = "H100-SXM"
	defaultLoadTime = time.Second
	defaultPort     = 8000
	defaultHost     = "0.0.0.0"
)

// Scheduler constants.
const (
	// sglangNewTokenRatio is the share of running requests' remaining output SGLang keeps free: estimate (docs/fidelity-accounts.md#sglangnewtokenratio).
	sglangNewTokenRatio = 0.3
)

// vLLM's sort-based top-k/top-p sampler: its time less plain sampling's,
// in ms by sampled rows, at two vocabularies, timed on an H200 by
// scripts/sampler_bench.py (docs/fidelity-accounts.md#the-samplers-sort-samplersortms32k-samplersortms128k).
var (
	samplerSortRows   = []float64{1, 8, 16, 32, 64, 128, 256, 512}
	samplerSortMs32K  = []float64{0.094, 0.169, 0.185, 0.234, 0.337, 0.652, 0.953, 1.833}
	samplerSortMs128K = []float64{0.141, 0.394, 0.497, 0.698, 1.081, 2.383, 3.416, 6.703}
)

const (
	samplerSortVocabLo, samplerSortVocabHi = 32000.0, 128256.0
	samplerSortTBps                        = 4.8 // the H200 the table was timed on
)

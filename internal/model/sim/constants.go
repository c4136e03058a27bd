package sim

import (
	"math"
	"time"
)

// Every physical and calibrated constant of the simulated engine lives in
// this file, each with its source. Figures from docs/reference.md are facts;
// "fit" marks the few efficiency constants chosen inside their published
// ranges against docs/reference.md (Calibration) points 1-3 (the errors are in
// doc.go, "Calibration", and printed by calibration_test.go); "estimate"
// marks the rest. Never change one to make a single test pass.

// Memory accounting (vLLM V1 worker, docs/reference.md (Engines)).
const (
	// GiB is 2^30 bytes, the unit vLLM logs memory in.
	GiB = 1 << 30

	// vllmNonTorchTP1 and vllmNonTorchTPN are the non-torch allocations
	// (CUDA context, cuBLAS workspaces; NCCL buffers when TP > 1) measured by
	// llm-d-benchmark on H100: 0.13 GiB at TP1, 0.55 GiB at TP2.
	vllmNonTorchTP1 = 0.13 * GiB
	vllmNonTorchTPN = 0.55 * GiB

	// samplerLogitCopies is how many fp32 [max_num_seqs x vocab] buffers the
	// dummy sampler run holds at its peak (logits, temperature-scaled copy,
	// probabilities, log-probabilities, top-k/top-p sort values and int64
	// indices). Fit: with the forward-pass term below it reproduces the
	// activation peaks of docs/reference.md (Engines) (8B TP1 4.76 GiB; 70B TP2
	// 4.84 GiB), whose ratio to seqs*vocab*4 is 9.6-9.9. Those logs
	// (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md)
	// and the Qwen3-14B ones of v0.15.0 and v0.16.0 (jgchn/llm-d-planner,
	// accuracy/results/version-sweep/run_matrix.md), which it also
	// reproduces, come from releases whose sampler sorts the logits for
	// top-k/top-p. v0.17 and later log a much smaller peak (2.23 against
	// 5.64 GiB for Qwen3-14B), and so may a v0.11.0 with FlashInfer's
	// sampler; neither is modelled (docs/fidelity-accounts.md,
	// "GPUStack's performance lab", its Memory item).
	samplerLogitCopies = 8.58

	// activationHiddenCopies is the number of [tokens x hidden] bf16 buffers
	// alive at the forward pass's peak (residual stream and normed input)
	// next to the [tokens x 2*I/tp] gate_up output. Estimate.
	activationHiddenCopies = 2

	// cudaGraphBytesPerLayer is the CUDA graph pool per decoder layer; vLLM
	// logs "Graph capturing finished ... took ~0.5 GiB" for 32-layer 8B
	// models with the default capture sizes. Estimate. vLLM V1 (<= 0.10)
	// captures after sizing the KV cache, inside the 1 - utilisation
	// headroom, so it is reported and checked against that headroom but not
	// subtracted from the KV cache.
	cudaGraphBytesPerLayer = 0.0166 * GiB

	// sglangContextBytes is the CUDA context and allocator overhead SGLang
	// sees before loading weights. Estimate (same order as vLLM's non-torch
	// memory at TP1).
	sglangContextBytes = 0.3 * GiB

	// memoryOverhead scales the reservations above (non-torch memory,
	// activation peak, CUDA graph pool, SGLang's context) together. 1: the
	// model as sourced; it is the one memory constant a calibration moves,
	// because the real figures drift with the driver, NCCL and the engine
	// version, while weights and KV bytes per token are exact.
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
	// hbmEfficiency: decode reaches 0.75-0.85 of peak HBM bandwidth
	// (aiconfigurator applies 0.8). Fit: 0.85, the top of the range, is the
	// value closest to calibration point 2 (Llama-3-8B on H100 GPU time
	// ~13 ms x 38% = 4.9 ms per decode step), which alone would ask for 0.98.
	hbmEfficiency = 0.85

	// bf16GEMMEfficiency: BF16 GEMMs reach 0.55-0.79 of peak, 0.70 typical.
	bf16GEMMEfficiency = 0.70

	// fp8GEMMEfficiency: FP8 GEMMs reach 0.28-0.55 of the FP8 peak
	// (docs/reference.md). 0.55, the top of that range: vLLM's own kernel
	// benchmark (vllm-project/vllm PR #17126, bench_fp8_gemm.py on
	// Hopper) measures its CUTLASS W8A8 GEMM at 956 TFLOPS (0.48 of 1979)
	// without the activation quantization already at 256 tokens, the
	// roofline's ridge, where a GEMM is least efficient (743 with it; the
	// quantization is a kernel of its own here, "Memory-bound work between
	// the GEMMs" below). The 0.45 before was fitted to TensorRT-LLM's
	// Llama-3.1-8B upper bounds (calibration point 3) while the model left
	// out that memory-bound work, so the fit had folded it into this
	// constant (sim/doc.go, weak spot 2).
	fp8GEMMEfficiency = 0.55

	// Block-scaled FP8 (a scale per 128x128 block of weights and per
	// 128 activations of a token, DeepSeek-V3's checkpoint) multiplies
	// below the per-tensor kernels' rate. SGLang's benchmark of its
	// blockwise FP8 GEMMs on DeepSeek-V3's shapes (sgl-project/sglang PR
	// #5207, N=4608 K=7168, Hopper) times DeepGEMM, which SGLang runs the
	// linears with on Hopper, at 79, 151 and 271 us for 1,024, 2,048 and
	// 4,096 tokens: 0.43, 0.45 and 0.50 of the 1,979 TFLOPS FP8 peak; its
	// Triton blockwise kernel at 165, 266 and 466 us: 0.21, 0.26 and 0.29.
	// blockFP8GEMMEfficiency is DeepGEMM's 0.45 (2,048 tokens).
	// blockFP8ExpertEfficiency, the routed experts' grouped GEMMs, is the
	// Triton kernel's 0.26: with tensor-parallel experts both engines run
	// them in the fused Triton MoE kernel (fused_moe_triton), whose
	// block-scaled FP8 path is the same Triton blockwise GEMM per expert.
	// Estimates from one benchmark (its GPU unstated beyond Hopper).
	blockFP8GEMMEfficiency   = 0.45
	blockFP8ExpertEfficiency = 0.26

	// fp4GEMMEfficiency: NVFP4 GEMMs (W4A4, FP8 scales per 16 values) on
	// FP4 tensor cores. No public large-batch efficiency of the engines'
	// FP4 kernels (FlashInfer/CUTLASS) was found; taken as the FP8
	// kernels' share of their peak (fp8GEMMEfficiency), an estimate.
	fp4GEMMEfficiency = fp8GEMMEfficiency

	// fusedMoEBF16Efficiency and fusedMoEExpertRows are the routed
	// experts' rate in 16-bit activations (BF16 weights, or FP8 weights
	// dequantized to BF16 on GPUs without FP8 tensor cores). The engines
	// run them as one fused MoE path (vLLM's fused_experts in
	// vllm/model_executor/layers/fused_moe/fused_moe.py, SGLang's
	// fused_moe_triton): tokens gathered per expert into grouped GEMMs,
	// each expert's rows padded to BLOCK_SIZE_M (16-128) tiles, with the
	// alignment, SiLU-and-mul and top-k sum between them. Its share of
	// the peak grows with the rows per expert m = tokens·top_k/E: the
	// padding and the per-expert fixed work cost about the same whatever
	// m is, so the model charges every expert that gets tokens
	// fusedMoEExpertRows more rows of work at fusedMoEBF16Efficiency of
	// the BF16 peak, a share of effMax·m/(m + m0) where compute-bound.
	// Published vLLM benchmark_moe.py sweeps with tuned configs, whole
	// path, FLOPs 2·tokens·top_k·3·hidden·N (N the per-GPU intermediate,
	// the config files' N; docs/reference.md, "Fused MoE kernel
	// timings", has every row); each sweep's two largest batches give
	// its effMax and m0 (1/share is linear in 1/m):
	//   - A100-SXM4-80GB, E=64 N=1408 hidden 2048 top-6 (vllm-project/
	//     vllm PR #40542): 1,024 tokens (m=96) in 929.9 us, 0.37 of 312;
	//     4,096 (m=384) in 2,636.6 us, 0.52: effMax 0.60, m0 61;
	//   - H200, Gemma4's E=128 N=704 hidden 2816 top-8 (PR #44818):
	//     3,072 (m=192) in 962.9 us, 0.31 of 989; 4,096 (m=256) in
	//     1,189.6 us, 0.33: effMax 0.43, m0 80;
	//   - H100, Mixtral TP2's E=8 N=7168 hidden 4096 top-2 (PR #24700):
	//     1,024 (m=256) in 833.7 us, 0.44 of 989; 1,536 (m=384) in
	//     1,122.9 us, 0.49: effMax 0.63, m0 113.
	// The medians of the three: effMax 0.60 (A100), m0 80 (H200). The
	// H200 sweep stays ~25% faster in the model than measured from 1,024
	// tokens up: its narrow N is slower per FLOP, but one sweep cannot
	// tell N from E, hidden and the GPU, so no width factor is taken
	// (Qwen3-235B's N=192 at TP8 is likely slower still). No public
	// large-batch figure of vLLM's Marlin MoE kernel (W8A16 on Ampere)
	// was found: it takes the same law.
	fusedMoEBF16Efficiency = 0.60
	fusedMoEExpertRows     = 80

	// w4a16GEMMEfficiency: Marlin's weight-only GEMMs (AWQ/GPTQ W4A16, and
	// FP8 weights on GPUs without FP8 tensor cores, W8A16) reach ~0.45 of
	// the BF16 peak where compute-bound (dequantisation in the kernel).
	// Marlin on A100 (vllm-project/vllm PR #2497, IST-DASLab/marlin
	// bench.py): 139.7-141.4 TFLOPS from 64 to 4,000 rows, 0.45 of 312,
	// flat because it runs its 64-row tile repeatedly above 64
	// (IST-DASLab/marlin issue #2). vLLM runs FP8 checkpoints' linears and
	// experts in Marlin below compute capability 8.9 (fp8.py,
	// Fp8LinearMethod and Fp8MoEMethod use_marlin; the FP8 Marlin of PR
	// #5975 is GPTQ Marlin's 8-bit mainloop); no W8A16 figure at large
	// batch was found, so it shares the W4A16 plateau (an estimate).
	w4a16GEMMEfficiency = 0.45

	// fa2DecodeEfficiency is the share of peak HBM bandwidth at which
	// FlashAttention-2's decode kernel reads the KV cache on Ampere (the
	// catalog's GPUs without FP8 tensor cores), where vLLM runs FA2 (its
	// FA3 needs Hopper; Ada runs FA2 too, unprofiled here, and keeps
	// hbmEfficiency). The kernel launches one thread block per sequence and
	// KV head (the query heads of a GQA group packed into one block),
	// splitting the context only when those blocks fill less than most
	// of the SMs, so on A100's 108 SMs a batch runs in whole waves and a
	// wave's last blocks leave SMs idle. microsoft/vidur's profile of it
	// on A100 (data/profiling/a100/attention.csv at e2d00e9, Llama-2-70B
	// at TP2: 4 KV heads of 128 per GPU, bf16, block size 16) steps with
	// the waves (at 2,048 tokens of context: 0.140 ms at batch 54, 0.189
	// at 55, whose 220 blocks need a third wave of 108). Its median
	// attn_decode times at 1,024 and 2,048 tokens and batch 16, 32, 64
	// and 128 (0.057, 0.064, 0.122, 0.192; 0.072, 0.108, 0.219, 0.349
	// ms), less the kernel's fixed cost the model charges apart
	// (kernelOverhead at A100's clock, 4.8 us), read the KV cache at
	// 0.32-0.77 of the 2,039 GB/s peak (median 0.59), where the other
	// memory-bound work reaches hbmEfficiency; all eight together, 1.51
	// GB in 1.145 ms, at 0.65. Source: that total, which a step's sum
	// of layers follows (TestDecodeAttentionMatchesProfile). No H100
	// row of vidur's attention profiles is readable (Git LFS), so
	// Hopper keeps hbmEfficiency.
	fa2DecodeEfficiency = 0.65

	// attentionEfficiency: FlashAttention prefill reaches 35-75% of the BF16
	// peak (FA2 ~35-50% on H100, FA3 up to 75%). Estimate: 0.5.
	attentionEfficiency = 0.5

	// linkEfficiency: NCCL all-reduce bus bandwidth as a share of the
	// per-direction link bandwidth. Fit to the measured 64 MB all-reduce at
	// TP2 on DGX-H100 (245 us, microsoft/vidur profiling): 0.6.
	linkEfficiency = 0.6
)

// gemmStreamEfficiency is the share of peak HBM bandwidth at which a
// GPU's BF16 GEMMs (the linear layers in 16-bit weights, the LM head)
// stream their weights at decode batch sizes, where it differs from
// hbmEfficiency; quantized linears run other kernels and keep it.
// microsoft/vidur's kernel profiles of the Llama-2-70B layer
// (data/profiling/compute/{a100,h100}/meta-llama/Llama-2-70b-hf/mlp.csv
// at 25e529d and 683364e) time the four linears (QKV, O, gate_up, down;
// 428 MB of bf16 weights per GPU at TP4, 855 MB at TP2) at 16, 32 and 64
// tokens on A100 at 0.3025, 0.301, 0.3075 ms (TP4) and 0.549, 0.571,
// 0.5925 ms (TP2): less 4.8 us of fixed cost a kernel (kernelOverhead at
// A100's clock), 3.85 GB in 2.51 ms, 0.75 of the 2,039 GB/s peak
// (gate_up alone 0.72-0.79). On H100 the same four at TP4 and 16 tokens
// take 0.1605 ms, 0.87 of 3,350 GB/s, which hbmEfficiency (0.85) already
// gives. Source: the pooled A100 rows (TestGEMMStreamMatchesProfile,
// which also holds vidur's CodeLlama-34B TP2 rows, read after the
// choice: its linears at 0.76); A100-40G shares the chip. At 128 tokens,
// near A100's ridge (153 FLOP/B), the profile's linears take 1.3x what
// this rate and bf16GEMMEfficiency's roofline give, which the model does
// not follow: a smooth roofline was tried and reverted
// (docs/fidelity-accounts.md, "A100's BF16 GEMMs stream their weights at 0.75 of the peak").
var gemmStreamEfficiency = map[string]float64{"A100-80G": 0.75, "A100-40G": 0.75}

// All-reduce start-up latency by TP size (the alpha of alpha + bytes/beta).
var (
	// NVLink: vLLM and SGLang reduce small and medium messages (up to a few
	// MB: every decode step) with their own one-shot/two-shot custom
	// all-reduce kernel over NVLink peer memory, not NCCL. Measured NCCL
	// on DGX-H100 (microsoft/vidur): 7 us at TP2 but ~38 us at TP4/TP8;
	// the custom kernel stays near 10 us at TP4/TP8 (vLLM PR #2192
	// benchmarks: a third to a half of NCCL's small-message latency).
	// Estimate for TP4/TP8: 10 us.
	allReduceLatencyNVLink = map[int]time.Duration{2: 7 * time.Microsecond, 4: 10 * time.Microsecond, 8: 10 * time.Microsecond}
	// PCIe: vLLM disables its custom all-reduce on more than two PCIe-only
	// GPUs, so NCCL through the host bridge does the work. Estimate: a few
	// tens of microseconds, growing with the ring (nccl-tests on PCIe
	// servers).
	allReduceLatencyPCIe = map[int]time.Duration{2: 20 * time.Microsecond, 4: 45 * time.Microsecond, 8: 70 * time.Microsecond}
)

// Host-side costs.
const (
	// stepOverheadVLLM is the per-step CPU time (scheduling, input
	// preparation, output processing). Calibration point 2: v0.5 spent
	// ~62% of a 13 ms step (~8 ms) on the CPU; v0.6+ (multi-step, async
	// output) and V1 cut it sharply. Fit: 1.5 ms, the "few ms, lower for
	// newer versions" of calibration.md. With async scheduling, vLLM's
	// default since PR #27614 (docs/reference.md (Step cadence)), it runs
	// beside the GPU's step and only a host slower than the GPU sets the
	// cadence; --no-async-scheduling puts it between the steps again.
	stepOverheadVLLM = 1500 * time.Microsecond
	// stepOverheadSGLang: SGLang overlaps scheduling with the GPU
	// ("zero-overhead" scheduler). Estimate: 1.0 ms.
	stepOverheadSGLang = 1000 * time.Microsecond
	// sglangNoOverlapSlowdown is how much longer an SGLang step takes
	// without the overlap scheduler (--disable-overlap-schedule, or an
	// SGLang from before sgl-project/sglang PR #2067, November 2024,
	// released in v0.4, which turned it on by default; v0.3.0 ran
	// without it): the host's scheduling,
	// memory allocation and output handling (and at TP > 1 rank 0's
	// broadcast of the received requests to the other ranks,
	// broadcast_recv_input in SGLang's tp_worker.py) run
	// between the GPU's steps instead of beside them. The SGLang v0.4
	// release post (https://lmsys.org/blog/2024-12-04-sglang-v0-4/,
	// "Zero-Overhead Batch Scheduler") measures the overlap scheduler at
	// 1.1x throughput: a step without it takes 1.1 times as long.
	// Source (one published figure), not fit.
	sglangNoOverlapSlowdown = 1.1
	// perSeqOverhead is the CPU time per scheduled sequence per step
	// (detokenisation, stop checks, output objects). Estimate: 3 us.
	perSeqOverhead = 3 * time.Microsecond
	// outputProcPerSeq is vLLM V0's output processing per sequence and
	// step (_process_model_outputs: detokenising, stop checks, the
	// request outputs) when it does not run beside the GPU's next step
	// (async_output_proc off; vLLM PR #7049, in v0.6.0, made it overlap).
	// Source: vLLM RFC #6913 (the issue before that PR) profiled it on
	// Llama-3-70B FP8 on 4 x H100, 128-token prompts: 0.2 ms a step at
	// batch 1 and 3.4 ms at batch 32 (TPOT 19 and 25 ms), so
	// (3.4 - 0.2) / 31 = 0.103 ms per sequence; less the perSeqOverhead
	// every step already pays: 0.1 ms. (The RFC's third row, batch 1024
	// at 0.2 ms and "20%", contradicts itself and is not used.) One
	// published profile, not fit.
	outputProcPerSeq = 100 * time.Microsecond
	// eagerLaunchPerLayer is the kernel-launch cost per decoder layer when
	// a step does not run as a CUDA graph (cuda_graphs off, or a batch
	// larger than the captured sizes): ~10 kernels at ~4 us launch latency.
	// Estimate.
	eagerLaunchPerLayer = 40 * time.Microsecond
	// sglangExtendHostMLAMoE is the host's time per DeepSeek-V2/V3 layer
	// (MLA and routed experts) that an SGLang extend (prefill or mixed)
	// step adds to the GPU's work. SGLang runs every extend batch
	// eagerly: its CUDA graphs capture decode batches only
	// (cuda_graph_runner.py), and piecewise prefill graphs were opt-in
	// (--enable-piecewise-cuda-graph, PR #10062: "SGLang's current native
	// prefilling can incur kernel launch overhead") until PR #16331
	// (March 2026) made them the default. Such a layer launches many
	// small kernels through Python: SGLang PR #12160 logs a forward of
	// 82.6 ms for a one-token extend batch of DeepSeek-V3 run eagerly and
	// 23.1 ms replayed as a CUDA graph, and reports that prefill latency
	// hardly changes below 100 new tokens: (82.6 - 23.1) / 61 layers =
	// 0.975 ms. The time adds to the GPU's rather than hiding behind it:
	// on 8 x H200 at TP8, DeepSeek-R1 FP8's time to first token at batch
	// 1 (TensorRT-LLM issue #5929, its PyTorch backend, whose context
	// steps run eagerly too) is 165 ms at 1,600 tokens and 516 ms at
	// 8,192, a line whose ~80 ms at zero tokens is this 59.5 ms with the
	// front end. Estimate from those two measurements.
	sglangExtendHostMLAMoE = 975 * time.Microsecond
)

// GPU-side cost of a kernel (calibration, weak spot 3 in doc.go).
const (
	// kernelOverhead is what every GPU kernel costs on top of its work,
	// even inside a CUDA graph: the gap between one kernel's end and the
	// next one's start plus the ramp-up and tail of a kernel that does
	// not fill the GPU at either end. NVIDIA's "Getting Started with CUDA
	// Graphs" (developer.nvidia.com/blog/cuda-graphs, 2019) measures
	// 3.4 us per short kernel launched from a graph, against 2.9 us of
	// work; the microbenchmark's per-kernel total is the figure used:
	// 3.4 us. Source, not fit.
	//
	// It is the figure at kernelOverheadRefMHz, H100 SXM's boost clock,
	// where the latency calibration checks it (TestCalibrationVLLMLatency),
	// and it scales with the inverse of a GPU's SM clock (steptime.go,
	// kernelClockScale): a kernel too small to load the memory system is
	// paced by the SMs. microsoft/vidur's kernel profiles of the
	// Llama-2-70B layer at TP8 and one token
	// (data/profiling/compute/{h100,a100}/meta-llama/Llama-2-70b-hf/
	// mlp.csv, commits 683364e and 25e529d) time its five small kernels
	// (two RMSNorms, rotary, SiLU-and-mul, the residual add) at 17 us on
	// H100 and 25 us on A100, 1.47x, against clocks of 1,980 and 1,410
	// MHz, 1.40x; the whole layer at 1-64 tokens takes 1.58-1.70x H100's
	// there, about the peak-bandwidth ratio (1.64x), which a fixed 3.4 us
	// per kernel put at 1.46x (TestDecodeLayerMatchesProfile). vLLM's
	// dashboard latency test on A100-SXM4-80GB (build 9523) agrees: the
	// simulator was 1-14% fast there with a fixed cost, 3% fast to 1%
	// slow for 8B and Mixtral with this scaling (70B TP4 stays 11% fast).
	kernelOverhead       = 3400 * time.Nanosecond
	kernelOverheadRefMHz = 1980

	// Kernels per layer. newStepModel counts a layer's kernels from its
	// own linears (steptime.go, layerKernels): one GEMM launch each
	// (two for MLA's absorbed KV up-projection), one more each under
	// W8A8 for its input's quantization, and the kernels below. For a
	// Llama layer that gives the ten of vLLM V1 and SGLang with their
	// fused ops, counted from vllm/model_executor/models/llama.py:
	// add+RMSNorm, QKV GEMM, rotary embedding, KV-cache write,
	// attention, O GEMM, add+RMSNorm, gate_up GEMM, SiLU-and-mul, down
	// GEMM.
	//
	// attentionBlockKernels are a layer's kernels besides its linears
	// and MLPs: the two fused add+RMSNorms, rotary embedding, the
	// KV-cache write and attention.
	attentionBlockKernels = 5
	// qkNormTPKernels: QK norms over every head under TP (MiniMax-M2)
	// take a variance kernel and a normalize kernel around their
	// all-reduce (vLLM's MiniMaxText01RMSNormTP, forward_qkv; the
	// all-reduce is steptime.go's).
	qkNormTPKernels = 2
	// mlpActivationKernels is SiLU-and-mul, once per MLP (the dense one,
	// an MoE layer's shared experts).
	mlpActivationKernels = 1
	// moeRoutedKernels is the fused MoE path of a layer's routed experts
	// (vllm/model_executor/layers/fused_moe/fused_moe.py, fused_experts;
	// SGLang's Triton path is the same): router GEMM, top-k, token
	// alignment (moe_align_block_size), the gate_up grouped GEMM,
	// SiLU-and-mul, the down grouped GEMM, and the top-k sum
	// (moe_sum); under W8A8 moeRoutedQuantKernels more quantize the two
	// grouped GEMMs' inputs (moe_kernel_prepare_input in the same file).
	moeRoutedKernels      = 7
	moeRoutedQuantKernels = 2
	// mlaExtraKernels are MLA's RMSNorms of the query and KV latents
	// (q_a_layernorm, kv_a_layernorm in the engines' deepseek_v2.py,
	// forward_absorb).
	mlaExtraKernels = 2
	// stepKernels are the kernels of a step outside the layers: embedding
	// lookup, final norm, LM head, logits processing and sampling.
	stepKernels = 10
)

// Memory-bound work between the GEMMs (weak spots 1 and 2 in doc.go).
//
// The kernels between a layer's GEMMs (fused residual add + RMSNorm twice,
// rotary embedding, the KV-cache write, SiLU-and-mul) read and write each
// token's activations and overlap nothing: newStepModel counts their bytes
// at the HBM rate. microsoft/vidur's H100 profile of the Llama-2-70B layer
// (data/profiling/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv, the same
// shapes as Llama-3-70B) times them at 0.045 ms of a 0.375 ms layer at 512
// tokens and TP4 and 0.18 of 2.93 ms at 1,024 tokens and TP1 (6-14% on top
// of the GEMMs); without them the model's layer was 6.5-12.7% short of the
// profile at four sizes, with them -8.0..+1.9%
// (TestPrefillLayerMatchesProfile).
//
// W8A8 FP8 with dynamic per-token scales (vLLM's Fp8LinearMethod)
// quantizes each linear's input in a kernel of its own: read bf16, write
// fp8. vLLM PR #17126 measures it at a fifth of the GEMM's time at 256
// tokens (743 vs 956 TFLOPS with and without it); newStepModel counts its
// bytes and one kernel per linear. The compile pass that fuses it into the
// RMSNorm and SiLU-and-mul kernels is off by default under V1
// (vllm/config/compilation.py, PassConfig.enable_fusion = not
// VLLM_USE_V1); at small batch its kernels add ~5% to a 70B FP8 model's
// time per token (four per layer at kernelOverhead).

// Host-side cost of a request outside the engine loop (weak spot 1 in
// doc.go).
const (
	// frontendOverhead is what a request spends in the API server apart
	// from the engine's steps: HTTP, chat template and tokenization, the
	// hand-off to the engine process, and the first token's way back
	// (detokenization, the SSE write). It adds to TTFT and E2E latency,
	// not to the time between tokens, and the engine's own TTFT
	// (vllm:time_to_first_token_seconds, from the request's arrival at
	// the engine) leaves it out. vLLM PR #54628 measured the client's TTFT
	// against the engine's on the same runs: 8.4-12.2 ms more (five runs,
	// median 11.0; vllm bench serve, 512-token prompts, a laptop RTX 4070
	// under WSL2 with the client on the same CPU). On H100 servers the
	// server's own share is smaller: journey traces of 13 vLLM 0.15.1 runs
	// (136k requests; inference-sim/training at e95f416,
	// output/fit/coefficients.json and DESIGN.md) give api.ARRIVED to
	// journey.QUEUED 9.3 ms mean, most of it the wait for the engine
	// loop's next pass (QUEUED is stamped there; half a step of 8-19 ms,
	// which core.schedule models itself), and journey.FINISHED to
	// api.DEPARTED 1.8 ms: some 3 ms in all. The client's share (network,
	// the load generator's own parsing) is not measured there, so the
	// laptop's client-to-engine figure stays. Estimate: 10 ms. A
	// calibration fits it when asked (calibrate --fit).
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

// sglangDefaultMemFraction is SGLang's gpu_memory_fraction by TP size in its
// releases before the GPU-memory rule (sglangMemoryDefaults), which runs of
// those releases state with SGLang's memory-fraction flag (docs/reference.md
// (Engines)): 0.88/0.87/0.85/0.81 for TP 1/2/4/8.
func sglangDefaultMemFraction(tp int) float64 {
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
	// sglangNewTokenRatio is the share of each running request's remaining
	// output that SGLang's scheduler keeps free before admitting new
	// prefills (new_token_ratio: starts at 0.7 and decays to ~0.1 while no
	// request is retracted). Estimate: 0.3, its typical steady value.
	sglangNewTokenRatio = 0.3
)

// vLLM's PyTorch-native top-k/top-p sampler. Until the Triton kernel of
// vLLM PR #33538 (opened February 2026, after v0.15) and the FlashInfer
// sampler's return as the default (PR #40376; it was off by default from
// PR #26859, October 2025, because of correctness reports), a V1 batch
// with any request's top_p below 1 or top_k set runs
// apply_top_k_top_p_pytorch (vllm/v1/sample/ops/topk_topp_sampler.py):
// it sorts the whole [rows x vocab] float32 logits, takes a softmax and a
// cumsum of them, masks and scatters back, every step, where plain
// random sampling is a softmax, an exponential draw and an argmax. vLLM
// PR #11394 measured the sort at ~20% of ShareGPT throughput (47.40
// req/s without top-p, 40.20 with); PR #32558 (January 2026) calls the
// sort-based path the current one and FlashInfer's not on by default.
//
// samplerSortMs is that path's time less plain random sampling's, in ms,
// by sampled rows, at a 32,000 and a 128,256-token vocabulary, on an
// H200 (4.8 TB/s): GPU time of the vLLM code (temperature, top-p, then
// random_sample), timed by scripts/sampler_bench.py (its output in
// scripts/sampler_bench_h200.json; torch 2.11, where vLLM 0.15 ships
// torch 2.9; CUDA events with the GPU kept busy ahead of the launches,
// so host launch time is left out). vLLM PR #40376's table of the same
// PyTorch path (its GPU not in reach here) agrees: 1.005, 2.27 and 6.15
// ms at 64, 128 and 512 rows of 131,072 tokens, here 1.08, 2.38 and 6.70
// at 128,256. Other GPUs scale by HBM bandwidth (an estimate: the sort
// streams the logits several times; no other GPU was timed); other
// vocabularies linearly in the vocabulary (a 151,936-token
// check on the H200, timed with the launches, which do not bind at these
// sizes: 3.15 and 9.03 ms at 128 and 512 rows, linear 3.18 and 9.12).
var (
	samplerSortRows   = []float64{1, 8, 16, 32, 64, 128, 256, 512}
	samplerSortMs32K  = []float64{0.094, 0.169, 0.185, 0.234, 0.337, 0.652, 0.953, 1.833}
	samplerSortMs128K = []float64{0.141, 0.394, 0.497, 0.698, 1.081, 2.383, 3.416, 6.703}
)

const (
	samplerSortVocabLo, samplerSortVocabHi = 32000.0, 128256.0
	samplerSortTBps                        = 4.8 // the H200 the table was timed on
)

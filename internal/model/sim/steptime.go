package sim

import (
	"math"
	"time"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// batchShape is what one engine step computes, in aggregate: enough for the
// step-time model to be O(1) per step whatever the batch size.
type batchShape struct {
	tokens  int // tokens through the GEMMs (prefill chunk tokens + one per decode)
	seqs    int // sequences scheduled
	decodes int // of them, those decoding a token
	sampled int // sequences that produce logits this step
	// filtered: a sampled sequence has a top-p or top-k, so vLLM's
	// V1 sampler applies them to every sampled row (samplerSeconds).
	filtered      bool
	decodeCtx     float64 // sum over decode sequences of the context attended
	prefillTokens int
	prefillPairs  float64 // sum over prefill chunks of n*(c0 + (n+1)/2): causal query-key pairs
	prefillKV     float64 // sum over prefill chunks of c0+n: KV tokens read
	// Speculative decoding (speculative.go): the query-key context of the draft
	// tokens verified (sum over sequences of drafts x context; their KV
	// is read once with the sequence's own query), and the sequences that
	// sample and then draft, with their contexts.
	verifyCtx float64
	drafting  int
	draftCtx  float64
	// groupTokens are the tokens every data-parallel rank brings into the
	// routed experts this step when the ranks step together (virtual.go,
	// lockstep): each rank's own, or 1 for a rank that runs a dummy
	// batch. 0 takes this rank's tokens times the ranks, as if equally
	// loaded (moe.go, moeStep.tokenwise).
	groupTokens float64
}

// gemm is one linear layer on one GPU.
type gemm struct {
	weights float64 // elements per GPU
	in, out float64 // activation widths per GPU
	// kernels is the GEMM launches it costs a layer, averaged over the
	// layers (1; 2 for MLA's absorbed KV up-projection, two batched
	// GEMMs; a share for a linear only some layers have), and quant the
	// launches that quantize its input under W8A8 (0 for the batched
	// GEMMs on bf16 weights).
	kernels, quant float64
}

// linear is a gemm that every layer has once, its input quantized
// under W8A8.
func linear(weights, in, out float64) gemm {
	return gemm{weights: weights, in: in, out: out, kernels: 1, quant: 1}
}

// stepModel holds the per-GPU figures of one config so that a step's time is
// a handful of multiply-adds.
type stepModel struct {
	layers     float64
	gemms      []gemm
	wBytes     float64 // bytes per linear weight element
	gemmRate   float64 // achievable FLOP/s of the linear layers
	expertRate float64 // achievable FLOP/s of the routed experts' GEMMs
	// expertRows is the fused MoE path's fixed work per expert that
	// receives tokens, in rows of its GEMMs (constants.go,
	// fusedMoEExpertRows); 0 on the other expert paths.
	expertRows float64
	bf16Rate   float64 // achievable BF16 FLOP/s (LM head)
	attnRate   float64 // achievable FLOP/s of attention
	bw         float64 // achievable HBM bytes/s

	// routerFP32 is the achievable FLOP/s of the MoE router's gate on
	// the CUDA cores where it runs in float32 (setRouter); 0 where it is
	// a BF16 GEMM at bf16Rate.
	routerFP32 float64

	// decodeBW is the HBM rate of the decode attention kernel's KV
	// reads: bw, or less under FlashAttention-2; gemmBW the rate at
	// which a BF16 GEMM (the LM head) streams its weights: bw, or the
	// GPU's own; linearBW the linear layers' rate, gemmBW for 16-bit
	// weights (setMemoryRates).
	decodeBW, gemmBW, linearBW float64
	qPerGPU                    float64
	kvPerGPU                   float64
	headDim                    float64
	kvElem                     float64
	hidden                     float64
	moe                        bool
	experts, topK              float64
	expertW                    float64 // elements of one expert's MLP per GPU
	lmHeadW                    float64 // elements per GPU
	actBytes                   float64 // bytes per token per layer of the memory-bound kernels between the GEMMs
	vocab                      float64
	tp                         int
	arLatency                  float64 // seconds
	arBandwidth                float64 // bytes/s
	pp                         int
	topo                       Topology // domains and the network between them (network.go)
	eager                      bool
	graphMaxBS                 int
	// eagerExtend: steps with prompt tokens never run as CUDA graphs
	// (SGLang); extendHost is the host's time per layer of such a step
	// that the GPU's work does not hide (constants.go,
	// sglangExtendHostMLAMoE).
	eagerExtend bool
	extendHost  float64
	// sortScale is the native sampler's sort time per table millisecond
	// (samplerSortMs at this vocabulary and GPU), in seconds; 0 when the
	// step samples without it.
	sortScale    float64
	sortVocabMix float64 // where the vocabulary lies between the table's two
	cpuBase      float64 // seconds
	perSeq       float64 // seconds per scheduled sequence
	async        bool    // the host's step work runs beside the GPU's (vLLM's async scheduling)
	noOverlap    bool    // SGLang without its overlap scheduler (constants.go, sglangNoOverlapSlowdown)
	// overlap: SGLang's overlap scheduler (its default since v0.4, PR
	// #2067) plans batch N+1 before batch N's result is in, as vLLM's
	// async scheduling does (core.schedule).
	overlap bool
	kernels float64 // seconds of kernel overhead per step (kernelOverhead x kernels)
	// kernelsPerLayer and kernelsPerStep are kernels' parts: one layer's
	// and the step's own.
	kernelsPerLayer, kernelsPerStep float64

	// prefillPairFlops is prefill attention's FLOPs per query-key pair
	// and query head: QK^T and PV, 2·headDim each; MLA's unabsorbed
	// prefill sets its own (moe.go).
	prefillPairFlops float64

	// fullFrac is the share of the layers that attend to the whole
	// context, spans the windowed ones (hybrid.go); spans is empty when
	// every layer attends to the whole context.
	fullFrac float64
	spans    []attnSpan
	// expertBytes is the bytes per routed expert weight element (wBytes
	// unless only the experts are quantized: MXFP4).
	expertBytes float64
	// qkNormTP: the QK norms span every head and TP splits them, an
	// all-reduce a layer (hybrid.go, qkNormAllReduce).
	qkNormTP bool
	// attnGate: the attention layers gate their output (Qwen3-Next),
	// an elementwise kernel of its own.
	attnGate bool
	// lin costs a hybrid's linear-attention layers (linear.go); nil
	// when every layer is attention.
	lin *linearStep
	// sp costs sparse attention's indexer (sparse.go); nil for dense
	// attention.
	sp *sparseStep

	// mx costs MoE under DP attention and EP, and MLA (moe.go); nil for
	// dense models.
	mx *moeStep
	// spec costs speculative decoding's drafts (speculative.go); nil when off.
	spec *specStep
	// tw remembers tokenwiseGroup (tokenwiseMemo); the cores of one
	// engine, built from one config, share it. Nil: no memory.
	tw *twMemo
}

func newStepModel(cfg Config) stepModel {
	m := cfg.Model
	g := cfg.GPU
	k := cfg.Constants.WithDefaults(cfg.Engine)
	tp := float64(cfg.TP)
	h, d := float64(m.Hidden), float64(m.HeadDim)
	q, kv := float64(m.Heads)/tp, float64(cfg.kvHeadsPerGPU())
	s := stepModel{
		layers:      float64(m.Layers),
		wBytes:      cfg.weightBytesPerElem(),
		expertBytes: cfg.expertBytesPerElem(),
		bf16Rate:    g.BF16TFLOPS * 1e12 * k.BF16GEMMEfficiency,
		attnRate:    g.BF16TFLOPS * 1e12 * k.AttentionEfficiency,
		bw:          g.HBMTBps * 1e12 * k.HBMEfficiency,
		qPerGPU:     q,
		kvPerGPU:    kv,
		headDim:     d,
		kvElem:      cfg.kvBytesPerElem(),
		hidden:      h,
		moe:         m.MoE(),
		experts:     float64(m.Experts),
		topK:        float64(m.ExpertsPerTok),
		expertW:     3 * h * float64(m.Intermediate) / tp,
		lmHeadW:     float64(m.Vocab) * h / tp,
		vocab:       float64(m.Vocab),
		tp:          cfg.TP,
		pp:          cfg.PP,
		eager:       !cfg.CUDAGraphs,
		graphMaxBS:  cfg.CUDAGraphMaxBS,
		eagerExtend: cfg.Engine == engine.SGLang,
		async:       cfg.Engine == engine.VLLM && cfg.AsyncScheduling && !cfg.Deviation.SyncHost,
		noOverlap:   cfg.Engine == engine.SGLang && (!cfg.AsyncScheduling || cfg.specTreeStopsOverlap()),
		overlap:     cfg.Engine == engine.SGLang && cfg.AsyncScheduling && !cfg.specTreeStopsOverlap(),
	}
	s.prefillPairFlops = 4 * d
	s.setRouter(cfg, k)
	s.setSpans(m)
	s.qkNormTP = m.QKNormAllHeads && cfg.TP > 1
	s.setLayerShapes(cfg)
	w8a8 := s.setGEMMRates(cfg, k)
	s.setHostCosts(cfg, k)
	s.setMemoryRates(cfg)
	s.setLinks(cfg, k)
	s.sortScale, s.sortVocabMix = samplerSort(cfg)
	s.mx = newMoEStep(cfg, &s)
	s.setSparse(cfg, k) // after MLA's linears (moe.go)
	perLayer := s.layerKernels(w8a8)
	kernel := k.KernelOverheadUs / 1e6 * kernelClockScale(g)
	s.kernels = kernel * (s.layers*perLayer + stepKernels)
	s.kernelsPerLayer, s.kernelsPerStep = kernel*perLayer, kernel*stepKernels
	s.spec = newSpecStep(cfg, &s)
	return s
}

// setLayerShapes sets a layer's GEMMs (attention's projections, and the
// dense MLP unless the experts take it), its linear-attention layers, and
// the activation bytes the kernels between the GEMMs move a token.
func (s *stepModel) setLayerShapes(cfg Config) {
	m := cfg.Model
	tp := float64(cfg.TP)
	h, d := s.hidden, s.headDim
	q, kv := s.qPerGPU, s.kvPerGPU
	inter := float64(m.Intermediate) / tp
	qOut := q // the query projection's heads, twice them with an output gate
	if m.AttnOutputGate {
		qOut, s.attnGate = 2*q, true
	}
	s.gemms = []gemm{
		linear(h*d*(qOut+2*kv), h, d*(qOut+2*kv)), // QKV
		linear(q*d*h, q*d, h),                     // O
	}
	if !s.moe {
		s.gemms = append(s.gemms,
			linear(2*h*inter, h, 2*inter), // gate_up
			linear(inter*h, inter, h),     // down
		)
	}
	s.setLinear(cfg) // a hybrid's linear-attention layers (linear.go)
	// The kernels between the GEMMs (constants.go, "Memory-bound work
	// between the GEMMs") read and write every token's activations and
	// hide behind nothing: two fused residual add + RMSNorm (read x and
	// the residual, write both), rotary embedding of q and k (read and
	// write), the KV-cache write (read k and v, write them in the cache's
	// dtype) and SiLU-and-mul (read the gate_up output, write half of it;
	// once per routed expert for MoE). The MoE layers add the top-k sum:
	// the second expert GEMM writes each routed pair's output row, and a
	// kernel of its own reads the token's top-k rows and writes its one
	// (moe_sum over intermediate_cache3 in vLLM's fused_moe.py and
	// fused_marlin_moe.py; SGLang's fused_moe_triton the same).
	silu := 3 * inter * bytesBF16
	reduce := 0.0
	if s.moe {
		silu *= s.topK
		moeFrac := m.MoEShare()
		reduce = moeFrac * (s.topK + 1) * h * bytesBF16
		if m.RouterFP32 { // the gate's input cast up: read BF16, write float32
			reduce += moeFrac * h * (bytesBF16 + 4)
		}
	}
	attn := 2*2*(q+kv)*d*bytesBF16 + 2*kv*d*(bytesBF16+s.kvElem)
	if s.attnGate { // sigmoid(gate) times the output: read both, write one
		attn += 3 * q * d * bytesBF16
	}
	s.actBytes = 2*4*h*bytesBF16 + attn + silu + reduce
	if a := m.Linear; s.lin != nil {
		s.actBytes = 2*4*h*bytesBF16 + (1-s.lin.frac)*attn + silu + reduce +
			s.lin.actBytes(float64(a.ConvChannels())/tp, float64(a.ValueHeads*a.ValueHeadDim)/tp)
	}
}

// setRouter sets the MoE router's gate rate: a BF16 GEMM, or where the
// model's gate runs in float32 (catalog.Model.RouterFP32: MiniMax-M2) an
// SGEMM on the CUDA cores, at PyTorch's default float32 matmul precision
// (TF32 off), at the GEMMs' share of that peak (bf16GEMMEfficiency
// standing in). A GPU without an FP32 figure in the catalog keeps the
// BF16 rate.
func (s *stepModel) setRouter(cfg Config, k Constants) {
	if cfg.Model.RouterFP32 && cfg.GPU.FP32TFLOPS > 0 {
		s.routerFP32 = cfg.GPU.FP32TFLOPS * 1e12 * k.BF16GEMMEfficiency
	}
}

// setLinks sets the link figures the TP all-reduces and the pipeline
// hops run on: NVLink's or PCIe's, and the scale-out NIC's where a TP ring
// spans domains.
func (s *stepModel) setLinks(cfg Config, k Constants) {
	g := cfg.GPU
	if cfg.TP > 1 || cfg.PP > 1 {
		lat := allReduceLatencyNVLink
		if !g.NVLink() {
			lat = allReduceLatencyPCIe
		}
		s.arLatency = lookupLatency(lat, cfg.TP).Seconds()
		s.arBandwidth = g.LinkGBps * 1e9 * k.LinkEfficiency
	}
	s.topo = cfg.Topology()
	if s.topo.TPCrosses {
		// A ring spanning domains runs at its slowest hop: the NIC.
		s.arLatency += scaleOutLatency.Seconds()
		s.arBandwidth = math.Min(s.arBandwidth, s.topo.bandwidth())
	}
}

// kernelClockScale is a kernel's fixed cost on g in units of
// kernelOverhead, which holds at kernelOverheadRefMHz: the inverse of the
// SM clock (constants.go). A GPU without a clock in the catalog keeps the
// reference.
func kernelClockScale(g catalog.GPU) float64 {
	if g.BoostMHz <= 0 {
		return 1
	}
	return kernelOverheadRefMHz / g.BoostMHz
}

// setHostCosts sets the host's time a step: its fixed part, its part per
// running sequence (more when vLLM V0 processes outputs between the steps,
// constants.go, outputProcPerSeq) and SGLang's eager extend layers of
// DeepSeek's MLA and MoE (sglangExtendHostMLAMoE).
func (s *stepModel) setHostCosts(cfg Config, k Constants) {
	s.cpuBase = k.StepOverheadMs / 1e3
	s.perSeq = k.PerSeqOverheadUs / 1e6
	if !cfg.AsyncOutputProc {
		s.perSeq += outputProcPerSeq.Seconds()
	}
	if cfg.Engine == engine.SGLang && cfg.Model.MLA != nil && cfg.Model.MoE() {
		s.extendHost = sglangExtendHostMLAMoE.Seconds()
	}
}

// setMemoryRates sets the HBM rates of the decode attention kernel and
// of the GEMMs' weight reads, each keeping its ratio to a calibrated HBM
// efficiency. vLLM runs FlashAttention-2 before Hopper (its FA3 needs
// Hopper), whose decode kernel reads the KV cache below the rate of the
// other memory-bound work on Ampere, the catalog's GPUs without FP8
// tensor cores (constants.go, fa2DecodeEfficiency); Ada (L40S) runs FA2
// too but no profile of it was read, and Hopper's FA3 and SGLang's
// FlashInfer keep bw, no profile of theirs saying otherwise. BF16 GEMMs
// stream their weights at the GPU's own rate where it was measured below
// hbmEfficiency (gemmStreamEfficiency, A100); quantized linears run other
// kernels (Marlin, CUTLASS) and keep bw.
func (s *stepModel) setMemoryRates(cfg Config) {
	s.decodeBW = s.bw
	if cfg.Engine == engine.VLLM && !cfg.GPU.HasFP8() {
		s.decodeBW = s.bw * fa2DecodeEfficiency / hbmEfficiency
	}
	s.gemmBW, s.linearBW = s.bw, s.bw
	if e, ok := gemmStreamEfficiency[cfg.GPU.ID]; ok {
		s.gemmBW = s.bw * e / hbmEfficiency
	}
	if s.wBytes == bytesBF16 {
		s.linearBW = s.gemmBW
	}
}

// setGEMMRates sets the linear layers' and the experts' achievable FLOP/s
// by quantization and reports whether their inputs are quantized too
// (W8A8): block-scaled FP8 (DeepSeek's checkpoints) runs below the
// per-tensor rate, W4A16 dequantizes inside a BF16 GEMM, as FP8 weights
// do on GPUs without FP8 tensor cores (Marlin W8A16), and routed
// experts in 16-bit activations run in the fused MoE path below the
// dense rate, with fixed work per expert (constants.go,
// fusedMoEBF16Efficiency and fusedMoEExpertRows). MXFP4 experts on
// Hopper run in Marlin's MoE kernel (setMXFP4Experts).
func (s *stepModel) setGEMMRates(cfg Config, k Constants) (w8a8 bool) {
	g, m := cfg.GPU, cfg.Model
	switch {
	case cfg.Quantization == "fp8" && g.HasFP8() && m.WeightBlock > 0:
		s.gemmRate = g.FP8TFLOPS * 1e12 * blockFP8GEMMEfficiency
		s.expertRate = g.FP8TFLOPS * 1e12 * blockFP8ExpertEfficiency
		w8a8 = true
	case cfg.Quantization == "fp8" && g.HasFP8():
		s.gemmRate = g.FP8TFLOPS * 1e12 * k.FP8GEMMEfficiency
		w8a8 = true
	case cfg.Quantization == "modelopt_fp4" && g.HasFP4(): // W4A4 (hybrid.go)
		s.gemmRate = g.FP4TFLOPS * 1e12 * fp4GEMMEfficiency
		w8a8 = true
	case cfg.Quantization == "awq" || cfg.Quantization == "gptq" || cfg.Quantization == "modelopt_fp4":
		// Marlin W4A16 (NVFP4 without FP4 tensor cores under vLLM, hybrid.go)
		s.gemmRate = g.BF16TFLOPS * 1e12 * k.W4A16GEMMEfficiency
	default: // bf16, or weight-only FP8 without FP8 tensor cores
		s.gemmRate = s.bf16Rate
		if cfg.Quantization == "fp8" { // Marlin (W8A16)
			s.gemmRate = g.BF16TFLOPS * 1e12 * k.W4A16GEMMEfficiency
		}
		s.expertRate = g.BF16TFLOPS * 1e12 * fusedMoEBF16Efficiency
		s.expertRows = fusedMoEExpertRows
		s.setMXFP4Experts(cfg)
	}
	if s.expertRate == 0 {
		s.expertRate = s.gemmRate
	}
	return w8a8
}

// setMXFP4Experts gives MXFP4 experts (gpt-oss) on Hopper Marlin's MoE
// kernel: without FP4 tensor cores both engines run them there in BF16
// arithmetic (vLLM's VLLM_MXFP4_USE_MARLIN path, which InferenceX sets,
// and SGLang's SM90 default), dequantizing in registers ahead of
// Ampere-style MMAs, so its rate is bound by the instructions it issues,
// not by Hopper's tensor peak (constants.go, marlinMXFP4Efficiency), and
// each expert with tokens pads its rows to Marlin's tile
// (marlinMoEExpertRows). Other GPUs without FP4 tensor cores keep the
// fused MoE law: no Marlin timing of theirs was read.
func (s *stepModel) setMXFP4Experts(cfg Config) {
	if cfg.Quantization != "mxfp4" || cfg.GPU.HasFP4() || computeCapability(cfg.GPU.ID) != "90" {
		return
	}
	s.expertRate = cfg.GPU.BF16TFLOPS * 1e12 * marlinMXFP4Efficiency
	s.expertRows = marlinMoEExpertRows
}

// layerKernels counts the kernels one decoder layer launches, averaged
// over the layers, from the layer's own linears (s.gemms, after MLA and
// the MoE layers' shared experts took their places): each linear's GEMM
// launches, the elementwise kernels around attention, SiLU-and-mul once
// per MLP, and the fused MoE path in the MoE layers (constants.go,
// "Kernels per layer"). Under W8A8 (w8a8) each linear's input is
// quantized by a kernel of its own, read in bf16 and written in fp8,
// which also adds to the layer's memory-bound bytes; the fused MoE
// kernel quantizes its experts' inputs itself.
func (s *stepModel) layerKernels(w8a8 bool) float64 {
	n := float64(attentionBlockKernels)
	if s.attnGate {
		n += attnOutputGateKernels
	}
	if s.lin != nil { // the attention layers' kernels, or a linear layer's
		n = (1-s.lin.frac)*n + s.lin.frac*gdnBlockKernels
	}
	if s.qkNormTP {
		n += qkNormTPKernels
	}
	if s.sp != nil {
		n += dsaIndexerKernels
	}
	for _, g := range s.gemms {
		n += g.kernels
		if w8a8 && g.quant > 0 {
			n += g.quant
			s.actBytes += g.in * (bytesBF16 + bytesFP8)
		}
	}
	if s.mx == nil {
		return n + mlpActivationKernels
	}
	n += s.mx.kernels
	return n
}

// lookupLatency returns the all-reduce latency for tp, taking the next
// larger measured size when tp itself was not measured.
func lookupLatency(table map[int]time.Duration, tp int) time.Duration {
	best, bestTP := time.Duration(0), math.MaxInt
	largest, largestTP := time.Duration(0), 0
	for k, v := range table {
		if k >= tp && k < bestTP {
			best, bestTP = v, k
		}
		if k > largestTP {
			largest, largestTP = v, k
		}
	}
	if bestTP == math.MaxInt {
		return largest
	}
	return best
}

// roofline is the time of one operation: compute- or memory-bound.
func roofline(flops, rate, bytes, bw float64) float64 {
	return max(flops/rate, bytes/bw)
}

// allReduce is the ring all-reduce time of n bytes: alpha + 2(t-1)/t * n / beta.
func (s *stepModel) allReduce(n float64) float64 {
	if s.tp <= 1 {
		return 0
	}
	t := float64(s.tp)
	return s.arLatency + 2*(t-1)/t*n/s.arBandwidth
}

// stepSeconds is the wall time of one engine step (GPU plus the CPU work that
// does not overlap it), in seconds.
func (s *stepModel) stepSeconds(b batchShape) float64 {
	if b.tokens == 0 {
		return 0
	}
	gpu := s.gpuSeconds(b)
	if s.spec != nil {
		gpu += s.spec.seconds(b)
	}
	host := s.cpuBase + float64(b.seqs)*s.perSeq
	if s.async {
		// vLLM's async scheduler prepares step N+1 while the GPU runs
		// step N (constants.go, stepOverheadVLLM): the slower of the two
		// sets the cadence.
		return math.Max(gpu, host)
	}
	if s.noOverlap {
		// SGLang's overlap scheduler hides the host work that a step
		// without it waits for (constants.go, sglangNoOverlapSlowdown).
		return (gpu + host) * sglangNoOverlapSlowdown
	}
	return gpu + host
}

// gpuSeconds is the GPU's time of one step, in seconds.
func (s *stepModel) gpuSeconds(b batchShape) float64 {
	T := float64(b.tokens)
	layer := s.tokenwiseMemo(T, b.groupTokens)
	layer += s.attention(b)
	layer += 2*s.allReduce(T*s.hidden*bytesBF16) + s.qkNormAllReduce(T)
	// Without a CUDA graph the CPU launches each layer's kernels; launches
	// hide behind GPU work longer than themselves.
	extend := s.eagerExtend && b.prefillTokens > 0
	if s.eager || b.tokens > s.graphMaxBS || extend {
		layer = math.Max(layer, eagerLaunchPerLayer.Seconds())
	}
	if extend {
		layer += s.extendHost
	}
	gpu := s.layers * layer
	if b.sampled > 0 {
		n := float64(b.sampled)
		gpu += roofline(2*n*s.lmHeadW, s.bf16Rate, s.lmHeadW*bytesBF16+n*s.vocab/float64(s.tp)*4, s.gemmBW)
		if s.tp > 1 { // gather the vocab-parallel logits
			gpu += s.arLatency + n*s.vocab*4*(float64(s.tp)-1)/float64(s.tp)/s.arBandwidth
		}
		if b.filtered {
			gpu += s.samplerSeconds(n)
		}
	}
	// Pipeline stages run one after another for a given batch; the
	// activations hop between stages over the link, or over the
	// network where a boundary falls between domains (Topology).
	if s.pp > 1 {
		hop, cross := T*s.hidden*bytesBF16, float64(s.topo.PPCrossHops)
		gpu += (float64(s.pp-1) - cross) * (s.arLatency + hop/math.Max(s.arBandwidth, 1e9))
		if cross > 0 {
			gpu += cross * (scaleOutLatency.Seconds() + hop/s.topo.bandwidth())
		}
	}
	return gpu + s.kernels
}

// decodeAttention is one layer's decode attention over ctx tokens of
// context in all (their KV read once) and verify query-key pairs more
// for the drafts verified, in seconds: a memory-bound read of the KV
// cache at the decode kernel's rate (setMemoryRates).
func (s *stepModel) decodeAttention(ctx, verify float64) float64 {
	flops := 4 * s.headDim * s.qPerGPU * (ctx + verify)
	return roofline(flops, s.attnRate, ctx*s.kvTokenBytes(), s.decodeBW)
}

// kvTokenBytes is one token's K and V in one layer on one GPU.
func (s *stepModel) kvTokenBytes() float64 { return 2 * s.kvPerGPU * s.headDim * s.kvElem }

// samplerSort says whether cfg's engine sorts the vocabulary to sample
// with a top-p or top-k (vLLM's native path, constants.go samplerSortMs)
// and returns the table's scale to this GPU, in seconds per millisecond,
// and the vocabulary's place between the table's two (0 at 32,000, 1 at
// 128,256, linear beyond). A step pays it when a sampled request filters
// (batchShape.filtered).
func samplerSort(cfg Config) (scale, mix float64) {
	if cfg.Engine != engine.VLLM || !cfg.SamplerSort {
		return 0, 0
	}
	mix = (float64(cfg.Model.Vocab) - samplerSortVocabLo) / (samplerSortVocabHi - samplerSortVocabLo)
	return 1e-3 * samplerSortTBps / cfg.GPU.HBMTBps, mix
}

// samplerSeconds is the native sampler's sort over n sampled rows, beyond
// plain random sampling: samplerSortMs interpolated in the rows (and
// extended by its last slope above 512), blended between the two
// vocabularies.
func (s *stepModel) samplerSeconds(n float64) float64 {
	if s.sortScale == 0 || n <= 0 {
		return 0
	}
	lo, hi := interpolate(samplerSortRows, samplerSortMs32K, n), interpolate(samplerSortRows, samplerSortMs128K, n)
	return s.sortScale * math.Max(lo+s.sortVocabMix*(hi-lo), 0)
}

// interpolate is y at x on the piecewise-linear curve through (xs, ys),
// xs increasing, extended by its end segments.
func interpolate(xs, ys []float64, x float64) float64 {
	i := 1
	for i < len(xs)-1 && x > xs[i] {
		i++
	}
	return ys[i-1] + (ys[i]-ys[i-1])*(x-xs[i-1])/(xs[i]-xs[i-1])
}

// tokenwise is the time of one layer's work that scales with the tokens
// of a step alone, in seconds: the linear layers (MoE experts and router
// included) by roofline, and the memory-bound kernels between them
// (actBytes), which overlap nothing.
func (s *stepModel) tokenwise(T float64) float64 { return s.tokenwiseGroup(T, 0) }

// twMemo holds results of tokenwiseGroup, a pure function of its
// arguments for one step model, by their hash: a run's steps repeat a
// few hundred token counts, which data-parallel ranks share.
type twMemo [1 << 10]struct {
	T, group, t float64
	ok          bool
}

// tokenwiseMemo is tokenwiseGroup, remembered in s.tw when s has one.
func (s *stepModel) tokenwiseMemo(T, group float64) float64 {
	if s.tw == nil {
		return s.tokenwiseGroup(T, group)
	}
	e := &s.tw[((uint64(T)^uint64(group)<<20)*0x9e3779b97f4a7c15)>>54]
	if !e.ok || e.T != T || e.group != group {
		e.T, e.group, e.t, e.ok = T, group, s.tokenwiseGroup(T, group), true
	}
	return e.t
}

// tokenwiseGroup is tokenwise with the routed experts fed group tokens
// from every data-parallel rank (batchShape.groupTokens; 0: T per rank).
func (s *stepModel) tokenwiseGroup(T, group float64) float64 {
	t := T * s.actBytes / s.bw
	for _, g := range s.gemms {
		flops := 2 * T * g.weights
		bytes := g.weights*s.wBytes + T*(g.in+g.out)*bytesBF16
		t += roofline(flops, s.gemmRate, bytes, s.linearBW)
	}
	if s.moe {
		// Experts touched by T tokens routed top-k of E: E*(1-(1-k/E)^T).
		touched := s.experts * (1 - math.Pow(1-s.topK/s.experts, T))
		t += s.routedExperts(T, T*s.topK, touched, s.experts, s.expertW, s.hidden)
	}
	if s.mx != nil {
		t += s.mx.tokenwise(s, T, group)
	}
	return t
}

// routedExperts is one layer's routed experts and router for a step of
// T tokens on one GPU: pairs token-expert pairs over the touched experts
// of its own (expertW elements of MLP each, hidden wide), the router
// scoring experts of them. Each expert that receives tokens costs
// expertRows more rows of work (tile padding and per-expert fixed work,
// constants.go, fusedMoEExpertRows). Plain TP (tokenwiseGroup) and
// DP/EP (moeStep.tokenwise) differ only in the counts.
func (s *stepModel) routedExperts(T, pairs, touched, experts, expertW, hidden float64) float64 {
	flops := 2 * (pairs + touched*s.expertRows) * expertW
	bytes := touched*expertW*s.expertBytes + pairs*(hidden+2*expertW/(3*hidden))*bytesBF16
	rate, wBytes := s.bf16Rate, bytesBF16 // the router's gate
	if s.routerFP32 > 0 {
		rate, wBytes = s.routerFP32, 4
	}
	return roofline(flops, s.expertRate, bytes, s.bw) +
		roofline(2*T*hidden*experts, rate, hidden*experts*wBytes, s.bw)
}

// StepTimes are representative step times of a config, for `sim estimate`.
type StepTimes struct {
	// Prefill maps a prefill chunk size in tokens (one sequence, empty
	// cache) to its step time in milliseconds.
	Prefill map[int]float64 `json:"prefill_ms"`
	// Decode maps a decode batch size to its step time in milliseconds, at
	// DecodeContext tokens of context per sequence.
	Decode        map[int]float64 `json:"decode_ms"`
	DecodeContext int             `json:"decode_context"`
}

// EstimateStepTimes returns prefill step times at a few chunk sizes and
// decode step times at a few batch sizes (context ctx tokens each).
func EstimateStepTimes(cfg Config, ctx int) (StepTimes, error) {
	if err := cfg.Normalize(); err != nil {
		return StepTimes{}, err
	}
	s := newStepModel(cfg)
	out := StepTimes{Prefill: map[int]float64{}, Decode: map[int]float64{}, DecodeContext: ctx}
	for _, n := range []int{128, 512, 2048, 8192} {
		out.Prefill[n] = 1e3 * s.stepSeconds(prefillShape(0, n, true))
	}
	for _, bs := range []int{1, 8, 32, 128, 256} {
		b := batchShape{tokens: bs, seqs: bs, sampled: bs, decodeCtx: float64(bs * ctx), filtered: cfg.DefaultSampling().Filters()}
		out.Decode[bs] = 1e3 * s.stepSeconds(b)
	}
	return out, nil
}

// prefillShape is one prefill chunk of n tokens after c0 cached tokens.
func prefillShape(c0, n int, sampled bool) batchShape {
	b := batchShape{tokens: n, seqs: 1, prefillTokens: n}
	b.prefillPairs = float64(n) * (float64(c0) + float64(n+1)/2)
	b.prefillKV = float64(c0 + n)
	if sampled {
		b.sampled = 1
	}
	return b
}

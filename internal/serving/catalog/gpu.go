package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnknown is wrapped by lookups of an id that is not in the catalog.
var ErrUnknown = errors.New("not in the catalog")

// LinkKind names the GPU-to-GPU interconnect.
type LinkKind string

// Interconnects of the built-in GPUs.
const (
	LinkNVLink         LinkKind = "nvlink"
	LinkPCIe4          LinkKind = "pcie4"
	LinkPCIe5          LinkKind = "pcie5"
	LinkInfinityFabric LinkKind = "infinity-fabric"
)

// Price is an on-demand hourly price per GPU with where and when it was seen.
// Prices drift: callers override PerGPUHour from a study or a flag.
type Price struct {
	PerGPUHour float64 `json:"per_gpu_hour"` // USD
	Date       string  `json:"date"`         // when the figure was collected, YYYY-MM
	Source     string  `json:"source"`
}

// GPU is one accelerator model. Rates are dense (non-sparse) peaks.
type GPU struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	MemoryGiB  float64  `json:"memory_gib"`  // total memory as the engine sees it (torch.cuda.mem_get_info)
	NominalGB  float64  `json:"nominal_gb"`  // datasheet figure
	HBMTBps    float64  `json:"hbm_tbps"`    // peak memory bandwidth, TB/s
	BF16TFLOPS float64  `json:"bf16_tflops"` // dense BF16 tensor peak
	FP8TFLOPS  float64  `json:"fp8_tflops"`  // dense FP8 tensor peak; 0 = no FP8 tensor cores
	Link       LinkKind `json:"link"`        // GPU-to-GPU interconnect
	LinkGBps   float64  `json:"link_gbps"`   // per direction, GB/s
	TDPWatts   float64  `json:"tdp_watts"`
	// BoostMHz is the datasheet's maximum SM clock, 0 where the catalog
	// has none: the simulator's per-kernel cost scales with its inverse
	// (internal/model/sim/constants.go, kernelOverhead).
	BoostMHz float64 `json:"boost_mhz,omitempty"`
	// FP4TFLOPS is the dense FP4 (NVFP4, MXFP4) tensor peak; 0 = no FP4
	// tensor cores (before Blackwell).
	FP4TFLOPS float64 `json:"fp4_tflops,omitempty"`
	Price     Price   `json:"price"`
}

// HasFP8 reports whether the GPU has FP8 tensor cores. Without them FP8 is
// weight-only: bytes halve, arithmetic stays at the BF16 rate.
func (g GPU) HasFP8() bool { return g.FP8TFLOPS > 0 }

// HasFP4 reports whether the GPU has FP4 tensor cores (Blackwell): NVFP4
// runs natively there and as weight-only FP4 (or not at all) elsewhere.
func (g GPU) HasFP4() bool { return g.FP4TFLOPS > 0 }

// NVLink reports whether the GPUs talk over a high-bandwidth fabric rather
// than PCIe.
func (g GPU) NVLink() bool { return g.Link == LinkNVLink || g.Link == LinkInfinityFabric }

// priceSource is the note attached to every built-in price.
const priceSource = "cloud on-demand listings 2025-2026, median or midpoint of the range seen (docs/reference.md, GPUs)"

// Memory sizes: H100's 79.18 GiB is the measured figure of docs/reference.md (Engines)
// (llm-d-benchmark); L40S's 44.53 GiB is the total PyTorch reports, which is
// what vLLM's gpu_memory_utilization takes a fraction of (vllm-project/vllm
// issue #15598, eight L40S per node: "GPU 6 has a total capacity of 44.53 GiB";
// nvidia-smi's 46068 MiB, 44.99 GiB, counts memory the CUDA context cannot
// allocate, as H100's 81559 MiB does); the others are the nvidia-smi /
// rocm-smi totals in MiB converted to GiB (approximate, overridable).
var gpus = []GPU{
	{ID: "A10G", Name: "NVIDIA A10G", MemoryGiB: 22.49, NominalGB: 24, HBMTBps: 0.60, BF16TFLOPS: 125, FP8TFLOPS: 0,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 150, BoostMHz: 1710, Price: Price{1.01, "2026-01", priceSource}},
	{ID: "L4", Name: "NVIDIA L4", MemoryGiB: 22.49, NominalGB: 24, HBMTBps: 0.30, BF16TFLOPS: 121, FP8TFLOPS: 242,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 72, BoostMHz: 2040, Price: Price{0.80, "2026-01", priceSource}},
	{ID: "L40S", Name: "NVIDIA L40S", MemoryGiB: 44.53, NominalGB: 48, HBMTBps: 0.864, BF16TFLOPS: 362, FP8TFLOPS: 733,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 350, BoostMHz: 2520, Price: Price{1.55, "2026-01", priceSource}},
	{ID: "A100-40G", Name: "NVIDIA A100-SXM4-40GB", MemoryGiB: 39.39, NominalGB: 40, HBMTBps: 1.555, BF16TFLOPS: 312, FP8TFLOPS: 0,
		Link: LinkNVLink, LinkGBps: 300, TDPWatts: 400, BoostMHz: 1410, Price: Price{1.48, "2026-01", priceSource}},
	{ID: "A100-80G", Name: "NVIDIA A100-SXM4-80GB", MemoryGiB: 79.15, NominalGB: 80, HBMTBps: 2.039, BF16TFLOPS: 312, FP8TFLOPS: 0,
		Link: LinkNVLink, LinkGBps: 300, TDPWatts: 400, BoostMHz: 1410, Price: Price{2.05, "2026-01", priceSource}},
	{ID: "H100-SXM", Name: "NVIDIA H100 80GB HBM3", MemoryGiB: 79.18, NominalGB: 80, HBMTBps: 3.35, BF16TFLOPS: 989, FP8TFLOPS: 1979,
		Link: LinkNVLink, LinkGBps: 450, TDPWatts: 700, BoostMHz: 1980, Price: Price{2.95, "2026-01", priceSource}},
	{ID: "H100-PCIe", Name: "NVIDIA H100 PCIe", MemoryGiB: 79.18, NominalGB: 80, HBMTBps: 2.0, BF16TFLOPS: 756, FP8TFLOPS: 1513,
		Link: LinkPCIe5, LinkGBps: 64, TDPWatts: 350, BoostMHz: 1755, Price: Price{2.86, "2026-01", priceSource}},
	{ID: "H200", Name: "NVIDIA H200", MemoryGiB: 139.8, NominalGB: 141, HBMTBps: 4.8, BF16TFLOPS: 989, FP8TFLOPS: 1979,
		Link: LinkNVLink, LinkGBps: 450, TDPWatts: 700, BoostMHz: 1980, Price: Price{4.75, "2026-01", priceSource}},
	// B200: dense FP4 9 PFLOPS, twice its FP8 (NVIDIA's B200 figures: 18
	// PFLOPS FP4 with sparsity).
	{ID: "B200", Name: "NVIDIA B200", MemoryGiB: 179.06, NominalGB: 192, HBMTBps: 7.7, BF16TFLOPS: 2250, FP8TFLOPS: 4500, FP4TFLOPS: 9000,
		Link: LinkNVLink, LinkGBps: 900, TDPWatts: 1000, Price: Price{5.25, "2026-01", priceSource}},
	{ID: "MI300X", Name: "AMD Instinct MI300X", MemoryGiB: 191.98, NominalGB: 192, HBMTBps: 5.3, BF16TFLOPS: 1307, FP8TFLOPS: 2615,
		Link: LinkInfinityFabric, LinkGBps: 400, TDPWatts: 750, BoostMHz: 2100, Price: Price{2.00, "2026-01", priceSource}},
}

// gpuAliases maps other common spellings to catalog ids (lower case).
var gpuAliases = map[string]string{
	"h100": "H100-SXM", "h100-80g": "H100-SXM", "h100-sxm5": "H100-SXM", "h100sxm": "H100-SXM",
	"h100pcie": "H100-PCIe", "h200-sxm": "H200", "a100": "A100-80G", "a100-80gb": "A100-80G",
	"a100-40gb": "A100-40G", "l40s-48g": "L40S", "mi300": "MI300X",
}

// GPUs returns the built-in GPU table in a stable order.
func GPUs() []GPU {
	out := make([]GPU, len(gpus))
	copy(out, gpus)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LookupGPU returns the GPU with the given id or alias (case-insensitive).
func LookupGPU(id string) (GPU, error) {
	key := strings.ToLower(strings.TrimSpace(id))
	if a, ok := gpuAliases[key]; ok {
		key = strings.ToLower(a)
	}
	for _, g := range gpus {
		if strings.ToLower(g.ID) == key {
			return g, nil
		}
	}
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.ID
	}
	return GPU{}, fmt.Errorf("GPU %q: %w (known: %s)", id, ErrUnknown, strings.Join(ids, ", "))
}

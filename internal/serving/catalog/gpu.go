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
	// FP4TFLOPS is the dense FP4 tensor peak (NVFP4 on Blackwell, MXFP4
	// on CDNA4); 0 = no FP4 tensor cores.
	FP4TFLOPS float64 `json:"fp4_tflops,omitempty"`
	// FP32TFLOPS is the FP32 peak of the CUDA cores, where a float32
	// matmul runs at PyTorch's default precision (TF32 off); 0 where the
	// catalog has no datasheet figure.
	FP32TFLOPS float64 `json:"fp32_tflops,omitempty"`
	// Domain is the number of GPUs Link joins without a NIC: 8 in an
	// HGX/DGX or UBB node or a server of 8 PCIe GPUs, 72 in an NVL72 rack.
	// Tensor parallelism stays inside it; DomainOf gives the default for
	// rows that leave it 0.
	Domain int `json:"domain,omitempty"`
	// ScaleOutGbps is the scale-out NIC line rate per GPU (InfiniBand or
	// RoCE), Gb/s: the link that joins domains (ScaleOut).
	ScaleOutGbps float64 `json:"scale_out_gbps,omitempty"`
	// HostGPUs is the GPUs one host (one operating system, one engine
	// process group) holds: 8 in an HGX or UBB server, 4 in an NVL72
	// compute tray; HostSize gives the default for rows that leave it 0.
	HostGPUs int   `json:"host_gpus,omitempty"`
	Price    Price `json:"price"`
}

// HostSize is the GPUs a host of g holds: the row's HostGPUs, else 8.
func (g GPU) HostSize() int {
	if g.HostGPUs > 0 {
		return g.HostGPUs
	}
	return 8
}

// DomainOf is g's scale-up domain size: the row's Domain, else 8 (an HGX
// board, an AMD UBB, or a server of 8 PCIe GPUs, whose GPUs meet over Link).
func (g GPU) DomainOf() int {
	if g.Domain > 0 {
		return g.Domain
	}
	return 8
}

// ScaleOut is g's scale-out link per GPU in GB/s per direction: the NIC's
// line rate / 8, 400 Gb/s (InfiniBand NDR, ConnectX-7, one per GPU as in
// HGX H100/H200/B200 nodes) where the row gives none.
func (g GPU) ScaleOut() float64 {
	if g.ScaleOutGbps > 0 {
		return g.ScaleOutGbps / 8
	}
	return 400.0 / 8
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
// FP32 peaks are NVIDIA's datasheets' (A100 19.5, H100 SXM 67 and PCIe 51,
// H200 67, L40S 91.6, L4 30.3 TFLOPS).
var gpus = []GPU{
	{ID: "A10G", Name: "NVIDIA A10G", MemoryGiB: 22.49, NominalGB: 24, HBMTBps: 0.60, BF16TFLOPS: 125, FP8TFLOPS: 0,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 150, BoostMHz: 1710, Price: Price{1.01, "2026-01", priceSource}},
	{ID: "L4", Name: "NVIDIA L4", MemoryGiB: 22.49, NominalGB: 24, HBMTBps: 0.30, BF16TFLOPS: 121, FP8TFLOPS: 242,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 72, BoostMHz: 2040, FP32TFLOPS: 30.3, Price: Price{0.80, "2026-01", priceSource}},
	{ID: "L40S", Name: "NVIDIA L40S", MemoryGiB: 44.53, NominalGB: 48, HBMTBps: 0.864, BF16TFLOPS: 362, FP8TFLOPS: 733,
		Link: LinkPCIe4, LinkGBps: 32, TDPWatts: 350, BoostMHz: 2520, FP32TFLOPS: 91.6, Price: Price{1.55, "2026-01", priceSource}},
	{ID: "A100-40G", Name: "NVIDIA A100-SXM4-40GB", MemoryGiB: 39.39, NominalGB: 40, HBMTBps: 1.555, BF16TFLOPS: 312, FP8TFLOPS: 0,
		Link: LinkNVLink, LinkGBps: 300, TDPWatts: 400, BoostMHz: 1410, FP32TFLOPS: 19.5, Price: Price{1.48, "2026-01", priceSource}},
	{ID: "A100-80G", Name: "NVIDIA A100-SXM4-80GB", MemoryGiB: 79.15, NominalGB: 80, HBMTBps: 2.039, BF16TFLOPS: 312, FP8TFLOPS: 0,
		Link: LinkNVLink, LinkGBps: 300, TDPWatts: 400, BoostMHz: 1410, FP32TFLOPS: 19.5, Price: Price{2.05, "2026-01", priceSource}},
	{ID: "H100-SXM", Name: "NVIDIA H100 80GB HBM3", MemoryGiB: 79.18, NominalGB: 80, HBMTBps: 3.35, BF16TFLOPS: 989, FP8TFLOPS: 1979,
		Link: LinkNVLink, LinkGBps: 450, TDPWatts: 700, BoostMHz: 1980, FP32TFLOPS: 67, Price: Price{2.95, "2026-01", priceSource}},
	{ID: "H100-PCIe", Name: "NVIDIA H100 PCIe", MemoryGiB: 79.18, NominalGB: 80, HBMTBps: 2.0, BF16TFLOPS: 756, FP8TFLOPS: 1513,
		Link: LinkPCIe5, LinkGBps: 64, TDPWatts: 350, BoostMHz: 1755, FP32TFLOPS: 51, Price: Price{2.86, "2026-01", priceSource}},
	{ID: "H200", Name: "NVIDIA H200", MemoryGiB: 139.8, NominalGB: 141, HBMTBps: 4.8, BF16TFLOPS: 989, FP8TFLOPS: 1979,
		Link: LinkNVLink, LinkGBps: 450, TDPWatts: 700, BoostMHz: 1980, FP32TFLOPS: 67, Price: Price{4.75, "2026-01", priceSource}},
	// B200: dense FP4 9 PFLOPS, twice its FP8 (NVIDIA's B200 figures: 18
	// PFLOPS FP4 with sparsity).
	{ID: "B200", Name: "NVIDIA B200", MemoryGiB: 179.06, NominalGB: 192, HBMTBps: 7.7, BF16TFLOPS: 2250, FP8TFLOPS: 4500, FP4TFLOPS: 9000,
		Link: LinkNVLink, LinkGBps: 900, TDPWatts: 1000, Price: Price{5.25, "2026-01", priceSource}},
	{ID: "MI300X", Name: "AMD Instinct MI300X", MemoryGiB: 191.98, NominalGB: 192, HBMTBps: 5.3, BF16TFLOPS: 1307, FP8TFLOPS: 2615,
		Link: LinkInfinityFabric, LinkGBps: 400, TDPWatts: 750, BoostMHz: 2100, Price: Price{2.00, "2026-01", priceSource}},

	// The systems of 2026 quotes. Rates are dense: NVIDIA's HGX and NVL72
	// tables print BF16/FP8 sparse (halved here) and FP4 as sparse | dense
	// (dense taken; 1.33:1 on Blackwell Ultra). Memory is the smi total in
	// MiB / 1024 where public nvidia-smi logs give it, else the nominal GiB
	// (marked estimate). Prices: docs/reference.md (2026 systems: past one node).
	//
	// B300 HGX: NVIDIA HGX page (FP4 144|108 PF, FP8 72 PF sparse, BF16 36
	// PF sparse per 8 GPUs; NVLink 5 1.8 TB/s bidir per GPU); nvidia-smi
	// "NVIDIA B300 SXM6 AC, 275040 MiB", 1,100 W enforced limit; DGX B300:
	// 8 x ConnectX-8 800 Gb/s. HBM 7.7 TB/s as the B200 row (same HBM3E
	// stacks; NVIDIA's Hot Chips figure is 8.0). No boost clock published.
	{ID: "B300", Name: "NVIDIA B300 SXM6 AC", MemoryGiB: 268.59, NominalGB: 288, HBMTBps: 7.7, BF16TFLOPS: 2250, FP8TFLOPS: 4500, FP4TFLOPS: 13500,
		Link: LinkNVLink, LinkGBps: 900, Domain: 8, ScaleOutGbps: 800, TDPWatts: 1100, Price: Price{7.89, "2026-09", priceSource2026}},
	// GB200 NVL72: NVIDIA rack page / 72 (FP4 1,440 PF sparse = 10 PF
	// dense per GPU, FP8 720 PF sparse = 5,000 dense, BF16 2,500; 13.4 TB
	// HBM3e, 576 TB/s = 8.0 per GPU; NVLink Switch joins all 72);
	// nvidia-smi "NVIDIA GB200, 189471 MiB"; ConnectX-7 400 Gb/s per GPU.
	// TDP 1,200 W is an estimate (the superchip's 2,700 W covers 2 GPUs
	// and a Grace CPU; secondary source). A compute tray (one host) holds
	// 4 GPUs and 2 Grace CPUs (Azure ND GB200 v6: 4 GPUs per VM, 18 per
	// rack).
	{ID: "GB200", Name: "NVIDIA GB200 (NVL72)", MemoryGiB: 185.03, NominalGB: 192, HBMTBps: 8.0, BF16TFLOPS: 2500, FP8TFLOPS: 5000, FP4TFLOPS: 10000,
		Link: LinkNVLink, LinkGBps: 900, Domain: 72, ScaleOutGbps: 400, HostGPUs: 4, TDPWatts: 1200, Price: Price{13.29, "2026-09", priceSource2026}},
	// GB300 NVL72: NVIDIA rack page / 72 (FP4 1,440 | 1,080 PF = 15 PF
	// dense per GPU; FP8 and BF16 as GB200; 20 TB, 576 TB/s); nvidia-smi
	// "NVIDIA GB300, 284208 MiB"; 72 ConnectX-8 800 Gb/s. TDP 1,400 W is
	// the Hot Chips figure (Lenovo's rack guide says 1,100 W per GPU).
	// Price: one published on-demand list (OCI), so an estimate.
	{ID: "GB300", Name: "NVIDIA GB300 (NVL72)", MemoryGiB: 277.55, NominalGB: 288, HBMTBps: 8.0, BF16TFLOPS: 2500, FP8TFLOPS: 5000, FP4TFLOPS: 15000,
		Link: LinkNVLink, LinkGBps: 900, Domain: 72, ScaleOutGbps: 800, HostGPUs: 4, TDPWatts: 1400, Price: Price{18.00, "2026-09", priceSource2026}},
	// MI325X: AMD product page (256 GB HBM3E, 6 TB/s, BF16 1.3 PF and FP8
	// 2.61 PF dense = 304 CU x 2,100 MHz x 2,048 and x 4,096; no FP4;
	// 1,000 W); 7 Infinity Fabric links x 128 GB/s bidir = 448 per
	// direction in a UBB of 8; 8 x 400G NICs per node. Memory 255.98 GiB
	// is an estimate (the ROCm spec table's 256 GiB, as MI300X's 191.98).
	{ID: "MI325X", Name: "AMD Instinct MI325X", MemoryGiB: 255.98, NominalGB: 256, HBMTBps: 6.0, BF16TFLOPS: 1307.4, FP8TFLOPS: 2614.9,
		Link: LinkInfinityFabric, LinkGBps: 448, Domain: 8, ScaleOutGbps: 400, TDPWatts: 1000, BoostMHz: 2100, Price: Price{3.80, "2026-09", priceSource2026}},
	// MI355X: AMD product page (288 GB HBM3E, 8 TB/s, BF16 2.5 PF = 256 CU
	// x 2,400 MHz x 4,096, OCP-FP8 5 PF, MXFP4 10.1 PF dense, no NVFP4;
	// 1,400 W liquid); 7 IF links x 153.6 GB/s bidir = 537.6 per
	// direction, UBB 2.0 of 8; 8 x 400G NICs (AMD acceptance guide).
	// Memory 287.98 GiB is an estimate. Price: one published list (OCI).
	{ID: "MI355X", Name: "AMD Instinct MI355X", MemoryGiB: 287.98, NominalGB: 288, HBMTBps: 8.0, BF16TFLOPS: 2516.6, FP8TFLOPS: 5033, FP4TFLOPS: 10066,
		Link: LinkInfinityFabric, LinkGBps: 537.6, Domain: 8, ScaleOutGbps: 400, TDPWatts: 1400, BoostMHz: 2400, Price: Price{8.60, "2026-09", priceSource2026}},
	// RTX PRO 6000 Blackwell Server Edition: NVIDIA product page (96 GB
	// GDDR7, 1,597 GB/s, up to 600 W, PCIe Gen5 x16, no NVLink); the
	// page's 1/2/4 PFLOPS BF16/FP8/FP4 are sparse, so the dense rates are
	// estimates at half (the whitepaper's Workstation Edition dense rates,
	// 503.8/1,007.6/2,015.2 TF at 2,617 MHz, agree within 5%).
	// nvidia-smi 97,887 MiB. A server holds 8 over PCIe (Domain 8, priced
	// at the PCIe link as L40S's are). Servers share a NIC between GPUs:
	// 200 Gb/s per GPU is an estimate.
	{ID: "RTXPRO6000", Name: "NVIDIA RTX PRO 6000 Blackwell Server Edition", MemoryGiB: 95.59, NominalGB: 96, HBMTBps: 1.597, BF16TFLOPS: 480, FP8TFLOPS: 960, FP4TFLOPS: 1920,
		Link: LinkPCIe5, LinkGBps: 64, Domain: 8, ScaleOutGbps: 200, TDPWatts: 600, Price: Price{2.50, "2026-09", priceSource2026}},
}

// priceSource2026 is the note of the 2026 systems' prices.
const priceSource2026 = "cloud on-demand listings 2026-09 (CoreWeave, Nebius, RunPod, Hyperstack, DigitalOcean, OCI, AWS, Azure), median; GB300 and MI355X one list each (docs/reference.md, GPUs)"

// gpuAliases maps other common spellings to catalog ids (lower case).
var gpuAliases = map[string]string{
	"h100": "H100-SXM", "h100-80g": "H100-SXM", "h100-sxm5": "H100-SXM", "h100sxm": "H100-SXM",
	"h100pcie": "H100-PCIe", "h200-sxm": "H200", "a100": "A100-80G", "a100-80gb": "A100-80G",
	"a100-40gb": "A100-40G", "l40s-48g": "L40S", "mi300": "MI300X",
	"b300-sxm": "B300", "gb200-nvl72": "GB200", "gb300-nvl72": "GB300", "mi325": "MI325X", "mi355": "MI355X",
	"rtx-pro-6000": "RTXPRO6000", "rtx6000-pro": "RTXPRO6000", "rtx-pro-6000-server": "RTXPRO6000",
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

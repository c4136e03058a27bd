package sim

import (
	"math"
	"time"
)

// The scale-out network: the link between scale-up domains (an HGX node
// of 8 GPUs, an NVL72 rack of 72), one NIC per GPU (docs/reference.md,
// GPUs: "2026 systems" and "Scale-out").
const (
	// scaleOutLatency is one exchange's fixed cost across the network:
	// NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc) charges a
	// ring step baseLat 10.0 us (LL128) plus hwLat[NET] 4.0 us per
	// inter-node step.
	scaleOutLatency = 14 * time.Microsecond
	// scaleOutEfficiency is the share of a NIC's line rate an exchange
	// reaches: DeepEP's normal internode kernels measure 43 GB/s at EP16
	// on a 400 Gb/s (50 GB/s) ConnectX-7 (43-58 GB/s from EP16 to EP64;
	// the lowest is taken).
	scaleOutEfficiency = 0.86
)

// Topology is where a configuration's GPUs sit: ranks are laid out as
// vLLM and SGLang number them (tensor parallel innermost, then pipeline
// stages, then data-parallel ranks) and packed into scale-up domains of
// the GPU's size; what crosses a domain boundary goes over the scale-out
// network.
type Topology struct {
	Domain       int     `json:"domain"`         // GPUs per scale-up domain (catalog.GPU.DomainOf)
	Nodes        int     `json:"nodes"`          // domains the configuration spans
	ScaleOutGBps float64 `json:"scale_out_gbps"` // NIC per GPU, GB/s per direction
	// TPCrosses: a tensor-parallel group spans domains, so every
	// all-reduce runs at the NIC's rate.
	TPCrosses bool `json:"tp_crosses"`
	// PPCrossHops of the PP-1 stage boundaries cross a domain.
	PPCrossHops int `json:"pp_cross_hops"`
	// EPCrossShare is the share of each GPU's expert exchange (dispatch
	// and combine, or gather and reduce-scatter) bound for other domains.
	EPCrossShare float64 `json:"ep_cross_share"`
}

// Topology places c's GPUs in domains (Topology).
func (c *Config) Topology() Topology {
	d := c.GPU.DomainOf()
	world := max(c.TP, 1) * max(c.PP, 1) * max(c.DP, 1)
	t := Topology{Domain: d, Nodes: (world + d - 1) / d, ScaleOutGBps: c.GPU.ScaleOut()}
	t.TPCrosses = c.TP > d
	for i := 1; i < c.PP; i++ {
		if b := i * c.TP; (b-1)/d != b/d {
			t.PPCrossHops++
		}
	}
	if g := c.MoEGroup(); g > d {
		t.EPCrossShare = float64(g-d) / float64(g)
	}
	return t
}

// crossNode reports whether any traffic leaves a domain.
func (t Topology) crossNode() bool { return t.TPCrosses || t.PPCrossHops > 0 || t.EPCrossShare > 0 }

// bandwidth is the network's achievable rate per GPU, bytes/s.
func (t Topology) bandwidth() float64 { return t.ScaleOutGBps * 1e9 * scaleOutEfficiency }

// NetworkStep is one engine step's traffic that leaves a domain, per GPU,
// and the time the step spends on it.
type NetworkStep struct {
	Tokens  int     `json:"tokens"`
	Bytes   float64 `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// NetworkStep prices the cross-domain traffic of one step of tokens
// tokens on a data-parallel rank, as the step-time model does
// (stepModel.gpuSeconds, moeStep.tokenwise): activations at each crossing
// pipeline boundary, the expert exchange's share bound for other domains
// in each MoE layer, and the whole of the all-reduces when tensor
// parallelism spans domains.
func (c *Config) NetworkStep(tokens int) NetworkStep {
	t := c.Topology()
	out := NetworkStep{Tokens: tokens}
	if !t.crossNode() || tokens <= 0 {
		return out
	}
	s := newStepModel(*c)
	T, h, bw, lat := float64(tokens), s.hidden, t.bandwidth(), scaleOutLatency.Seconds()
	if t.TPCrosses {
		tp := float64(c.TP)
		n := 2 * s.layers * 2 * (tp - 1) / tp * T * h * bytesBF16
		out.Bytes += n
		out.Seconds += 2*s.layers*lat + n/bw
	}
	if t.PPCrossHops > 0 {
		n := float64(t.PPCrossHops) * T * h * bytesBF16
		out.Bytes += n
		out.Seconds += float64(t.PPCrossHops)*lat + n/bw
	}
	if x := s.mx; x != nil && t.EPCrossShare > 0 {
		moved := T * x.ranks
		if x.ep {
			moved = T * math.Min(x.topK, x.group)
		}
		n := 2 * x.frac * s.layers * moved * h * bytesBF16 * t.EPCrossShare
		out.Bytes += n
		out.Seconds += 2*x.frac*s.layers*lat + n/bw
	}
	return out
}

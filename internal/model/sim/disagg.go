package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Disaggregated prefill and decode (docs/reference.md (Disaggregated
// prefill and decode)): a prefill engine computes a prompt's KV cache and
// a decode engine pulls it over a link, then decodes. This file holds the
// links, the KV bytes of a prompt and the time they take to cross.

// KV roles of a simulated engine (Config.KVRole).
const (
	RolePrefill = "prefill" // vLLM kv_producer, SGLang --disaggregation-mode prefill
	RoleDecode  = "decode"  // vLLM kv_consumer, SGLang --disaggregation-mode decode
	RoleBoth    = "both"    // vLLM kv_both: each request's kv_transfer_params says which
)

// Link is an interconnect the KV cache crosses from a prefill GPU to a
// decode GPU. Bandwidth is one direction, per GPU: each tensor-parallel
// rank moves its own share over its own lane (a GPU's NVLink ports, its
// PCIe slot, its NIC: DGX H100 and HGX H100/H200 nodes pair each GPU with
// one 400 Gb/s ConnectX-7 NIC, NVIDIA DGX H100 User Guide, "Hardware
// Overview"). Latency is the link's one-way message latency; the
// connector's own control messages (NIXL's notifications, SGLang's
// bootstrap) are not modelled.
type Link struct {
	Name      string
	Title     string
	Bandwidth float64 // bytes/s, one direction, per GPU
	Latency   float64 // seconds
	Source    string
}

// Links is the one table of KV links, by Name.
var Links = []Link{
	// NVLink 4 (H100/H200 SXM): 900 GB/s per GPU, both directions together
	// (NVIDIA H100 Tensor Core GPU datasheet; H200 datasheet): 450 GB/s
	// each way. Within one NVLink domain (one node).
	{Name: "nvlink", Title: "NVLink 4", Bandwidth: 450e9, Latency: 1e-6,
		Source: "NVIDIA H100/H200 datasheets: NVLink 900 GB/s bidirectional per GPU"},
	// PCIe Gen5 x16: 32 GT/s per lane, 16 lanes, 128b/130b encoding:
	// 63 GB/s each way (PCI-SIG, PCI Express Base Specification 5.0).
	{Name: "pcie", Title: "PCIe Gen5 x16", Bandwidth: 63e9, Latency: 2e-6,
		Source: "PCI-SIG PCIe 5.0: 32 GT/s x16, 128b/130b"},
	// InfiniBand NDR: 400 Gb/s per port = 50 GB/s (NVIDIA ConnectX-7 and
	// Quantum-2 datasheets); RDMA write latency of a few microseconds
	// (ConnectX-7 product brief: sub-microsecond adapter latency, plus the
	// switch hop).
	{Name: "infiniband", Title: "InfiniBand NDR 400G", Bandwidth: 50e9, Latency: 2e-6,
		Source: "NVIDIA ConnectX-7 / Quantum-2 datasheets: NDR 400 Gb/s per port"},
	// RoCE v2 on 400 GbE: the same 50 GB/s line rate (ConnectX-7 400GbE,
	// Spectrum-X), a little more latency than InfiniBand's lossless fabric.
	{Name: "roce", Title: "RoCE v2 400 GbE", Bandwidth: 50e9, Latency: 5e-6,
		Source: "NVIDIA ConnectX-7 datasheet: 400 GbE with RoCE"},
	// Ethernet 100 Gb/s without RDMA (TCP through host memory): 12.5 GB/s
	// line rate, tens of microseconds through the kernel's stack (NIXL's
	// and Mooncake's TCP fallback).
	{Name: "ethernet", Title: "Ethernet 100 GbE (TCP)", Bandwidth: 12.5e9, Latency: 30e-6,
		Source: "IEEE 802.3 100GBASE: 100 Gb/s line rate"},
}

// DefaultLink is the link when none is named: prefill and decode in one
// NVLink domain.
const DefaultLink = "nvlink"

// LinkNames are the links' names, in the table's order.
func LinkNames() []string {
	out := make([]string, len(Links))
	for i, l := range Links {
		out[i] = l.Name
	}
	return out
}

// LookupLink returns the link named name ("" is DefaultLink).
func LookupLink(name string) (Link, error) {
	if name == "" {
		name = DefaultLink
	}
	i := slices.IndexFunc(Links, func(l Link) bool { return l.Name == strings.ToLower(name) })
	if i < 0 {
		return Link{}, fmt.Errorf("kv link %q: want one of %s", name, strings.Join(LinkNames(), ", "))
	}
	return Links[i], nil
}

// KVBytesPerToken is one token's KV cache in the whole model, one copy:
// every layer's keys and values (MLA: its latent), at the KV cache's
// element size. The memory model's per-GPU figure (kvBytesPerTokenPerGPU)
// is this shared over the tensor-parallel ranks and pipeline stages.
func (c *Config) KVBytesPerToken() float64 {
	one := *c
	one.TP, one.PP = 1, 1
	return one.kvBytesPerTokenPerGPU()
}

// PromptKVBytes is the KV cache of a prompt of n tokens (KVBytesPerToken).
func (c *Config) PromptKVBytes(n int) float64 { return float64(n) * c.KVBytesPerToken() }

// KVTransferSeconds is the time the KV cache of n tokens takes from a
// prefill engine of prefillTP tensor-parallel ranks to this (decode)
// engine over link: the ranks move their shares in parallel, so the
// slowest lane carries the share of the side with fewer ranks (its
// per-GPU KV, MLA's latent whole on every rank), plus the link's latency.
// Pipeline stages move their own layers in parallel too.
func (c *Config) KVTransferSeconds(link Link, n, prefillTP int) float64 {
	if n <= 0 {
		return 0
	}
	lane := *c
	if prefillTP > 0 && prefillTP < lane.TP {
		lane.TP = prefillTP
	}
	return link.Latency + float64(n)*lane.kvBytesPerTokenPerGPU()/link.Bandwidth
}

// Disaggregated reports whether the engine was started as a part of a
// disaggregated deployment (a KV connector or a disaggregation mode).
func (c *Config) Disaggregated() bool { return c.KVRole != "" }

// prefills and decodes report whether the engine may act as a prefill
// engine (a request with do_remote_decode) or a decode engine (one with
// do_remote_prefill).
func (c *Config) prefills() bool { return c.KVRole == RolePrefill || c.KVRole == RoleBoth }
func (c *Config) decodes() bool  { return c.KVRole == RoleDecode || c.KVRole == RoleBoth }

// kvRoleOf maps vLLM's kv_role to the engine's role.
func kvRoleOf(kvRole string) string {
	switch kvRole {
	case engine.KVProducer:
		return RolePrefill
	case engine.KVConsumer:
		return RoleDecode
	case engine.KVBoth:
		return RoleBoth
	}
	return ""
}

// normalizeDisagg reads the role from the engines' flags and checks the
// link.
func (c *Config) normalizeDisagg() error {
	if c.KVTransferConfig != "" {
		kc, err := engine.ParseKVTransferConfig(c.KVTransferConfig)
		if err != nil {
			return bad("%s: %v", engine.Flag(engine.VLLM, "kv_transfer_config"), err)
		}
		c.KVConnector, c.KVRole = kc.Connector, kvRoleOf(kc.Role)
	}
	switch c.DisaggregationMode {
	case "", "null":
	case RolePrefill, RoleDecode:
		c.KVRole = c.DisaggregationMode
	default:
		return bad("%s %q: want one of %v", engine.Flag(engine.SGLang, "disaggregation_mode"), c.DisaggregationMode, engine.DisaggregationModes)
	}
	l, err := LookupLink(c.KVLink)
	if err != nil {
		return bad("%s: %v", engine.Flag(c.Engine, "sim_kv_link"), err)
	}
	c.KVLink = l.Name
	return nil
}

// kvTransferParams is a request's or a prefill engine's answer's
// kv_transfer_params, vLLM's NixlConnector handshake (its toy proxy,
// tests/v1/kv_connector/nixl_integration/toy_proxy_server.py in vLLM): the
// router asks a prefill engine with do_remote_decode, which answers
// do_remote_prefill and where the blocks are; the decode engine gets the
// answer's parameters with the client's request. EngineUS is the
// simulator's own: the engine time the request spent on the prefill side,
// so a time-scaled decode engine's clock starts at the client's request.
type kvTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteBlockIDs  []int   `json:"remote_block_ids"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
	TPSize          int     `json:"tp_size,omitempty"`
	EngineUS        int64   `json:"servetune_engine_us,omitempty"`
}

// checkKVParams says what is wrong with a request's kv_transfer_params
// for this engine, or "".
func (s *Server) checkKVParams(p *kvTransferParams, stream bool) string {
	switch {
	case p == nil:
		return ""
	case p.DoRemoteDecode && p.DoRemotePrefill:
		return "kv_transfer_params: do_remote_decode and do_remote_prefill are both set; a request is prefilled or decoded here, not both"
	case p.DoRemotePrefill && !s.cfg.decodes():
		return fmt.Sprintf("kv_transfer_params.do_remote_prefill: this engine takes no remote KV: start it with %s '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' (vLLM) or %s decode (SGLang)",
			engine.Flag(engine.VLLM, "kv_transfer_config"), engine.Flag(engine.SGLang, "disaggregation_mode"))
	case p.DoRemoteDecode && !s.cfg.prefills():
		return fmt.Sprintf("kv_transfer_params.do_remote_decode: this engine sends no KV: start it with %s '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' (vLLM) or %s prefill (SGLang)",
			engine.Flag(engine.VLLM, "kv_transfer_config"), engine.Flag(engine.SGLang, "disaggregation_mode"))
	}
	return ""
}

// applyKVParams sets up a checked request's part: a decode engine's waits
// for its prompt's KV to cross the link (all but the last token, which it
// computes) and then holds it as computed; a prefill engine's answer
// carries the parameters the decode engine pulls the KV with.
func (s *Server) applyKVParams(p *kvTransferParams, st *stream, o *output) {
	switch {
	case p == nil:
	case p.DoRemotePrefill:
		link, _ := LookupLink(s.cfg.KVLink) // checked by Normalize
		st.s.remote = st.s.prompt - 1
		secs := s.cfg.KVTransferSeconds(link, st.s.remote, p.TPSize)
		st.delay = s.scale(time.Duration(secs * float64(time.Second)))
		if p.EngineUS > 0 {
			o.before = s.scale(time.Duration(p.EngineUS) * time.Microsecond)
		}
	case p.DoRemoteDecode:
		o.kvOut = true
	}
}

// stamp marks a request's arrival as it goes to the engine loop.
func (s *Server) stamp(st *stream, o *output) {
	now := time.Now()
	o.arrived = now.Add(-o.before)
	st.arrived = now.Add(s.frontend)
	st.ready = st.arrived.Add(st.delay)
}

// producedKV is a prefill engine's kv_transfer_params for the request
// whose last event is ev: where its blocks are (the simulator's block ids
// are only counted) and this engine's tensor-parallel size.
func (s *Server) producedKV(o *output, ev event) kvTransferParams {
	id := fmt.Sprintf("servetune-sim-%d-%d", s.cfg.Port, s.created)
	host, port := s.cfg.Host, s.cfg.Port
	blocks := make([]int, (o.prompt+s.cfg.BlockSize-1)/max(1, s.cfg.BlockSize))
	for i := range blocks {
		blocks[i] = i
	}
	p := kvTransferParams{DoRemotePrefill: true, RemoteEngineID: &id, RemoteBlockIDs: blocks,
		RemoteHost: &host, RemotePort: &port, TPSize: s.cfg.TP}
	if s.cfg.TimeScale != 1 {
		p.EngineUS = int64(ev.at.Sub(o.arrived).Seconds() * s.cfg.TimeScale * 1e6)
	}
	return p
}

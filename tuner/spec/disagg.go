package spec

import (
	"encoding/json"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/space"
)

// Disaggregation is the spec's `disaggregation:` section: how a
// disaggregated configuration of the space (engine.Settings.Parts) runs.
type Disaggregation struct {
	Router Router            // the router's command, with the parts' placeholders
	KV     engine.KVTransfer // vLLM's --kv-transfer-config, SGLang's transfer backend
	// KVLink is the link the simulated engine moves the KV cache over
	// (engine.KVLinks); "" = the simulator's default.
	KVLink string
}

// Router is the router's command (launcher.Router has the placeholders'
// meaning): Command with engine.RouterPlaceholders, EachPrefill and
// EachDecode once per engine of the role, HealthPath its readiness path.
type Router struct {
	Command, EachPrefill, EachDecode []string
	HealthPath                       string
}

// disaggregation reads the section.
func (p *specParser) disaggregation(n *yaml.Node, e engine.Engine) *Disaggregation {
	f := p.Fields(n, "disaggregation", "router", "router_each_prefill", "router_each_decode", "router_health",
		"kv_transfer_config", "prefill_kv_transfer_config", "decode_kv_transfer_config", "transfer_backend", "kv_link")
	d := &Disaggregation{}
	x := p.Require(n, f, "disaggregation", "router", `the router's command, e.g. ["{servetune}", sim, router, --port, "{port}", ...]`)
	if x == nil {
		return d
	}
	d.Router.Command = p.Strings(x, "disaggregation.router")
	if !p.Failed() && len(d.Router.Command) == 0 {
		p.Fail(x, "disaggregation.router", "empty command")
	}
	if x := f["router_each_prefill"]; x != nil {
		d.Router.EachPrefill = p.Strings(x, "disaggregation.router_each_prefill")
	}
	if x := f["router_each_decode"]; x != nil {
		d.Router.EachDecode = p.Strings(x, "disaggregation.router_each_decode")
	}
	if x := f["router_health"]; x != nil {
		d.Router.HealthPath = p.Str(x, "disaggregation.router_health")
		if !p.Failed() && !strings.HasPrefix(d.Router.HealthPath, "/") {
			p.Fail(x, "disaggregation.router_health", "%q: want a path, e.g. /health", d.Router.HealthPath)
		}
	}
	if p.Failed() {
		return d
	}
	argv := slices.Concat(d.Router.Command, d.Router.EachPrefill, d.Router.EachDecode)
	mentions := func(role string) bool {
		if len(d.Router.EachPrefill) > 0 && role == "prefill" || len(d.Router.EachDecode) > 0 && role == "decode" {
			return true
		}
		return slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "{"+role+"_") })
	}
	switch {
	case !slices.ContainsFunc(d.Router.Command, func(a string) bool { return strings.Contains(a, "{port}") }):
		p.Fail(x, "disaggregation.router", "names no {port}: the router must listen where the benchmark sends")
	case !mentions("prefill"):
		p.Fail(x, "disaggregation.router", "names no prefill engine ({prefill_hosts}, {prefill_ports}, {prefill_urls} or router_each_prefill)")
	case !mentions("decode"):
		p.Fail(x, "disaggregation.router", "names no decode engine ({decode_hosts}, {decode_ports}, {decode_urls} or router_each_decode)")
	}
	for _, a := range d.Router.Command {
		if strings.Contains(a, "{prefill_") || strings.Contains(a, "{decode_") {
			if !slices.Contains(engine.RouterPlaceholders, a) && !p.Failed() {
				p.Fail(x, "disaggregation.router", "%q: an element of its own, one of %s", a, strings.Join(engine.RouterPlaceholders, ", "))
			}
		}
	}
	for key, dst := range map[string]*string{"kv_transfer_config": &d.KV.Config,
		"prefill_kv_transfer_config": &d.KV.PrefillConfig, "decode_kv_transfer_config": &d.KV.DecodeConfig} {
		x := f[key]
		if x == nil {
			continue
		}
		field := "disaggregation." + key
		if e != engine.VLLM {
			p.Fail(x, field, "vLLM's --kv-transfer-config: an SGLang study sets transfer_backend")
			continue
		}
		*dst = p.kvConfig(x, field)
	}
	if x := f["transfer_backend"]; x != nil {
		d.KV.Backend = p.Str(x, "disaggregation.transfer_backend")
		if !p.Failed() && e != engine.SGLang {
			p.Fail(x, "disaggregation.transfer_backend", "SGLang's --disaggregation-transfer-backend: a vLLM study sets kv_transfer_config")
		}
	}
	if x := f["kv_link"]; x != nil {
		d.KVLink = p.Str(x, "disaggregation.kv_link")
		if !p.Failed() && !slices.Contains(engine.KVLinks, d.KVLink) {
			p.Fail(x, "disaggregation.kv_link", "%q: want one of %s", d.KVLink, strings.Join(engine.KVLinks, ", "))
		}
	}
	return d
}

// kvConfig reads a --kv-transfer-config: a mapping, or its JSON text.
func (p *specParser) kvConfig(x *yaml.Node, field string) string {
	var text string
	if x.Kind == yaml.MappingNode {
		var m map[string]any
		if err := x.Decode(&m); err != nil {
			p.Fail(x, field, "%v", err)
			return ""
		}
		b, err := json.Marshal(m)
		if err != nil {
			p.Fail(x, field, "%v", err)
			return ""
		}
		text = string(b)
	} else {
		text = p.Str(x, field)
	}
	if _, err := engine.ParseKVTransferConfig(text); err != nil && !p.Failed() {
		p.Fail(x, field, "%v", err)
	}
	return text
}

// checkDisaggregation ties the space's shape to the section: a space that
// may be disaggregated needs the router, and the section is for one.
func (p *specParser) checkDisaggregation(spec *Spec, top map[string]*yaml.Node) {
	q, ok := spec.Space.Param("disaggregated")
	may := ok && (q.Kind == space.KindBool || slices.Contains(q.Choices, any(true)))
	switch {
	case may && spec.Disaggregation == nil:
		p.Fail(yamlpos.KeyNode(top["space"], "disaggregated"), "space.disaggregated",
			"a disaggregated configuration needs a disaggregation section naming the router")
	case !may && spec.Disaggregation != nil:
		p.Fail(top["disaggregation"], "disaggregation", "the space is never disaggregated (add disaggregated: [false, true] or [true] to it)")
	case may && spec.Launcher.fixedSettings():
		// The virtual kind runs a disaggregated configuration itself, on
		// its clock (sim.DisaggVirtual): no engines or router to start.
		p.Fail(top["disaggregation"], "disaggregation", "the %s launcher cannot start separate engines and a router: use sim, process, docker, slurm or virtual", spec.Launcher.Kind)
	}
}

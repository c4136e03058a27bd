package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// KV roles of vLLM's --kv-transfer-config (kv_role).
const (
	KVProducer = "kv_producer" // a prefill engine
	KVConsumer = "kv_consumer" // a decode engine
	KVBoth     = "kv_both"     // either, as each request's kv_transfer_params says
)

// KVTransferConfig is the part of vLLM's --kv-transfer-config servetune
// reads: the connector (NixlConnector, LMCacheConnectorV1, ...) and this
// engine's role.
type KVTransferConfig struct {
	Connector string `json:"kv_connector"`
	Role      string `json:"kv_role"`
}

// ParseKVTransferConfig reads --kv-transfer-config's JSON; the error
// names the problem in one line.
func ParseKVTransferConfig(val string) (KVTransferConfig, error) {
	var c KVTransferConfig
	if err := json.Unmarshal([]byte(val), &c); err != nil {
		return c, fmt.Errorf("invalid JSON object: %v", err)
	}
	if c.Connector == "" {
		return c, errors.New("kv_connector: field required (e.g. NixlConnector)")
	}
	roles := []string{KVProducer, KVConsumer, KVBoth}
	if !slices.Contains(roles, c.Role) {
		return c, fmt.Errorf("kv_role %q: want one of %v", c.Role, roles)
	}
	return c, nil
}

func readKVTransferConfig(val string, s Settings) error {
	if _, err := ParseKVTransferConfig(val); err != nil {
		return err
	}
	s["kv_transfer_config"] = val
	return nil
}

// DisaggregationModes are SGLang's --disaggregation-mode values ("null":
// an aggregated server).
var DisaggregationModes = []string{"null", "prefill", "decode"}

func readDisaggregationMode(val string, s Settings) error {
	if !slices.Contains(DisaggregationModes, val) {
		return fmt.Errorf("invalid choice: %q (choose from %v)", val, DisaggregationModes)
	}
	s["disaggregation_mode"] = val
	return nil
}

// Role is a part's job in a disaggregated deployment.
type Role string

// The roles of a disaggregated deployment's parts.
const (
	Prefill Role = "prefill"
	Decode  Role = "decode"
)

// KVLinks are the links the simulated engine moves a prompt's KV cache
// over from a prefill engine to a decode engine (sim_kv_link).
var KVLinks = []string{"nvlink", "pcie", "infiniband", "roce", "ethernet"}

// EnvSimKVLink stands in for sim_kv_link (--kv-link) where a launcher
// cannot add the flag to an image's command line.
const EnvSimKVLink = "SERVETUNE_SIM_KV_LINK"

func init() { simEnv = append(simEnv, struct{ name, setting string }{EnvSimKVLink, "sim_kv_link"}) }

// roleSettings are the engine settings a disaggregated configuration may
// set per role: prefill_X and decode_X are X of that role's engines (the
// configuration's X where unset). Prefill engines run few long prompts
// at once and decode engines many short steps, so their batch limits are
// searched apart.
var roleSettings = []string{"tensor_parallel", "max_running_requests", "max_batched_tokens"}

// shapeNames are the settings that say how a configuration is split into
// parts; no part's engine takes them.
var shapeNames = func() []string {
	names := []string{"disaggregated", "prefill_replicas", "decode_replicas"}
	for _, role := range []Role{Prefill, Decode} {
		for _, n := range roleSettings {
			names = append(names, RoleSetting(role, n))
		}
	}
	return names
}()

// RoleSetting is the name of setting name for role's engines alone:
// "prefill_max_running_requests".
func RoleSetting(role Role, name string) string { return string(role) + "_" + name }

// RoleSettings returns the settings a disaggregated configuration may set
// per role (RoleSetting names each role's).
func RoleSettings() []string { return append([]string(nil), roleSettings...) }

// ShapeNames returns the settings of a deployment's shape.
func ShapeNames() []string { return append([]string(nil), shapeNames...) }

// The deployment shapes: one engine per replica, or prefill and decode
// engines behind a router.
const (
	ShapeAggregated    = "aggregated"
	ShapeDisaggregated = "disaggregated"
)

// Shapes are the deployment shapes.
var Shapes = []string{ShapeAggregated, ShapeDisaggregated}

// Shape names s's deployment shape.
func (s Settings) Shape() string {
	if s.Disaggregated() {
		return ShapeDisaggregated
	}
	return ShapeAggregated
}

// Disaggregated reports whether s is a disaggregated configuration.
func (s Settings) Disaggregated() bool {
	on, _ := s.Bool("disaggregated")
	return on
}

// Part is one engine of a disaggregated configuration.
type Part struct {
	Role     Role
	Index    int      // among the parts of its role, from 0
	Settings Settings // the engine's own: the configuration's, less the shape, with the role's settings (RoleSetting)
}

// Name is how messages and labels name the part: "prefill 0", "decode 1".
func (p Part) Name() string { return string(p.Role) + " " + strconv.Itoa(p.Index) }

// GPUs is how many GPUs the part's engine takes.
func (p Part) GPUs() int { return p.Settings.GPUs() }

// Parts splits a disaggregated configuration into its engines, the prefill
// ones first: prefill_replicas engines (default 1) with tensor_parallel,
// max_running_requests and max_batched_tokens set to
// prefill_tensor_parallel, prefill_max_running_requests and
// prefill_max_batched_tokens (each default the configuration's), then the
// decode ones likewise. An aggregated configuration gives nil.
func (s Settings) Parts() []Part {
	if !s.Disaggregated() {
		return nil
	}
	base := s.Clone()
	for _, n := range shapeNames {
		delete(base, n)
	}
	var out []Part
	for _, role := range []Role{Prefill, Decode} {
		n, ok := s.Int(string(role) + "_replicas")
		if !ok || n < 1 {
			n = 1
		}
		set := base.Clone()
		for _, name := range roleSettings {
			if v, ok := s.Int(RoleSetting(role, name)); ok && v > 0 {
				set[name] = v
			}
		}
		for i := range n {
			out = append(out, Part{Role: role, Index: i, Settings: set.Clone()})
		}
	}
	return out
}

// RouterPlaceholders are the elements of a router's command template that
// become one element per engine of a role: its hosts, ports or base URLs
// (launcher.Router).
var RouterPlaceholders = []string{"{prefill_hosts}", "{prefill_ports}", "{prefill_urls}", "{decode_hosts}", "{decode_ports}", "{decode_urls}"}

// KVTransfer is how a disaggregated deployment's parts move the KV cache,
// in each engine's terms (the study spec's disaggregation section).
type KVTransfer struct {
	// Config is vLLM's --kv-transfer-config for every part, a JSON object
	// (its kv_role the same on both sides, as NixlConnector's kv_both);
	// PrefillConfig and DecodeConfig, when set, replace it for one role
	// (a connector whose roles differ: kv_producer and kv_consumer).
	Config, PrefillConfig, DecodeConfig string
	// Backend is SGLang's --disaggregation-transfer-backend ("" = SGLang's
	// default).
	Backend string
}

// DefaultKVTransferConfig is vLLM's NixlConnector, both sides kv_both, as
// vLLM's disaggregated serving example starts it (vLLM's
// tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh).
const DefaultKVTransferConfig = `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`

// RoleArgs are the flags that make engine e's server the given part of a
// disaggregated deployment: vLLM's --kv-transfer-config, SGLang's
// --disaggregation-mode (and its transfer backend when set).
func RoleArgs(e Engine, role Role, kv KVTransfer) []string {
	if e == SGLang {
		args := []string{Flag(SGLang, "disaggregation_mode"), string(role)}
		if kv.Backend != "" {
			args = append(args, Flag(SGLang, "disaggregation_transfer_backend"), kv.Backend)
		}
		return args
	}
	cfg := kv.Config
	switch {
	case role == Prefill && kv.PrefillConfig != "":
		cfg = kv.PrefillConfig
	case role == Decode && kv.DecodeConfig != "":
		cfg = kv.DecodeConfig
	}
	if cfg == "" {
		cfg = DefaultKVTransferConfig
	}
	return []string{Flag(VLLM, "kv_transfer_config"), cfg}
}

// RouterArgv fills a router's command template with its engines' base
// URLs by role: an element that is exactly one of RouterPlaceholders
// becomes one element per engine of its role (their hosts, ports or
// URLs), {servetune} becomes self, and eachPrefill and eachDecode are
// appended once per engine of their role with {url}, {host} and {port}
// its own. {host}, {port} and {model} are left for the launcher.
func RouterArgv(tmpl, eachPrefill, eachDecode []string, urls map[Role][]string, self string) ([]string, error) {
	type ep struct{ url, host, port string }
	byRole := map[Role][]ep{}
	for _, role := range []Role{Prefill, Decode} {
		for _, u := range urls[role] {
			pu, err := url.Parse(u)
			if err != nil || pu.Hostname() == "" || pu.Port() == "" {
				return nil, fmt.Errorf("%w: %s endpoint %q has no host and port", ErrBadValue, role, u)
			}
			byRole[role] = append(byRole[role], ep{u, pu.Hostname(), pu.Port()})
		}
	}
	var out []string
	for _, a := range tmpl {
		if slices.Contains(RouterPlaceholders, a) {
			role, field, _ := strings.Cut(strings.Trim(a, "{}"), "_")
			for _, e := range byRole[Role(role)] {
				out = append(out, map[string]string{"hosts": e.host, "ports": e.port, "urls": e.url}[field])
			}
			continue
		}
		out = append(out, strings.ReplaceAll(a, "{servetune}", self))
	}
	for _, each := range []struct {
		role Role
		args []string
	}{{Prefill, eachPrefill}, {Decode, eachDecode}} {
		for _, e := range byRole[each.role] {
			r := strings.NewReplacer("{url}", e.url, "{host}", e.host, "{port}", e.port)
			for _, a := range each.args {
				out = append(out, r.Replace(a))
			}
		}
	}
	return out, nil
}

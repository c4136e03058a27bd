package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// disaggSpec is goodSpec searching the shape on four GPUs.
var disaggSpec = strings.NewReplacer(
	"gpus: [0, 1]", "gpus: [0, 1, 2, 3]",
	"  tensor_parallel: [1, 2]\n", "  tensor_parallel: [1, 2]\n  disaggregated: [false, true]\n  prefill_replicas: [1, 2]\n  decode_tensor_parallel: [1, 2]\n",
	"tuner: {", `disaggregation:
  router: ["{servetune}", sim, router, --port, "{port}", --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}", --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]
  kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}
  kv_link: infiniband
tuner: {`,
).Replace(goodSpec)

func TestParseSpecDisaggregated(t *testing.T) {
	study, err := parseSpec([]byte(disaggSpec), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := study.Disaggregation
	if d == nil || len(d.Router.Command) != 13 || d.KVLink != "infiniband" {
		t.Fatalf("disaggregation = %+v", d)
	}
	if d.KV.Config != `{"kv_connector":"NixlConnector","kv_role":"kv_both"}` {
		t.Errorf("kv_transfer_config = %s", d.KV.Config)
	}
	// The smallest configuration is aggregated TP1: 4 trials at once.
	if p := study.Parallelism(); p != 4 {
		t.Errorf("Parallelism = %d, want 4", p)
	}
	// Only disaggregated: the smallest is one prefill and one decode engine.
	only := strings.Replace(disaggSpec, "disaggregated: [false, true]", "disaggregated: [true]", 1)
	study, err = parseSpec([]byte(only), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := study.Parallelism(); p != 2 {
		t.Errorf("Parallelism of a disaggregated-only space = %d, want 2", p)
	}
	set := engine.Settings{"disaggregated": true, "prefill_replicas": 2, "decode_tensor_parallel": 2, "tensor_parallel": 1}
	if n := spec.GPUsFor(set); n != 4 {
		t.Errorf("GPUsFor = %d, want 1+1+2", n)
	}
}

func TestParseSpecDisaggregatedBad(t *testing.T) {
	tests := []struct {
		name, old, new     string
		wantField, wantMsg string
	}{
		{"no router", `  router: ["{servetune}"`, `  routr: ["{servetune}"`, "disaggregation.routr", "unknown key"},
		{"no port", `--port, "{port}", `, ``, "disaggregation.router", "names no {port}"},
		{"no decode", `--decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"`, `--x`, "disaggregation.router", "names no decode engine"},
		{"glued placeholder", `"{prefill_hosts}"`, `"h={prefill_hosts}"`, "disaggregation.router", "an element of its own"},
		{"no connector", "kv_connector: NixlConnector, ", "", "disaggregation.kv_transfer_config", "kv_connector: field required"},
		{"bad json", "{kv_connector: NixlConnector, kv_role: kv_both}", `'{"kv_connector": '`, "disaggregation.kv_transfer_config", "invalid JSON object"},
		{"bad link", "kv_link: infiniband", "kv_link: carrier-pigeon", "disaggregation.kv_link", "want one of nvlink"},
		{"sglang backend on vllm", "kv_link: infiniband", "transfer_backend: mooncake", "disaggregation.transfer_backend", "SGLang's"},
		{"never disaggregated", "disaggregated: [false, true]", "disaggregated: [false]", "disaggregation", "never disaggregated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(disaggSpec, tc.old, tc.new, 1)
			if src == disaggSpec {
				t.Fatalf("replacement %q not applied", tc.old)
			}
			_, err := parseSpec([]byte(src), "bad.yaml")
			var se *yamlpos.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *yamlpos.Error", err)
			}
			if se.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantMsg) || se.Line == 0 {
				t.Errorf("%v; want field %s, %q", err, tc.wantField, tc.wantMsg)
			}
		})
	}
	// A space that may be disaggregated without the section.
	src := disaggSpec[:strings.Index(disaggSpec, "disaggregation:")] + disaggSpec[strings.Index(disaggSpec, "tuner: {"):]
	_, err := parseSpec([]byte(src), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), "space.disaggregated: a disaggregated configuration needs a disaggregation section") {
		t.Errorf("no section: %v", err)
	}
}

// TestPartCommandsNixlSideChannel: vLLM NixlConnector engines on one
// host each get their own VLLM_NIXL_SIDE_CHANNEL_PORT (one shared port
// would collide), and the script sets it on each engine's line.
func TestPartCommandsNixlSideChannel(t *testing.T) {
	study, err := parseSpec([]byte(disaggSpec), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := recommend.Point{Settings: space.Settings{"disaggregated": true, "prefill_replicas": 2, "decode_replicas": 1,
		"tensor_parallel": 1, "max_running_requests": 32}}
	parts := study.PartCommands(p)
	if len(parts) != 4 {
		t.Fatalf("%d commands, want 2 prefill, 1 decode and the router", len(parts))
	}
	seen := map[string]bool{}
	for _, c := range parts[:3] {
		if len(c.Env) != 1 || !strings.HasPrefix(c.Env[0], "VLLM_NIXL_SIDE_CHANNEL_PORT=") || seen[c.Env[0]] {
			t.Errorf("%s: env %q; want its own VLLM_NIXL_SIDE_CHANNEL_PORT", c.Name, c.Env)
		}
		seen[c.Env[0]] = true
	}
	if parts[3].Env != nil {
		t.Errorf("router env %q", parts[3].Env)
	}
	for i, line := range spec.Script(parts)[:3] {
		if !strings.Contains(line, " "+parts[i].Env[0]+" ") {
			t.Errorf("script line %q lacks %s", line, parts[i].Env[0])
		}
	}
}

// TestRecipeRouter: a study that measured servetune's stand-in router
// prints the router its engine's projects package (with the line that
// installs it, the stand-in named as what was measured); one whose
// connector they package none for keeps the stand-in, saying so; a
// study's own router is printed as it was measured.
func TestRecipeRouter(t *testing.T) {
	p := recommend.Point{Settings: space.Settings{"disaggregated": true, "prefill_replicas": 2, "tensor_parallel": 1}}
	router := func(src string) spec.PartCommand {
		t.Helper()
		study, err := parseSpec([]byte(src), "d.yaml")
		if err != nil {
			t.Fatal(err)
		}
		parts := study.PartCommands(p)
		return parts[len(parts)-1]
	}
	r := router(disaggSpec)
	want := "vllm-router --vllm-pd-disaggregation --host 127.0.0.1 --port 8000 --prefill http://127.0.0.1:8100 --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102"
	if got := strings.Join(r.Argv, " "); got != want {
		t.Errorf("router %s\nwant %s", got, want)
	}
	if r.Install != "pip install vllm-router=="+engine.VLLMRouterRelease || !strings.Contains(strings.Join(r.Measured, " "), "servetune sim router --port 8000 --prefiller-hosts 127.0.0.1 127.0.0.1") {
		t.Errorf("install %q, measured %q", r.Install, r.Measured)
	}
	script := strings.Join(spec.Script([]spec.PartCommand{r}), "\n")
	for _, w := range []string{"# pip install vllm-router==", "\n" + want + "\n", "# the study measured servetune's stand-in", "#   servetune sim router"} {
		if !strings.Contains(script, w) {
			t.Errorf("script lacks %q:\n%s", w, script)
		}
	}

	nccl := strings.Replace(disaggSpec, "kv_connector: NixlConnector", "kv_connector: P2pNcclConnector", 1)
	r = router(nccl)
	if r.Argv[0] != "servetune" || r.Install != "" || r.Measured != nil || !strings.Contains(r.About, "package none") {
		t.Errorf("P2pNcclConnector: router %q, install %q, about %q", r.Argv, r.Install, r.About)
	}

	own := strings.Replace(disaggSpec, `router: ["{servetune}", sim, router,`, `router: [python3, toy_proxy_server.py,`, 1)
	r = router(own)
	if r.Argv[0] != "python3" || r.Install != "" || r.About != "" || r.Measured != nil {
		t.Errorf("the study's own router: %q, install %q, about %q", r.Argv, r.Install, r.About)
	}
	// A study that measured vllm-router itself prints it as measured,
	// with the line that installs it.
	vr := strings.Replace(disaggSpec, `router: ["{servetune}", sim, router, --port, "{port}", --prefiller-hosts, "{prefill_hosts}", --prefiller-ports, "{prefill_ports}", --decoder-hosts, "{decode_hosts}", --decoder-ports, "{decode_ports}"]`,
		`router: [vllm-router, --vllm-pd-disaggregation, --port, "{port}", --policy, round_robin]
  router_each_prefill: [--prefill, "{url}"]
  router_each_decode: [--decode, "{url}"]`, 1)
	r = router(vr)
	if got := strings.Join(r.Argv, " "); !strings.HasPrefix(got, "vllm-router --vllm-pd-disaggregation --port 8000 --policy round_robin --prefill") ||
		r.Install == "" || r.Measured != nil {
		t.Errorf("a study's vllm-router: %s, install %q, measured %q", got, r.Install, r.Measured)
	}
}

package engine

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The routers a disaggregated deployment can install where its engines
// run, as their projects document them (docs/spec.md, "The printed
// router", gives the sources):
//
//   - vLLM's: vllm-router (vllm-project/router), a package of its own,
//     `pip install vllm-router`, whose `vllm-router` command's PD mode
//     (--vllm-pd-disaggregation) takes each engine as --prefill URL or
//     --decode URL (its docs/cli_reference.md). It drives NixlConnector
//     engines with the handshake of vLLM's toy proxy, which `servetune
//     sim router` stands in for: the prompt to a prefill engine with
//     max_tokens 1 and kv_transfer_params {do_remote_decode: true}, then
//     the request to a decode engine with the kv_transfer_params the
//     prefill engine answered (its src/routers/http/vllm_pd_router.rs).
//     vLLM's image installs none (vllm-project/vllm docker/Dockerfile,
//     stage vllm-openai); the router project publishes vllm/vllm-router,
//     whose PATH has the command (its Dockerfile.router and
//     .buildkite/scripts/publish-release-images.sh: tag v<release>).
//   - SGLang's: sglang_router (sgl-project/sglang's router, now
//     sgl-model-gateway/bindings/python, package sglang-router),
//     `python3 -m sglang_router.launch_router --pd-disaggregation
//     --prefill URL --decode URL` (docs/advanced_features/
//     pd_disaggregation.md and router.md); SGLang's own image builds and
//     installs it (docker/Dockerfile), pip installs it apart.

// PackagedRouter is a router that a package installs beside an engine:
// its command as a template (RouterArgv's placeholders, {host} and
// {port} its own), the line that installs it, and an image whose command
// it is.
type PackagedRouter struct {
	Name    string // how messages name it: "vllm-router"
	Package string // the Python package that installs it
	Release string // the package's release the printed line pins
	// Command, EachPrefill and EachDecode are the router's argv template
	// (RouterArgv): EachPrefill and EachDecode once per engine of the
	// role, {url} its base URL.
	Command, EachPrefill, EachDecode []string
	HealthPath                       string // answers 200 once it serves
	// Image is a container image whose command it is; InEngineImage says
	// that image is the engine's own (SGLang's installs its router).
	Image         string
	InEngineImage bool
	// flags are its documented flags: how many values each takes after
	// it (a range: vllm-router's --prefill URL [BOOTSTRAP_PORT]).
	flags map[string][2]int
	// mode is the flag that turns its prefill/decode routing on.
	mode string
}

// Install is the shell line that installs the router where the engine
// runs: "pip install vllm-router==0.1.17".
func (r PackagedRouter) Install() string { return "pip install " + r.Package + "==" + r.Release }

// Router releases the printed lines pin: the newest each package index
// served when the table was written (docs/spec.md, "The printed router").
const (
	VLLMRouterRelease   = "0.1.17"
	SGLangRouterRelease = "0.3.2"
)

// RouterFor is the packaged router in front of release v of engine e
// whose engines move the KV cache as kv says (v zero: the newest release
// the flag table knows): vLLM's vllm-router for NixlConnector engines,
// SGLang's sglang_router (in release v's image). false where the engine's
// projects package none for kv's connector (vllm-router speaks
// NixlConnector's kv_transfer_params handshake).
func RouterFor(e Engine, v Version, kv KVTransfer) (PackagedRouter, bool) {
	if v == (Version{}) {
		v = NewestVersion(e)
	}
	switch e {
	case VLLM:
		for _, cfg := range []string{kv.Config, kv.PrefillConfig, kv.DecodeConfig} {
			if cfg == "" {
				continue
			}
			if c, err := ParseKVTransferConfig(cfg); err != nil || c.Connector != "NixlConnector" {
				return PackagedRouter{}, false
			}
		}
		return PackagedRouter{
			Name: "vllm-router", Package: "vllm-router", Release: VLLMRouterRelease,
			Command:     []string{"vllm-router", "--vllm-pd-disaggregation", "--host", "{host}", "--port", "{port}"},
			EachPrefill: []string{"--prefill", "{url}"}, EachDecode: []string{"--decode", "{url}"},
			HealthPath: HealthPath, Image: "vllm/vllm-router:v" + VLLMRouterRelease,
			mode: "--vllm-pd-disaggregation",
			flags: map[string][2]int{"--vllm-pd-disaggregation": {0, 0}, "--prefill": {1, 2}, "--decode": {1, 1},
				"--host": {1, 1}, "--port": {1, 1}, "--policy": {1, 1}, "--prefill-policy": {1, 1}, "--decode-policy": {1, 1},
				"--kv-connector": {1, 1}, "--intra-node-data-parallel-size": {1, 1}, "--prometheus-host": {1, 1}, "--prometheus-port": {1, 1}},
		}, true
	case SGLang:
		return PackagedRouter{
			Name: "sglang_router", Package: "sglang-router", Release: SGLangRouterRelease,
			Command:     []string{"python3", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--host", "{host}", "--port", "{port}"},
			EachPrefill: []string{"--prefill", "{url}"}, EachDecode: []string{"--decode", "{url}"},
			HealthPath: HealthPath, Image: Image(SGLang, v), InEngineImage: true,
			mode: "--pd-disaggregation",
			flags: map[string][2]int{"--pd-disaggregation": {0, 0}, "--prefill": {1, 2}, "--decode": {1, 1},
				"--host": {1, 1}, "--port": {1, 1}, "--policy": {1, 1}, "--prefill-policy": {1, 1}, "--decode-policy": {1, 1},
				"--prometheus-host": {1, 1}, "--prometheus-port": {1, 1}},
		}, true
	}
	return PackagedRouter{}, false
}

// CheckArgv refuses an argv of the router that its documented command
// line would not take: another program, a flag it does not document, a
// flag without its values, no prefill/decode mode, or no --prefill and
// --decode engine with an http URL.
func (r PackagedRouter) CheckArgv(argv []string) error {
	head := slices.IndexFunc(r.Command, func(a string) bool { return strings.HasPrefix(a, "--") })
	if head < 0 {
		head = len(r.Command)
	}
	if !r.Runs(argv) {
		return fmt.Errorf("%s: %q does not start with %q", r.Name, argv, r.Command[:head])
	}
	seen := map[string]int{}
	for i := head; i < len(argv); {
		f := argv[i]
		n, ok := r.flags[f]
		if !ok {
			return fmt.Errorf("%s: %q is not one of its documented flags", r.Name, f)
		}
		seen[f]++
		i++
		var vals []string
		for len(vals) < n[1] && i < len(argv) && !strings.HasPrefix(argv[i], "--") {
			vals = append(vals, argv[i])
			i++
		}
		if len(vals) < n[0] {
			return fmt.Errorf("%s: %s takes %d value(s), has %d", r.Name, f, n[0], len(vals))
		}
		if f == "--prefill" || f == "--decode" {
			if u, err := url.Parse(vals[0]); err != nil || u.Scheme != "http" || u.Host == "" {
				return fmt.Errorf("%s: %s %q is not an http URL", r.Name, f, vals[0])
			}
		}
	}
	for _, f := range []string{r.mode, "--prefill", "--decode"} {
		if seen[f] == 0 {
			return fmt.Errorf("%s: %q has no %s", r.Name, argv, f)
		}
	}
	return nil
}

// Runs reports whether a router command template runs this router's
// program: its words before the first flag are the router's.
func (r PackagedRouter) Runs(cmd []string) bool {
	head := slices.IndexFunc(r.Command, func(a string) bool { return strings.HasPrefix(a, "--") })
	if head < 0 {
		head = len(r.Command)
	}
	return len(cmd) >= head && slices.Equal(cmd[:head], r.Command[:head])
}

// IsStandInRouter reports whether a router command template is
// servetune's own stand-in (`servetune sim router`), which no engine's
// installation has.
func IsStandInRouter(cmd []string) bool {
	if len(cmd) < 3 || cmd[1] != "sim" || cmd[2] != "router" {
		return false
	}
	return cmd[0] == "{servetune}" || cmd[0] == "servetune" || strings.HasSuffix(cmd[0], "/servetune")
}

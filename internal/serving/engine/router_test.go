package engine

import (
	"strings"
	"testing"
)

// TestPackagedRouterArgv: each engine's packaged router, filled with its
// engines' URLs, is a command line its documented flags take, one
// --prefill or --decode per engine.
func TestPackagedRouterArgv(t *testing.T) {
	urls := map[Role][]string{Prefill: {"http://127.0.0.1:8100", "http://127.0.0.1:8101"}, Decode: {"http://127.0.0.1:8102"}}
	for _, tc := range []struct {
		e    Engine
		want string
	}{
		{VLLM, "vllm-router --vllm-pd-disaggregation --host {host} --port {port} --prefill http://127.0.0.1:8100 --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102"},
		{SGLang, "python3 -m sglang_router.launch_router --pd-disaggregation --host {host} --port {port} --prefill http://127.0.0.1:8100 --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102"},
	} {
		r, ok := RouterFor(tc.e, Version{}, KVTransfer{})
		if !ok {
			t.Fatalf("%s: no packaged router", tc.e)
		}
		argv, err := RouterArgv(r.Command, r.EachPrefill, r.EachDecode, urls, "servetune")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(argv, " "); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.e, got, tc.want)
		}
		if err := r.CheckArgv(argv); err != nil {
			t.Errorf("%s: %v", tc.e, err)
		}
		if !strings.HasPrefix(r.Install(), "pip install "+r.Package+"==") || r.Image == "" {
			t.Errorf("%s: install %q, image %q", tc.e, r.Install(), r.Image)
		}
	}
	// SGLang's router is in the engine release's own image.
	r, _ := RouterFor(SGLang, mustVersion("0.5.5"), KVTransfer{Backend: "nixl"})
	if r.Image != "lmsysorg/sglang:v0.5.5" || !r.InEngineImage {
		t.Errorf("SGLang 0.5.5's router image %q", r.Image)
	}
	v, _ := RouterFor(VLLM, mustVersion("0.11.0"), KVTransfer{Config: DefaultKVTransferConfig})
	if v.Image != "vllm/vllm-router:v"+VLLMRouterRelease || v.InEngineImage {
		t.Errorf("vLLM's router image %q", v.Image)
	}
}

// TestPackagedRouterRefuses: what the router's documented flags would not
// take is refused, naming the problem.
func TestPackagedRouterRefuses(t *testing.T) {
	r, _ := RouterFor(VLLM, Version{}, KVTransfer{})
	for _, tc := range []struct{ argv, want string }{
		{"python3 toy_proxy_server.py --port 8000", "does not start with"},
		{"vllm-router --vllm-pd-disaggregation --prefiller-hosts 127.0.0.1 --decode http://h:1", "not one of its documented flags"},
		{"vllm-router --vllm-pd-disaggregation --prefill http://h:1", "no --decode"},
		{"vllm-router --prefill http://h:1 --decode http://h:2", "no --vllm-pd-disaggregation"},
		{"vllm-router --vllm-pd-disaggregation --prefill h:1 --decode http://h:2", "not an http URL"},
		{"vllm-router --vllm-pd-disaggregation --prefill http://h:1 --decode http://h:2 --port", "takes 1 value"},
	} {
		err := r.CheckArgv(strings.Fields(tc.argv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.argv, err, tc.want)
		}
	}
	// A bootstrap port after a prefill URL is documented.
	if err := r.CheckArgv(strings.Fields("vllm-router --vllm-pd-disaggregation --prefill http://h:1 9000 --decode http://h:2")); err != nil {
		t.Error(err)
	}
}

// TestRouterForConnector: vllm-router routes NixlConnector engines only.
func TestRouterForConnector(t *testing.T) {
	if _, ok := RouterFor(VLLM, Version{}, KVTransfer{Config: `{"kv_connector":"P2pNcclConnector","kv_role":"kv_both"}`}); ok {
		t.Error("a packaged router for P2pNcclConnector engines")
	}
	if _, ok := RouterFor(VLLM, Version{}, KVTransfer{Config: `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`,
		DecodeConfig: `{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}`}); !ok {
		t.Error("no packaged router for NixlConnector engines")
	}
}

func TestIsStandInRouter(t *testing.T) {
	for cmd, want := range map[string]bool{
		"{servetune} sim router --port {port}":      true,
		"/usr/local/bin/servetune sim router":       true,
		"vllm-router --vllm-pd-disaggregation":      false,
		"python3 toy_proxy_server.py --port {port}": false,
		"{servetune} sim serve":                     false,
	} {
		if got := IsStandInRouter(strings.Fields(cmd)); got != want {
			t.Errorf("IsStandInRouter(%s) = %v", cmd, got)
		}
	}
}

package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// startCLI runs the servetune command args in this process until the test
// ends (then it must exit 0, as on SIGTERM) and returns the base URL it
// logs, the first group of marker.
func startCLI(t *testing.T, marker *regexp.Regexp, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	var wg sync.WaitGroup
	code := -1
	wg.Go(func() { code = run(ctx, args, &out, &errb) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if code != exitOK {
			t.Errorf("%q: exit code %d: %s", args, code, errb.String())
		}
	})
	return strings.TrimSuffix(errb.await(t, marker, 5*time.Second)[1], ":")
}

// routerURL is the base URL `sim router` logs once it listens.
var routerURL = regexp.MustCompile(`router on (\S+)`)

// TestSimRouterCLI: `sim serve` as a prefill engine (vLLM's flags) and as
// a decode engine (SGLang's), `sim router` over them; a streamed request
// through the router returns its tokens.
func TestSimRouterCLI(t *testing.T) {
	common := []string{"--host", "127.0.0.1", "--port", "0", "--sim-load-time", "10ms", "--time-scale", "20", "--kv-link", "infiniband"}
	p := startCLI(t, uvicornURL, append([]string{"sim", "serve", "llama-3.1-8b", "--max-model-len", "4096",
		"--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_producer"}`}, common...)...)
	d := startCLI(t, uvicornURL, append([]string{"sim", "serve", "--model-path", "llama-3.1-8b", "--context-length", "4096",
		"--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"}, common...)...)
	pu, _ := url.Parse(p)
	du, _ := url.Parse(d)
	r := startCLI(t, routerURL, "sim", "router", "--port", "0", "--prefiller-hosts", pu.Hostname(), "--prefiller-ports", pu.Port(),
		"--decoder-hosts", du.Hostname(), "--decoder-ports", du.Port())
	resp, err := http.Get(r + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("router /health: %d", resp.StatusCode)
	}
	resp, err = http.Get(r + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(models), `"llama-3.1-8b"`) {
		t.Errorf("router /v1/models: %d %s", resp.StatusCode, models)
	}
	resp, err = http.Post(r+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama-3.1-8b","messages":[{"role":"user","content":"tell me a long story about a router"}],"max_tokens":6,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The role chunk, six tokens, [DONE].
	if resp.StatusCode != 200 || strings.Count(string(body), "data: ") != 8 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream through the router: %d %s", resp.StatusCode, body)
	}
}

func TestSimRouterBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "router", "--prefiller-hosts", "a", "b", "--prefiller-ports", "1", "--decoder-hosts", "c", "--decoder-ports", "2"}, "2 hosts but 1 ports"},
		{[]string{"sim", "router", "--prefiller-hosts", "a", "--prefiller-ports", "x"}, "--prefiller-ports"},
		{[]string{"sim", "router", "--prefiller-hosts", "a", "--prefiller-ports", "1"}, "--decoder-hosts"},
		{[]string{"sim", "router", "--policy", "random"}, "--policy"},
		{[]string{"sim", "serve", "llama-3.1-8b", "--kv-transfer-config", "{"}, "--kv-transfer-config"},
		{[]string{"sim", "serve", "--model-path", "llama-3.1-8b", "--disaggregation-mode", "both"}, "--disaggregation-mode"},
		{[]string{"sim", "serve", "llama-3.1-8b", "--kv-link", "smoke-signals"}, "--kv-link"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q: exit %d, %q; want a one-line usage error naming %s", c.args, code, errOut, c.want)
		}
	}
}

package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
)

// tokenPrompt is a prompt of n random token ids (no two share a prefix).
func tokenPrompt(r *rand.Rand, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + r.IntN(30000))
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// firstChunk streams a completion from base and returns the first token's
// engine time (servetune_engine_us) and the tokens streamed.
func firstChunk(t *testing.T, base, body string) (int64, int) {
	t.Helper()
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	first, tokens := int64(-1), 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			EngineUs *int64 `json:"servetune_engine_us"`
			Choices  []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if len(c.Choices) == 0 || c.EngineUs == nil {
			continue
		}
		if first < 0 {
			first = *c.EngineUs
		}
		tokens++
	}
	return first, tokens
}

func metricsPage(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDisaggregatedThroughRouter runs a prefill engine, a decode engine
// and the router on loopback: a streamed request through the router
// returns its tokens; the decode engine computed none of the prompt but
// its last token (the rest are hits of the pulled KV), and the first
// token's time holds the prefill engine's time and the KV's transfer.
func TestDisaggregatedThroughRouter(t *testing.T) {
	const prompt, out = 2000, 20
	kv := `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`
	common := []string{"llama-3.1-8b", "--max-model-len", "8192", "--time-scale", "10", "--sim-load-time", "0", "--kv-link", "ethernet"}
	_, pURL := startServer(t, append(common, "--kv-transfer-config", kv)...)
	dec, dURL := startServer(t, append(common, "--kv-transfer-config", kv)...)
	ph, dh := hostPort(t, pURL), hostPort(t, dURL)
	r, err := NewRouter([]string{ph.host}, []int{ph.port}, []string{dh.host}, []int{dh.port})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(r.Handler())
	defer rs.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	// The prefill engine's time for such a prompt, asked directly.
	alone, _ := firstChunk(t, pURL, fmt.Sprintf(`{"prompt":%s,"max_tokens":1,"stream":true}`, tokenPrompt(rng, prompt)))
	const n = 3
	var ttft []int64
	for range n {
		first, tokens := firstChunk(t, rs.URL, fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"stream":true}`, tokenPrompt(rng, prompt), out))
		if tokens != out {
			t.Fatalf("router streamed %d tokens, want %d", tokens, out)
		}
		ttft = append(ttft, first)
	}
	link, _ := LookupLink("ethernet")
	xfer := int64(dec.cfg.KVTransferSeconds(link, prompt-1, 1) * 1e6)
	if xfer < 10_000 {
		t.Fatalf("transfer of %d tokens over ethernet is %d us; the test wants one that shows", prompt, xfer)
	}
	for _, f := range ttft {
		// At least the prefill and the transfer; at most one decode step
		// and the front ends beyond them (engine time, not this machine's).
		if f < alone+xfer-2000 || f > alone+xfer+40_000 {
			t.Errorf("first token at %d us; want the prefill's %d + the transfer's %d us, plus at most a decode step", f, alone, xfer)
		}
	}
	t.Logf("prefill alone %d us, transfer %d us, first tokens through the router %v us", alone, xfer, ttft)
	page := metricsPage(t, dURL)
	computed, _ := metricValue(page, "vllm:prompt_tokens_total")
	hits, _ := metricValue(page, "vllm:prefix_cache_hits_total")
	if computed != n || hits != n*(prompt-1) {
		t.Errorf("decode engine computed %v prompt tokens with %v hits; want %d (each prompt's last) and %d pulled", computed, hits, n, n*(prompt-1))
	}
	// A decode engine's own first token, for comparison: without the
	// flags' handshake the same engine prefills.
	own, _ := firstChunk(t, dURL, fmt.Sprintf(`{"prompt":%s,"max_tokens":1,"stream":true}`, tokenPrompt(rng, prompt)))
	if own < alone/2 {
		t.Errorf("a plain request on the decode engine took %d us, the prefill engine %d: it should prefill", own, alone)
	}
}

type hp struct {
	host string
	port int
}

func hostPort(t *testing.T, base string) hp {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return hp{u.Hostname(), p}
}

// TestRemotePrefillNeedsTheFlags: an engine started without a KV
// connector refuses either side of the handshake with a 400 that names
// the flags; one started as prefill only refuses to decode.
func TestRemotePrefillNeedsTheFlags(t *testing.T) {
	_, plain := startServer(t, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0")
	_, producer := startServer(t, "llama-3.1-8b", "--max-model-len", "4096", "--sim-load-time", "0",
		"--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_producer"}`)
	for _, c := range []struct {
		url, params, want string
	}{
		{plain, `{"do_remote_prefill":true,"remote_block_ids":[0]}`, "--kv-transfer-config"},
		{plain, `{"do_remote_decode":true}`, "--disaggregation-mode prefill"},
		{producer, `{"do_remote_prefill":true}`, "do_remote_prefill"},
		{producer, `{"do_remote_prefill":true,"do_remote_decode":true}`, "both"},
	} {
		resp, body := post(t, c.url+"/v1/completions", `{"prompt":"hello there","max_tokens":4,"kv_transfer_params":`+c.params+`}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || strings.Count(strings.TrimSpace(body), "\n") > 0 {
			t.Errorf("%s: status %d %s; want 400 naming %q", c.params, resp.StatusCode, body, c.want)
		}
	}
	// The producer answers a prefill with where its blocks are.
	resp, body := post(t, producer+"/v1/completions", `{"prompt":"hello there general kenobi","max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`)
	var ans struct {
		KV kvTransferParams `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal([]byte(body), &ans); resp.StatusCode != 200 || err != nil || !ans.KV.DoRemotePrefill ||
		ans.KV.RemoteEngineID == nil || len(ans.KV.RemoteBlockIDs) == 0 || ans.KV.RemotePort == nil {
		t.Errorf("prefill answer %d %s: want kv_transfer_params with do_remote_prefill and the blocks", resp.StatusCode, body)
	}
}

// TestDisaggregationFlags: the engines' flags set the role, bad ones are
// one-line errors naming the flag.
func TestDisaggregationFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		role string
	}{
		{[]string{"--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`}, RoleBoth},
		{[]string{"--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}`}, RoleDecode},
		{[]string{"--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"}, RolePrefill},
		{[]string{"--disaggregation-mode", "null"}, ""},
	} {
		cfg := mustParse(t, append([]string{"--model", "llama-3.1-8b"}, c.args...)...)
		if cfg.KVRole != c.role || cfg.KVLink != DefaultLink {
			t.Errorf("%q: role %q link %q; want %q %q", c.args, cfg.KVRole, cfg.KVLink, c.role, DefaultLink)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kv-transfer-config", "{nope"}, "--kv-transfer-config"},
		{[]string{"--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"leader"}`}, "kv_role"},
		{[]string{"--kv-transfer-config", `{"kv_role":"kv_both"}`}, "kv_connector"},
		{[]string{"--disaggregation-mode", "both"}, "--disaggregation-mode"},
		{[]string{"--kv-link", "carrier-pigeon"}, "--kv-link"},
	} {
		_, err := ParseArgs(append([]string{"--model", "llama-3.1-8b"}, c.args...), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v; want one line naming %s", c.args, err, c.want)
		}
	}
	if _, err := NewRouter([]string{"a", "b"}, []int{1}, []string{"c"}, []int{2}); err == nil || !strings.Contains(err.Error(), "2 hosts but 1 ports") {
		t.Errorf("mismatched counts: %v", err)
	}
}

// TestPromptKVBytes: the KV of a prompt is the memory model's per-token
// KV, MLA's latent included, and its transfer time the slower side's
// lane.
func TestPromptKVBytes(t *testing.T) {
	llama := mustParse(t, "--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100-SXM", "--tensor-parallel-size", "4")
	// 80 layers x 8 KV heads x 128 x K and V x 2 bytes = 320 KiB.
	if got := llama.KVBytesPerToken(); got != 80*8*128*2*2 {
		t.Errorf("Llama-3.3-70B KV per token %v, want %v", got, 80*8*128*2*2)
	}
	ib, _ := LookupLink("infiniband")
	four, one := llama.KVTransferSeconds(ib, 8000, 4), llama.KVTransferSeconds(ib, 8000, 1)
	if want := ib.Latency + 8000*80*8*128*4/4/50e9; abs(four-want) > 1e-9 || one < 3.9*four {
		t.Errorf("8,000 tokens over IB: TP4 to TP4 %v s (want %v), TP1 to TP4 %v s", four, want, one)
	}
	ds := mustParse(t, "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tensor-parallel-size", "8")
	if ds.Model.MLA == nil {
		t.Skip("no MLA model in the catalog")
	}
	if got, want := ds.KVBytesPerToken(), float64(ds.Model.Layers*(ds.Model.MLA.KVLoRARank+ds.Model.MLA.QKRopeHeadDim))*ds.kvBytesPerElem(); got != want {
		t.Errorf("MLA KV per token %v, want %v", got, want)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestLinksAreTheEngineTables: the spec's kv_link names
// (engine.KVLinks) are the simulator's links, in the same order.
func TestLinksAreTheEngineTables(t *testing.T) {
	if got, want := strings.Join(LinkNames(), ","), strings.Join(engine.KVLinks, ","); got != want {
		t.Errorf("sim links %s, engine.KVLinks %s", got, want)
	}
}

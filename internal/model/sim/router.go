package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Router is the stand-in for a disaggregated deployment's router (vLLM's
// NixlConnector toy proxy, its flags and handshake: kvTransferParams): a
// completion goes to a prefill engine with do_remote_decode and one token,
// then, with the kv_transfer_params the prefill engine answered, to a
// decode engine, whose answer streams back unchanged. Each side is chosen
// round-robin. Real deployments run vLLM's proxy or router, or SGLang's
// router, in its place.
type Router struct {
	prefill, decode []string // base URLs
	nextP, nextD    atomic.Uint64
	client          *http.Client
	mux             *http.ServeMux
}

// NewRouter returns a router over the prefill and decode engines at the
// given hosts and ports (one port per host, in order); the error names
// what is wrong in one line.
func NewRouter(prefillHosts []string, prefillPorts []int, decodeHosts []string, decodePorts []int) (*Router, error) {
	p, err := engineURLs("prefiller", prefillHosts, prefillPorts)
	if err != nil {
		return nil, err
	}
	d, err := engineURLs("decoder", decodeHosts, decodePorts)
	if err != nil {
		return nil, err
	}
	r := &Router{prefill: p, decode: d, mux: http.NewServeMux(),
		// No overall timeout: a decode streams as long as it takes; the
		// client's leaving cancels it (the request's context).
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}}}
	r.mux.HandleFunc("GET /health", r.handleHealth)
	r.mux.HandleFunc("GET /v1/models", r.handleModels)
	r.mux.HandleFunc("POST /v1/completions", r.handleGenerate)
	r.mux.HandleFunc("POST /v1/chat/completions", r.handleGenerate)
	return r, nil
}

func engineURLs(side string, hosts []string, ports []int) ([]string, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--%s-hosts: at least one host is required", side)
	}
	if len(hosts) != len(ports) {
		return nil, fmt.Errorf("--%s-hosts and --%s-ports: %d hosts but %d ports (one port per host)", side, side, len(hosts), len(ports))
	}
	out := make([]string, len(hosts))
	for i, h := range hosts {
		if h == "" {
			return nil, fmt.Errorf("--%s-hosts: host %d is empty", side, i+1)
		}
		if ports[i] < 1 || ports[i] > 65535 {
			return nil, fmt.Errorf("--%s-ports: %d is not a port (1-65535)", side, ports[i])
		}
		out[i] = "http://" + net.JoinHostPort(h, strconv.Itoa(ports[i]))
	}
	return out, nil
}

// Handler is the router's HTTP API.
func (r *Router) Handler() http.Handler { return engine.WithNonce(r.mux) }

// ListenAndServe serves on addr until ctx ends; ready, when not nil, gets
// the bound address.
func (r *Router) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	hs := &http.Server{Addr: addr, Handler: r.Handler(), ReadHeaderTimeout: headerTimeout, IdleTimeout: 60 * time.Second}
	return httpserve.ListenAndServe(ctx, hs, 5*time.Second, httpserve.Hooks{Ready: ready})
}

// handleHealth is 200 when every engine is healthy, else 503 naming the
// first that is not.
func (r *Router) handleHealth(w http.ResponseWriter, req *http.Request) {
	for _, u := range append(append([]string{}, r.prefill...), r.decode...) {
		hr, _ := http.NewRequestWithContext(req.Context(), http.MethodGet, u+"/health", nil)
		resp, err := r.client.Do(hr)
		if err != nil {
			apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", fmt.Sprintf("%s: %v", u, err))
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", fmt.Sprintf("%s: /health %d", u, resp.StatusCode))
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// handleModels passes a decode engine's /v1/models through.
func (r *Router) handleModels(w http.ResponseWriter, req *http.Request) {
	r.pass(w, req, r.decode[0]+"/v1/models", nil)
}

// handleGenerate is the handshake: prefill, then decode.
func (r *Router) handleGenerate(w http.ResponseWriter, req *http.Request) {
	var body map[string]json.RawMessage
	if !decodeBody(w, req, &body) {
		return
	}
	if body == nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", "the body must be a JSON object")
		return
	}
	pre := make(map[string]json.RawMessage, len(body)+2)
	for k, v := range body {
		pre[k] = v
	}
	pre["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)
	pre["stream"] = json.RawMessage("false")
	pre["max_tokens"] = json.RawMessage("1")
	if _, ok := body["max_completion_tokens"]; ok {
		pre["max_completion_tokens"] = json.RawMessage("1")
	}
	delete(pre, "stream_options")
	pu := r.prefill[int(r.nextP.Add(1)-1)%len(r.prefill)] + req.URL.Path
	params, status, errBody := r.prefillOn(req, pu, pre)
	if status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(errBody)
		return
	}
	body["kv_transfer_params"] = params
	du := r.decode[int(r.nextD.Add(1)-1)%len(r.decode)] + req.URL.Path
	r.pass(w, req, du, body)
}

// prefillOn sends the prefill request to url and returns the answer's
// kv_transfer_params, or the status and body to answer the client with.
func (r *Router) prefillOn(req *http.Request, url string, body map[string]json.RawMessage) (json.RawMessage, int, []byte) {
	b, _ := json.Marshal(body)
	resp, err := r.send(req, http.MethodPost, url, b)
	if err != nil {
		return nil, http.StatusBadGateway, errorJSON(http.StatusBadGateway, fmt.Sprintf("prefill %s: %v", url, err))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, http.StatusBadGateway, errorJSON(http.StatusBadGateway, fmt.Sprintf("prefill %s: %v", url, err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, out
	}
	var ans struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(out, &ans); err != nil || len(ans.KV) == 0 || string(ans.KV) == "null" {
		return nil, http.StatusBadGateway, errorJSON(http.StatusBadGateway,
			fmt.Sprintf("prefill %s: the answer has no kv_transfer_params (is the engine started with a KV connector?)", url))
	}
	return ans.KV, http.StatusOK, nil
}

// pass sends body (nil: a GET) to url and copies the answer back as it
// comes, flushing each read so a stream's chunks keep their times.
func (r *Router) pass(w http.ResponseWriter, req *http.Request, url string, body map[string]json.RawMessage) {
	method, b := http.MethodGet, []byte(nil)
	if body != nil {
		method = http.MethodPost
		b, _ = json.Marshal(body)
	}
	resp, err := r.send(req, method, url, b)
	if err != nil {
		if !errors.Is(req.Context().Err(), context.Canceled) {
			apiError(w, http.StatusBadGateway, "BadGatewayError", fmt.Sprintf("decode %s: %v", url, err))
		}
		return
	}
	defer resp.Body.Close()
	httpserve.Relay(w, resp, "Content-Type", "Cache-Control", "X-Request-Id")
}

// send makes the request to an engine, with the client's credentials.
func (r *Router) send(req *http.Request, method, url string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	er, err := http.NewRequestWithContext(req.Context(), method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		er.Header.Set("Content-Type", "application/json")
	}
	if a := req.Header.Get("Authorization"); a != "" {
		er.Header.Set("Authorization", a)
	}
	return r.client.Do(er)
}

func errorJSON(status int, msg string) []byte {
	b, _ := json.Marshal(errorBody(status, http.StatusText(status), msg))
	return b
}

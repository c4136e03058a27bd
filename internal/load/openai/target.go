// Package openai is the one description of an OpenAI-compatible server a
// request goes to: its base URL, model, endpoint kind, extra headers and
// API key (never shown: String and GoString redact it). The benchmark
// client (internal/load/bench) and the quality gate (internal/load/quality)
// both send to a Target, their JSON POSTs made by one constructor (Post).
package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/redact"
)

// Endpoint kinds of Target.Endpoint.
const (
	EndpointCompletions = "completions"
	EndpointChat        = "chat"
)

// Target is an OpenAI-compatible endpoint.
type Target struct {
	BaseURL  string      // e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted)
	Model    string      // model name sent in requests
	Endpoint string      // "completions" (default) or "chat"
	Headers  http.Header // extra headers
	APIKey   string      // Bearer token; never written anywhere
}

// Validate reports a target that cannot be used (callers wrap the error in
// their own kind); the base URL in its message is redacted.
func (t Target) Validate() error {
	u, err := url.Parse(t.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q must be http(s)://host[:port]", redact.URL(t.BaseURL))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("base URL %q: port %s is not in 1-65535", redact.URL(t.BaseURL), p)
		}
	}
	if t.Model == "" {
		return errors.New("no model name")
	}
	switch t.Endpoint {
	case "", EndpointCompletions, EndpointChat:
	default:
		return fmt.Errorf("endpoint type %q must be completions or chat", t.Endpoint)
	}
	return nil
}

// Chat reports whether t is the chat endpoint.
func (t Target) Chat() bool { return t.Endpoint == EndpointChat }

// URL returns the URL of an API path on t's server.
func (t Target) URL(path string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(t.BaseURL, "/"), "/v1")
	return base + path
}

// Path is the API path of t's endpoint.
func (t Target) Path() string {
	if t.Chat() {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// Header sets the extra headers and the API key on h.
func (t Target) Header(h http.Header) {
	for k, vs := range t.Headers {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if t.APIKey != "" {
		h.Set("Authorization", "Bearer "+t.APIKey)
	}
}

// Post is a POST of body, JSON, to path on t's server with t's headers
// (Header); a nil body sends none.
func (t Target) Post(ctx context.Context, path string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL(path), r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	t.Header(req.Header)
	return req, nil
}

// Scrub replaces in a message that came from the server or the transport
// what t would not show: the API key and the headers' values, whole and
// word by word (a server may echo what it received; "Authorization: Bearer
// KEY" passed as a header, and a server that echoes KEY alone).
func (t Target) Scrub(msg string) string {
	secrets := []string{t.APIKey}
	for _, vs := range t.Headers {
		secrets = append(secrets, vs...)
	}
	return redact.Known(msg, secrets...)
}

// RedactedURL is the base URL without user info or query, for meta.
func (t Target) RedactedURL() string {
	u, err := url.Parse(t.BaseURL)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// String is the model at the redacted base URL: what a log line may show.
func (t Target) String() string { return t.Model + " at " + t.RedactedURL() }

// GoString is t for %#v with the API key and the headers' values redacted.
func (t Target) GoString() string {
	h := make(http.Header, len(t.Headers))
	for k, vs := range t.Headers {
		for range vs {
			h.Add(k, redact.Redacted)
		}
	}
	key := ""
	if t.APIKey != "" {
		key = redact.Redacted
	}
	return fmt.Sprintf("openai.Target{BaseURL:%q, Model:%q, Endpoint:%q, Headers:%v, APIKey:%q}", redact.URL(t.BaseURL), t.Model, t.Endpoint, h, key)
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/redact"
)

// cacheResets are the engines' routes that empty their prefix cache, in
// the order tried: vLLM's (served with VLLM_SERVER_DEV_MODE=1 in recent
// releases; `servetune sim serve` serves it too) and SGLang's.
var cacheResets = []struct{ engine, path string }{
	{"vllm", "/reset_prefix_cache"},
	{"sglang", "/flush_cache"},
}

// ResetPrefixCache asks t's server to forget its cached prefixes, so that
// a load level does not hit prompts an earlier one sent, and says how:
// "vllm: POST /reset_prefix_cache" when a route answered 2xx, else why
// none did ("not offered: ..."), ok false. ctx bounds it.
func ResetPrefixCache(ctx context.Context, t openai.Target) (how string, ok bool) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var why []string
	for _, r := range cacheResets {
		req, err := t.Post(ctx, r.path, nil)
		if err != nil {
			return "not offered: " + err.Error(), false
		}
		resp, err := hc.Do(req)
		if err != nil {
			why = append(why, fmt.Sprintf("POST %s: %v", r.path, transportErr(err)))
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return r.engine + ": POST " + r.path, true
		}
		why = append(why, fmt.Sprintf("POST %s: HTTP %d", r.path, resp.StatusCode))
	}
	return "not offered (" + strings.Join(why, "; ") + ")", false
}

// transportErr is a transport error's cause without the request's method
// and URL (the caller names the path), redacted as any message.
func transportErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return redact.Message(err.Error())
}

package testengine

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// StreamCompletion sends one streaming completion and returns the SSE data lines.
func StreamCompletion(t testing.TB, base, model string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"model":%q,"prompt":"Hello, my name is","max_tokens":8,"stream":true,"ignore_eos":true,"stream_options":{"include_usage":true}}`, model)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %s", resp.Status)
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read stream: %v", err)
	}
	if len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream did not end with [DONE]: %q", data)
	}
	return data
}

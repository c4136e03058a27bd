package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// halfFailing streams a short completion for every other request and
// answers the others 503 with the server's own words.
func halfFailing() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/completions":
		default:
			http.NotFound(w, r)
			return
		}
		var q struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		if n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"object":"error","message":"overloaded, try again","type":"ServiceUnavailable","code":503}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= q.MaxTokens; i++ {
			fin := "null"
			if i == q.MaxTokens {
				fin = `"length"`
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\" w\",\"finish_reason\":%s}]}\n\n", fin)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", q.MaxTokens)
	}))
}

// TestTuneHalfFailingServer: a server that fails every other request is
// measured, not trusted. The trial is stored ok with its failures; the
// default SLO accepts no failed request, and tune, trials and recommend
// say that half the requests failed and that this is why nothing meets
// the SLOs. slo.error_rate: 0.6 accepts them, and the recommendation
// still says what failed.
func TestTuneHalfFailingServer(t *testing.T) {
	srv := halfFailing()
	defer srv.Close()
	src := `name: half
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: endpoint, base_url: ` + srv.URL + `}
space:
  max_running_requests: 8
workload:
  dataset: {kind: random, input: 16, output: 4}
  load: {concurrency: [1]}
  requests_per_level: 8
  warmup: 0
slo: {ttft_p99_ms: 60000SLO}
tuner: {sampler: grid, trials: 1, seed: 1, confirm: false}
`
	db := filepath.Join(t.TempDir(), "s.db")
	code, out, errs := runIn("tune", writeSpec(t, strings.Replace(src, "SLO", "", 1)), "--db", db)
	if code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"trial 0 ok", "4 of 8 requests failed (50%", "http_5xx 4", "overloaded, try again",
		"no recommendation: no measured point meets the SLOs: 1 of 1 levels had failed requests (up to 50% of a level's; the SLO allows none: set slo.error_rate to accept some)"} {
		if !strings.Contains(out, want) {
			t.Errorf("tune's output lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		Trials []struct {
			Status string `json:"status"`
			Levels []struct {
				Completed int `json:"completed"`
				Failed    int `json:"failed"`
			} `json:"levels"`
		} `json:"trials"`
	}
	code, js, errs := runIn("trials", "half", "--db", db, "--json", "-")
	if err := json.Unmarshal([]byte(js), &doc); code != exitOK || err != nil || len(doc.Trials) != 1 ||
		doc.Trials[0].Status != "ok" || len(doc.Trials[0].Levels) != 1 || doc.Trials[0].Levels[0].Failed != 4 || doc.Trials[0].Levels[0].Completed != 4 {
		t.Fatalf("stored trial: exit %d, %v, %+v\n%s", code, err, doc, errs)
	}
	code, table, _ := runIn("trials", "half", "--db", db)
	if code != exitOK || !strings.Contains(table, "FAILED REQUESTS") || !strings.Contains(table, "4/8") ||
		!strings.Contains(table, "trial 0 ok, but 4 of 8 requests failed (50%") {
		t.Errorf("trials table:\n%s", table)
	}
	code, _, errs = runIn("recommend", "half", "--db", db)
	if code != exitFailed || !strings.Contains(errs, "1 of 1 levels had failed requests (up to 50%") {
		t.Errorf("recommend: exit %d, %q", code, errs)
	}

	// An error budget that covers the failures: met, and said.
	db2 := filepath.Join(t.TempDir(), "s.db")
	code, out, errs = runIn("tune", writeSpec(t, strings.Replace(src, "SLO", ", error_rate: 0.6", 1)), "--db", db2)
	if code != exitOK || !strings.Contains(out, "error_rate<=60%") || !strings.Contains(out, "#   at this level 4 of 8 requests failed (50%") {
		t.Errorf("tune with error_rate 0.6: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runIn("recommend", "half", "--db", db2, "--format", "json")
	if code != exitOK || !strings.Contains(out, `"failed_requests": "4 of 8 requests failed (50%`) {
		t.Errorf("recommend --format json: exit %d\n%s", code, out)
	}
}

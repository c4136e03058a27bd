package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is an OpenAI-compatible streaming server with exact, known
// timing: the first chunk goes out TTFT after the request arrives and each
// later chunk PerToken·TokensPerChunk after the previous one, on an absolute
// schedule so that sleep overshoot never accumulates. It records when each
// chunk was actually written, the reference the timing tests compare to.
type fakeServer struct {
	TTFT           time.Duration
	PerToken       time.Duration
	Tokens         int // output tokens per request (default: max_tokens)
	TokensPerChunk int // default 1
	NoUsage        bool
	NoContinuous   bool // usage only in the final chunk
	Tokenize       bool // serve /tokenize counting words (+1 BOS)
	Mode           string
	Coalesce       bool

	mu     sync.Mutex
	byText map[string][]time.Time // prompt -> chunk write times
}

func (f *fakeServer) start(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

type fakeReq struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
	MaxComp   int    `json:"max_completion_tokens"`
	Messages  []struct {
		Content string `json:"content"`
	} `json:"messages"`
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	recv := time.Now()
	if r.URL.Path == "/tokenize" {
		if !f.Tokenize {
			http.NotFound(w, r)
			return
		}
		var q fakeReq
		_ = json.NewDecoder(r.Body).Decode(&q)
		fmt.Fprintf(w, `{"count": %d, "max_model_len": 4096, "tokens": []}`, len(strings.Fields(q.Prompt))+1)
		return
	}
	var q fakeReq
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	prompt := q.Prompt
	if len(q.Messages) > 0 {
		prompt = q.Messages[0].Content
	}
	promptTokens := len(strings.Fields(prompt))
	if f.Tokenize {
		promptTokens++ // the BOS token /tokenize counts
	}
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	n := q.MaxTokens + q.MaxComp
	if f.Tokens > 0 {
		n = f.Tokens
	}
	switch f.Mode {
	case "400":
		http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
		return
	case "500":
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case "hang":
		<-r.Context().Done()
		return
	}
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	switch f.Mode {
	case "stream_error":
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, "data: {\"error\": {\"message\": \"engine died\", \"code\": 500}}\n\n")
		fl.Flush()
		return
	case "truncated":
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}]}\n\n")
		fl.Flush()
		return
	case "empty":
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":0}}\n\ndata: [DONE]\n\n")
		fl.Flush()
		return
	case "truncated_usage":
		// Continuous usage stats on every chunk, then the stream ends
		// cleanly without finish_reason, final usage chunk or [DONE].
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\" tok\",\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n")
		fl.Flush()
		return
	case "stall":
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}]}\n\n")
		fl.Flush()
		<-r.Context().Done()
		return
	}
	per := max(f.TokensPerChunk, 1)
	chunks := (n + per - 1) / per
	sends := make([]time.Time, 0, chunks)
	buf := make([]byte, 0, 512)
	sent := 0
	for k := range chunks {
		due := recv.Add(f.TTFT + time.Duration(k*per)*f.PerToken)
		time.Sleep(time.Until(due)) // the schedule is the subject of the timing tests
		m := min(per, n-sent)
		sent += m
		finish := "null"
		if sent == n {
			finish = `"length"`
		}
		// Built by appending into one buffer: the server shares the
		// process with the client under test, so it must be cheap.
		buf = append(buf[:0], `data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,`...)
		if chat {
			buf = append(buf, `"delta":{"content":"`...)
		} else {
			buf = append(buf, `"text":"`...)
		}
		for range m {
			buf = append(buf, " tok"...)
		}
		buf = append(buf, '"')
		if chat {
			buf = append(buf, '}')
		}
		buf = append(buf, `,"finish_reason":`...)
		buf = append(buf, finish...)
		buf = append(buf, "}]"...)
		if !f.NoUsage && !f.NoContinuous {
			buf = append(buf, `,"usage":{"prompt_tokens":`...)
			buf = strconv.AppendInt(buf, int64(promptTokens), 10)
			buf = append(buf, `,"completion_tokens":`...)
			buf = strconv.AppendInt(buf, int64(sent), 10)
			buf = append(buf, '}')
		}
		buf = append(buf, "}\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return
		}
		// Flush each chunk; Coalesce flushes only when the next chunk is
		// not yet due (a busy server batches writes too).
		if next := recv.Add(f.TTFT + time.Duration((k+1)*per)*f.PerToken); !f.Coalesce || sent == n || time.Until(next) > 0 {
			fl.Flush()
		}
		sends = append(sends, time.Now())
	}
	if !f.NoUsage {
		fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", promptTokens, n, promptTokens+n)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
	f.mu.Lock()
	if f.byText == nil {
		f.byText = map[string][]time.Time{}
	}
	f.byText[prompt] = sends
	f.mu.Unlock()
}

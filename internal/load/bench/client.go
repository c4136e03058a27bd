package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/redact"
)

// newTransport returns an HTTP/1.1 transport that keeps up to idle
// connections open per host so warm-up connections are reused.
func newTransport(idle int) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		MaxIdleConns:        0, // no global cap
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // compressed SSE would delay chunks
		ForceAttemptHTTP2:   false,
		TLSHandshakeTimeout: 30 * time.Second,
		// The default 4 KiB buffers: a stream's messages are read through
		// the SSE reader's own buffer, and a level holds a connection per
		// request in flight (1,024 of them at 16 KiB each way took 32 MB).
	}
}

// newHTTPClient returns a client over newTransport(idle). Redirects are not
// followed: a streamed POST cannot be replayed.
func newHTTPClient(idle int) *http.Client {
	return &http.Client{
		Transport:     newTransport(idle),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// client sends streaming requests to one target.
type client struct {
	hc        *http.Client
	target    openai.Target
	url       string
	ignoreEOS bool
	sampling  Sampling
	readers   sync.Pool // *SSEReader, one per stream in flight
}

func newClient(hc *http.Client, t openai.Target, ignoreEOS bool, s Sampling) *client {
	return &client{hc: hc, target: t, url: t.URL(t.Path()), ignoreEOS: ignoreEOS, sampling: s,
		readers: sync.Pool{New: func() any { return &SSEReader{buf: make([]byte, 8<<10)} }}}
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type requestBody struct {
	Model               string        `json:"model"`
	Prompt              string        `json:"prompt,omitempty"`
	Messages            []chatMessage `json:"messages,omitempty"`
	MaxTokens           int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	IgnoreEOS           bool          `json:"ignore_eos,omitempty"`
	Temperature         float64       `json:"temperature"`
	TopP                *float64      `json:"top_p,omitempty"`
	TopK                *int          `json:"top_k,omitempty"`
}

// newBody is a streaming request's body without its prompt.
func (c *client) newBody() requestBody {
	return requestBody{
		Model: c.target.Model, Stream: true, IgnoreEOS: c.ignoreEOS,
		StreamOptions: streamOptions{IncludeUsage: true, ContinuousUsageStats: true},
		Temperature:   c.sampling.Temperature, TopP: c.sampling.TopP, TopK: c.sampling.TopK,
	}
}

func (c *client) body(req measure.Request) ([]byte, error) {
	b := c.newBody()
	if c.target.Chat() {
		b.Messages = []chatMessage{{Role: "user", Content: req.Prompt}}
		b.MaxCompletionTokens = req.MaxTokens
	} else {
		b.Prompt = req.Prompt
		b.MaxTokens = req.MaxTokens
	}
	return json.Marshal(b)
}

// send sends req, its body already encoded (the dispatcher encodes it
// while it waits for the send time, so sending is quick), and streams the
// response into rec. Times are offsets from start. It never returns an
// error: failures are classified in rec.
func (c *client) send(ctx context.Context, req measure.Request, body []byte, bodyErr error, start time.Time, timeout time.Duration, rec *measure.Record) {
	c.sendTo(ctx, req, body, bodyErr, start, timeout, rec, nil)
}

// sendTo is send that also writes the answer's text to answer when it is
// not nil (a conversation's next turn carries it).
func (c *client) sendTo(ctx context.Context, req measure.Request, body []byte, bodyErr error, start time.Time, timeout time.Duration, rec *measure.Record, answer *strings.Builder) {
	rec.Index, rec.PromptTokens = req.Index, req.PromptTokens
	defer func() { rec.ErrorMsg = c.redact(rec.ErrorMsg) }()
	if bodyErr != nil {
		rec.Send, rec.End = time.Since(start), time.Since(start)
		rec.Fail(measure.ErrConnect, "encode request: "+bodyErr.Error())
		return
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		rec.Send, rec.End = time.Since(start), time.Since(start)
		rec.Fail(measure.ErrConnect, err.Error())
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	c.target.Header(hreq.Header)

	rec.Send = time.Since(start)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		rec.End = time.Since(start)
		msg := redact.Message(err.Error())
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			msg = outOfFiles + ": " + msg
		}
		rec.Fail(classifyErr(rctx, measure.ErrConnect), msg)
		return
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}()
	rec.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		rec.End = time.Since(start)
		class := measure.ErrHTTP4xx
		text := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, oneLine([]byte(c.redact(serverMessage(msg)))))
		switch {
		case resp.StatusCode >= 500:
			class = measure.ErrHTTP5xx
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			class = measure.ErrRedirect
			text = fmt.Sprintf("HTTP %d: redirected to %s (redirects are not followed: give that URL as the base URL)",
				resp.StatusCode, oneLine([]byte(c.redact(resp.Header.Get("Location")))))
		}
		rec.Fail(class, text)
		return
	}
	if what, ok := eventStream(resp); !ok {
		rec.End = time.Since(start)
		rec.Fail(measure.ErrStream, c.redact(what))
		return
	}
	c.stream(rctx, resp.Body, req, start, rec, answer)
}

// outOfFiles starts the message of a request this machine could not even
// open a socket for.
const outOfFiles = "this machine ran out of file descriptors (raise ulimit -n or lower the concurrency)"

// eventStream checks that a 200 answer is a server-sent event stream. A
// server that ignores "stream": true answers one JSON document; a proxy or
// a wrong URL answers an HTML page: both are said as what they are, not as
// a stream cut short. Without a Content-Type the body decides. When ok is
// false, what describes the body instead.
func eventStream(resp *http.Response) (what string, ok bool) {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt == "text/event-stream" {
		return "", true
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(resp.Body, head)
	head = head[:n]
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if mt == "" || mt == "text/plain" {
		if bytes.HasPrefix(trimmed, []byte("data:")) || bytes.HasPrefix(trimmed, []byte(":")) || bytes.HasPrefix(trimmed, []byte("event:")) {
			return "", true
		}
	}
	switch {
	case mt == "application/json" || bytes.HasPrefix(trimmed, []byte("{")):
		return "HTTP 200 with one JSON document, not an event stream (does the server ignore \"stream\": true?): " + oneLine(trimmed), false
	case mt == "text/html" || bytes.HasPrefix(bytes.ToLower(trimmed), []byte("<!doctype html")) || bytes.HasPrefix(bytes.ToLower(trimmed), []byte("<html")):
		return "HTTP 200 with an HTML page, not an event stream (a proxy or a wrong base URL?): " + oneLine(trimmed), false
	case len(trimmed) == 0:
		return "", true // an empty stream: classified as such by stream
	}
	return fmt.Sprintf("HTTP 200 with Content-Type %q, not an event stream: %s", ct, oneLine(trimmed)), false
}

// redact removes the API key and header values from a message that came
// from the server or the transport (a server may echo what it received).
// Server text is redacted before it is shortened, so that a cut never
// leaves part of a secret behind.
func (c *client) redact(msg string) string { return c.target.Scrub(redact.Text(msg)) }

// stream reads the SSE body and classifies the outcome: the event loop
// here, each chunk's bookkeeping in streamState.add and the end-of-stream
// classification in streamState.end. The state is a value on this stack
// (no allocation per request).
func (c *client) stream(ctx context.Context, body io.Reader, req measure.Request, start time.Time, rec *measure.Record, answer *strings.Builder) {
	rd := c.readers.Get().(*SSEReader)
	defer c.readers.Put(rd)
	rd.Reset(body)

	st := streamState{contUsage: true, answer: answer}
	rec.Chunks = rec.Chunks[:0]
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || (st.usage && st.finished && ctx.Err() == nil) {
				break // a reset after the final usage loses nothing
			}
			rec.End = time.Since(start)
			rec.Fail(classifyErr(ctx, measure.ErrTruncated), "stream: "+redact.Message(err.Error()))
			return
		}
		now := time.Since(start)
		if string(ev.Type) == "error" {
			rec.End = now
			rec.Fail(measure.ErrStream, "error event: "+oneLine([]byte(c.redact(string(ev.Data)))))
			return
		}
		if bytes.Equal(ev.Data, []byte("[DONE]")) {
			break
		}
		ci, err := parseChunk(ev.Data)
		if err != nil {
			rec.End = now
			rec.Fail(measure.ErrStream, err.Error())
			return
		}
		if ci.isError {
			rec.End = now
			rec.Fail(measure.ErrStream, "error in stream: "+oneLine([]byte(c.redact(string(ci.errMsg)))))
			return
		}
		st.add(ci, now, rec)
	}
	rec.End = time.Since(start)
	st.end(rec)
}

// streamState is what the event loop keeps of one stream between chunks.
type streamState struct {
	finished, usage bool
	// contUsage: every text chunk so far carried usage
	// (continuous_usage_stats), so each chunk's token count is exact.
	contUsage bool
	// endUsage: a usage chunk without choices, the stream's final usage.
	// With continuous_usage_stats every chunk carries usage, so usage
	// alone does not show that the stream ended properly.
	endUsage       bool
	prevCompletion int
	chunkUsage     int              // chunks with a usage field
	engine         int              // text chunks with the server's own clock
	answer         *strings.Builder // when set, the answer's text is written here
}

// add records chunk ci, received at now: its text as a timed chunk, its
// usage, its finish reason.
func (st *streamState) add(ci chunkInfo, now time.Duration, rec *measure.Record) {
	if st.answer != nil && len(ci.answer) > 0 {
		writeUnescaped(st.answer, ci.answer)
	}
	if ci.textBytes > 0 {
		if len(rec.Chunks) == 0 {
			rec.First = now
		}
		rec.Last = now
		tok := 0
		if ci.hasUsage {
			tok = ci.completionTokens - st.prevCompletion
			st.chunkUsage++
		} else {
			st.contUsage = false
		}
		c := measure.Chunk{At: now, Tokens: tok}
		if ci.engineUS >= 0 {
			c.Engine = time.Duration(ci.engineUS) * time.Microsecond
			c.Lag = time.Duration(max(ci.lagUS, 0)) * time.Microsecond
			st.engine++
		}
		rec.Chunks = append(rec.Chunks, c)
	}
	if ci.hasUsage {
		st.usage = true
		if ci.choices == 0 {
			st.endUsage = true
		}
		st.prevCompletion = ci.completionTokens
		rec.OutputTokens = ci.completionTokens
		if ci.promptTokens > 0 {
			rec.PromptTokens = ci.promptTokens
		}
	}
	if ci.finished {
		st.finished = true
	}
}

// end classifies a stream that ended without an error: truncated without
// a finish reason or final usage, empty without text; else it settles the
// token counts (from usage, or one per chunk flagged as an estimate).
func (st *streamState) end(rec *measure.Record) {
	switch {
	case !st.finished && !st.endUsage:
		rec.Fail(measure.ErrTruncated, "stream ended without finish_reason or usage")
		return
	case len(rec.Chunks) == 0:
		rec.Fail(measure.ErrEmpty, "stream carried no text")
		return
	}
	if !st.usage {
		// Never assume max_tokens: without usage the count is the number of
		// text chunks, flagged as an estimate.
		rec.OutputTokens = len(rec.Chunks)
		rec.TokensEstimated = true
	}
	if !st.contUsage || st.chunkUsage == 0 {
		spreadTokens(rec.Chunks, rec.OutputTokens)
	}
	rec.EngineClock = st.engine == len(rec.Chunks)
}

// writeUnescaped writes the JSON string body v (without its quotes) to b
// as text: as it is when it holds no escape, else decoded.
func writeUnescaped(b *strings.Builder, v []byte) {
	if !bytes.ContainsRune(v, '\\') {
		b.Write(v)
		return
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, v...), '"'), &s) == nil {
		b.WriteString(s)
	}
}

// spreadTokens assigns total tokens to chunks as evenly as possible (servers
// that batch tokens send about the same number per chunk), each chunk at
// least one when total allows.
func spreadTokens(chunks []measure.Chunk, total int) {
	n := len(chunks)
	if n == 0 {
		return
	}
	prev := 0
	for j := range chunks {
		cum := int((int64(total)*int64(j+1) + int64(n)/2) / int64(n))
		chunks[j].Tokens = cum - prev
		prev = cum
	}
}

// classifyErr maps a transport error on the request's context rctx: past
// its deadline a timeout; cancelled with the run (Ctrl-C, an early stop)
// cancelled; else class.
func classifyErr(rctx context.Context, class measure.ErrorClass) measure.ErrorClass {
	switch {
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return measure.ErrTimeout
	case rctx.Err() != nil:
		return measure.ErrCancelled
	}
	return class
}

// serverMessage is the message of an error body: OpenAI-style
// {"error": {"message": ...}} or {"error": "..."}, FastAPI's {"detail":
// ...}, {"message": ...}; the body itself otherwise.
func serverMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Detail  any             `json:"detail"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return string(body)
	}
	var nested struct {
		Message string `json:"message"`
	}
	var flat string
	switch {
	case json.Unmarshal(e.Error, &nested) == nil && nested.Message != "":
		return nested.Message
	case json.Unmarshal(e.Error, &flat) == nil && flat != "":
		return flat
	case e.Message != "":
		return e.Message
	case e.Detail != nil:
		if d, ok := e.Detail.(string); ok {
			return d
		}
		b, _ := json.Marshal(e.Detail)
		return string(b)
	}
	return string(body)
}

// oneLine shortens b to one printable line.
func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

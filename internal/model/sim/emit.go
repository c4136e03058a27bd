package sim

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// The streaming fast path. A streaming request on an HTTP/1.1 connection is
// hijacked: its handler writes the response head itself and then only
// watches the connection for the client leaving, parked in the netpoller.
// The engine loop hands each step's tokens to a small fixed pool of writer
// goroutines (one per processor), each owning a fixed share of the streams;
// a writer renders every message into the stream's buffer and hands it to
// the kernel in one non-blocking write per stream per batch, framed as one
// HTTP/1.1 chunk. No goroutine wakes per message, no allocation per
// message. A client that does not keep up (its socket's send buffer full)
// never stalls a writer: what the socket did not take goes to a backlog
// that a goroutine of that stream alone drains with blocking writes. The
// response carries Connection: close and ends with the zero-length chunk, so
// any HTTP/1.1 client reads it as an ordinary chunked stream.

// wireHeadTail ends the response head the handler writes after hijacking.
const wireHeadTail = "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n"

// wireLinger bounds how long a finished stream's connection waits for the
// client to close its side before it is closed from ours.
const wireLinger = 10 * time.Second

// shutdownData is the in-stream error a stream gets when the engine stops.
const shutdownData = `data: {"error":{"message":"engine shut down","type":"InternalServerError","param":null,"code":500}}` + "\n\n"

// Wire states.
const (
	wireOpen   = iota // streaming
	wireDone          // the last chunk was written (or the shutdown error)
	wireFailed        // a write failed or the client left
)

// wire is a hijacked streaming connection.
type wire struct {
	conn  net.Conn
	rc    syscall.RawConn // nil when conn has no file descriptor
	rd    *bufio.Reader
	o     *output
	mu    sync.Mutex // guards state, the backlog and writes to conn
	state int
	// The backlog: framed bytes the socket did not take, the scheduled
	// step ends of the messages they complete, and whether they end the
	// response. A drain goroutine runs while draining is set.
	out      []byte
	outAts   []time.Time
	outLast  bool
	draining bool
	// Owned by the stream's writer goroutine.
	pend   []byte      // rendered messages not yet written
	ats    []time.Time // scheduled step ends of the messages in pend
	last   bool        // pend holds the final message
	queued bool        // the stream is on its writer's dirty list
}

// pending is one token handed from the engine loop to a writer.
type pending struct {
	st *stream
	ev event
}

// emitter is one writer goroutine's inbox. The engine appends under mu and
// never blocks; the writer swaps the slice out.
type emitter struct {
	mu   sync.Mutex
	q    []pending
	wake chan struct{}
}

func (e *emitter) put(items []pending) {
	e.mu.Lock()
	e.q = append(e.q, items...)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// runWriter is one writer goroutine: it renders and writes what the engine
// handed it until stop is closed.
func (s *Server) runWriter(e *emitter, stop <-chan struct{}) {
	var items []pending
	var dirty []*stream
	var frame []byte
	for {
		select {
		case <-stop:
			return
		case <-e.wake:
		}
		e.mu.Lock()
		items, e.q = e.q, items[:0]
		e.mu.Unlock()
		for _, it := range items {
			w := it.st.w
			if !w.queued {
				w.queued = true
				dirty = append(dirty, it.st)
			}
			w.pend = w.o.tokenChunk(w.pend, it.ev)
			if it.ev.last {
				if w.o.usage {
					w.pend = w.o.usageChunk(w.pend, it.ev.generated)
				}
				w.pend = append(w.pend, "data: [DONE]\n\n"...)
				w.last = true
			}
			w.ats = append(w.ats, it.ev.at)
		}
		clear(items)
		for _, st := range dirty {
			w := st.w
			frame = appendChunk(frame[:0], w.pend, w.last)
			w.mu.Lock()
			if w.state == wireOpen {
				n := 0
				var err error
				if !w.draining && w.rc != nil {
					n, err = writeNow(w.rc, frame)
				}
				now := time.Now()
				switch {
				case err != nil:
					w.state = wireFailed
					_ = w.conn.Close()
				case n == len(frame):
					for _, at := range w.ats {
						s.lateness.observe(now.Sub(at))
					}
					if w.last {
						w.state = wireDone
						w.finish(now)
					}
				default:
					w.out = append(w.out, frame[n:]...)
					w.outAts = append(w.outAts, w.ats...)
					w.outLast = w.last
					if !w.draining {
						w.draining = true
						go s.drain(w)
					}
				}
			}
			w.mu.Unlock()
			w.pend, w.ats, w.queued = w.pend[:0], w.ats[:0], false
		}
		clear(dirty)
		dirty = dirty[:0]
	}
}

// drain writes a stream's backlog with blocking writes until it is empty.
// A write that never completes ends when the client leaves (its handler
// closes the connection) or at shutdown.
func (s *Server) drain(w *wire) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.state == wireOpen && len(w.out) > 0 {
		buf, ats, last := w.out, w.outAts, w.outLast
		w.out, w.outAts = nil, nil
		w.mu.Unlock()
		_, err := w.conn.Write(buf)
		now := time.Now()
		w.mu.Lock()
		if w.state != wireOpen {
			break
		}
		if err != nil {
			w.state = wireFailed
			_ = w.conn.Close()
			break
		}
		for _, at := range ats {
			s.lateness.observe(now.Sub(at))
		}
		if last {
			w.state = wireDone
			w.finish(now)
		}
	}
	w.draining = false
}

// finish half-closes a completed stream so the client sees the end of the
// response, and bounds how long the handler waits for the client to close.
// The caller holds w.mu.
func (w *wire) finish(now time.Time) {
	if tc, ok := w.conn.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = w.conn.SetReadDeadline(now.Add(wireLinger))
}

// appendChunk frames data as one HTTP/1.1 chunk, followed by the last
// (zero-length) chunk when end is set.
func appendChunk(b, data []byte, end bool) []byte {
	if len(data) > 0 {
		b = strconv.AppendInt(b, int64(len(data)), 16)
		b = append(b, "\r\n"...)
		b = append(b, data...)
		b = append(b, "\r\n"...)
	}
	if end {
		b = append(b, "0\r\n\r\n"...)
	}
	return b
}

// respondWire serves a streaming request on a hijacked connection. It
// reports false, having touched nothing, when the connection cannot be
// hijacked (the caller then streams through the ResponseWriter).
func (s *Server) respondWire(w http.ResponseWriter, r *http.Request, st *stream, o *output) bool {
	hj, ok := w.(http.Hijacker)
	if !ok || r.ProtoMajor != 1 || !r.ProtoAtLeast(1, 1) {
		return false
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	o.head(nil) // prebuild the message head before the first token
	ww := &wire{conn: conn, rd: rw.Reader, o: o}
	if sc, ok := conn.(syscall.Conn); ok {
		ww.rc, _ = sc.SyscallConn()
	}
	st.w = ww
	head := make([]byte, 0, 512)
	head = append(head, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"+
		engine.SimAnswerHeader+": "+engine.SimAnswerValue+"\r\nX-Request-Id: "...)
	head = strconv.AppendInt(head, int64(st.s.id), 10)
	head = append(head, "\r\nDate: "...)
	head = time.Now().UTC().AppendFormat(head, http.TimeFormat)
	head = append(head, "\r\n"+wireHeadTail...)
	if o.chat {
		head = appendChunk(head, o.roleChunk(nil), false)
	}
	if _, err := conn.Write(head); err != nil {
		return true
	}

	// Register for the shutdown sweep, then submit to the engine.
	s.liveMu.Lock()
	if s.closing {
		s.liveMu.Unlock()
		_, _ = conn.Write(appendChunk(nil, []byte(shutdownData), true))
		return true
	}
	s.live[st] = struct{}{}
	s.liveMu.Unlock()
	defer func() {
		s.liveMu.Lock()
		delete(s.live, st)
		s.liveMu.Unlock()
	}()
	s.stamp(st, o)
	select {
	case s.in <- st:
	case <-s.done: // the shutdown sweep ends the stream
	}

	// Watch the connection: a read ends when the client leaves, when a
	// write failed, or after the stream ended and the client closed.
	buf := make([]byte, 512)
	for {
		if _, err := ww.rd.Read(buf); err != nil {
			break
		}
	}
	ww.mu.Lock()
	state := ww.state
	if state == wireOpen {
		ww.state = wireFailed
	}
	ww.mu.Unlock()
	if state != wireDone {
		s.abort(st)
	}
	return true
}

// sweepWires ends every hijacked stream still open with the shutdown error;
// streams that arrive later get it from their handler.
func (s *Server) sweepWires() {
	s.liveMu.Lock()
	s.closing = true
	live := make([]*stream, 0, len(s.live))
	for st := range s.live {
		live = append(live, st)
	}
	s.liveMu.Unlock()
	msg := appendChunk(nil, []byte(shutdownData), true)
	for _, st := range live {
		w := st.w
		w.mu.Lock()
		switch {
		case w.state != wireOpen:
		case w.draining: // a client that does not keep up gets no more
			w.state = wireFailed
			_ = w.conn.Close()
		default:
			w.state = wireDone
			_ = w.conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := w.conn.Write(msg); err == nil {
				w.finish(time.Now())
			} else {
				_ = w.conn.Close()
			}
		}
		w.mu.Unlock()
	}
}

// writerCount is the size of the writer pool: one per processor, so the
// writes of a step run in parallel and no writer waits for a processor.
func writerCount() int { return max(1, runtime.GOMAXPROCS(0)) }

package launcher

import (
	"context"
	"sync"
	"time"
)

// DefaultLogBytes is how much of an engine's output an instance keeps.
const DefaultLogBytes = 64 << 10

// TailBuffer is an io.Writer that keeps only the last max bytes written, so a
// chatty engine cannot grow memory without bound. Safe for concurrent use: the
// process's stdout and stderr copiers write to it at once.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

// NewTailBuffer keeps the last max bytes (DefaultLogBytes when max <= 0).
func NewTailBuffer(max int) *TailBuffer {
	if max <= 0 {
		max = DefaultLogBytes
	}
	return &TailBuffer{max: max}
}

// Write appends p, trimming the front once the buffer holds twice max bytes
// (amortised: a trim copies max bytes at most every max bytes written).
func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return n, nil
}

// String returns the last max bytes written.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) > b.max {
		s = s[len(s)-b.max:]
	}
	return string(s)
}

// LogFetchTimeout bounds how long an instance's Logs waits for its
// runtime (the Docker daemon, the Kubernetes API) to return the tail.
const LogFetchTimeout = 10 * time.Second

// KeptLogs is the log tail an instance keeps from the moment it removes
// its engine (a container's or pod's logs go with it). Safe for
// concurrent use; the zero value keeps nothing yet.
type KeptLogs struct {
	mu   sync.Mutex
	tail string
}

// Keep saves tail; an empty one keeps what was there.
func (k *KeptLogs) Keep(tail string) {
	if tail == "" {
		return
	}
	k.mu.Lock()
	k.tail = tail
	k.mu.Unlock()
}

// Logs is the kept tail, else what fetch reads within LogFetchTimeout.
func (k *KeptLogs) Logs(fetch func(context.Context) string) string {
	k.mu.Lock()
	kept := k.tail
	k.mu.Unlock()
	if kept != "" {
		return kept
	}
	ctx, cancel := context.WithTimeout(context.Background(), LogFetchTimeout)
	defer cancel()
	return fetch(ctx)
}

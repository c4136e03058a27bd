package launcher

import "sync"

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

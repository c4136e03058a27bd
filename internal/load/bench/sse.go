package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Event is one server-sent event. Its slices are valid until the next call
// to SSEReader.Next.
type Event struct {
	Type []byte // "event" field; empty means "message"
	Data []byte // data lines joined by "\n"
	ID   []byte // "id" field of this event, if any
}

// SSEReader parses a text/event-stream per the WHATWG HTML specification
// (section 9.2.6): lines end in CRLF, LF or CR; lines starting with ':' are
// comments; "field:value" with one optional space after the colon; several
// data lines join with "\n"; an empty line dispatches the event; an event
// with no data is not dispatched; a partial event at end of stream is
// dropped. It keeps one read buffer per stream and reuses its field buffers,
// so steady-state parsing allocates nothing per event.
//
// An SSEReader is not safe for concurrent use.
type SSEReader struct {
	r      io.Reader
	buf    []byte
	start  int // first unconsumed byte in buf
	end    int // end of valid bytes in buf
	skipLF bool
	bomOK  bool // leading byte order mark handled
	err    error

	data  []byte
	typ   []byte
	id    []byte
	nData int // data lines in the pending event
}

// maxSSELine bounds one line so a broken server cannot exhaust memory.
const maxSSELine = 16 << 20

// NewSSEReader returns a reader with a 32 KiB buffer that grows only for
// longer lines.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: r, buf: make([]byte, 32<<10)}
}

// Reset makes s read a new stream, keeping its buffers.
func (s *SSEReader) Reset(r io.Reader) {
	s.r, s.start, s.end, s.skipLF, s.bomOK, s.err = r, 0, 0, false, false, nil
	s.data, s.typ, s.id, s.nData = s.data[:0], s.typ[:0], s.id[:0], 0
}

// Next returns the next event. At the end of the stream it returns io.EOF
// (a trailing event without its blank line is dropped, per the spec); read
// errors are returned as they come.
func (s *SSEReader) Next() (Event, error) {
	for {
		line, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if s.nData == 0 {
				s.typ = s.typ[:0]
				continue
			}
			ev := Event{Type: s.typ, Data: s.data, ID: s.id}
			// The event aliases the field buffers; it is valid only until
			// the next call, as documented, so they are reused from here.
			s.data, s.typ, s.nData = s.data[:0], s.typ[:0], 0
			return ev, nil
		}
		if line[0] == ':' {
			continue // comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) { // no allocation: compiler optimises the conversion
		case "data":
			if s.nData > 0 {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			s.nData++
		case "event":
			s.typ = append(s.typ[:0], value...)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.id = append(s.id[:0], value...)
			}
		}
		// "retry" and unknown fields are ignored.
	}
}

// line returns the next line without its terminator; the slice is valid
// until the next call.
func (s *SSEReader) line() ([]byte, error) {
	for {
		if !s.bomOK && (s.end-s.start >= 3 || s.err != nil) {
			if bytes.HasPrefix(s.buf[s.start:s.end], []byte("\xef\xbb\xbf")) {
				s.start += 3
			}
			s.bomOK = true
		}
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		if i := indexEOL(s.buf[s.start:s.end]); s.bomOK && i >= 0 {
			line := s.buf[s.start : s.start+i]
			if s.buf[s.start+i] == '\r' {
				s.skipLF = true
			}
			s.start += i + 1
			return line, nil
		}
		if s.err != nil {
			// A final line without terminator ends the stream: the spec
			// drops the incomplete event.
			return nil, s.err
		}
		if err := s.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes, compacting or growing the buffer first.
func (s *SSEReader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxSSELine {
			return fmt.Errorf("%w: line longer than %d bytes", ErrBadSSE, maxSSELine)
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.EOF
		}
		s.err = err
		if n == 0 {
			// Bytes left over form an unterminated line: dropped.
			return err
		}
	}
	return nil
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	// Scan for LF first (the common terminator, vectorised), then check
	// for an earlier CR only in the prefix.
	i := bytes.IndexByte(b, '\n')
	lim := b
	if i >= 0 {
		lim = b[:i]
	}
	if j := bytes.IndexByte(lim, '\r'); j >= 0 {
		return j
	}
	return i
}

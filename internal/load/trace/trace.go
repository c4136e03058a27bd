package trace

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/servetune/servetune/internal/registry"
)

// Format names a trace file format.
type Format string

// The formats Read understands (the package doc describes each).
const (
	FormatMooncake Format = "mooncake"
	FormatAzure    Format = "azure"
	FormatBurstGPT Format = "burstgpt"
	FormatJSONL    Format = "jsonl"
)

// Formats lists every format, in the order help text shows them.
var Formats = []Format{FormatMooncake, FormatAzure, FormatBurstGPT, FormatJSONL}

// ParseFormat returns the format named s, or an error naming the known ones.
func ParseFormat(s string) (Format, error) {
	return registry.Parse("trace format", s, Formats)
}

// MooncakeBlockSize is the number of tokens one Mooncake hash id stands for.
const MooncakeBlockSize = 512

// Request is one request of a trace.
type Request struct {
	// Offset is the send time from the start of the (windowed, compressed)
	// trace.
	Offset time.Duration
	// Input and Output are the prompt's and the answer's token counts.
	Input, Output int
	// HashIDs name the prompt's token blocks in order, BlockSize tokens
	// each (the last may be partial); equal ids are equal blocks. Nil when
	// the format has none.
	HashIDs   []int64
	BlockSize int
}

// Options select and reshape the requests Read returns.
type Options struct {
	// Speed compresses time: each offset is divided by it (0 means 1).
	Speed float64
	// Start and Duration pick a window of the trace in its own time, from
	// the first request: requests with Start <= offset < Start+Duration
	// (Duration 0: to the end). Offsets are re-based to Start.
	Start, Duration time.Duration
	// Max keeps at most this many requests (0: all).
	Max int
}

// A window that holds no request yields none, without an error: the
// caller, which knows what the window was for, says so.

// Error is a problem with a trace file: one line naming the file, the line
// (1-based; 0 when the problem is not on one line) and the problem.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Load reads the trace file at path (see Read).
func Load(path string, f Format, o Options) ([]Request, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return Read(file, path, f, o)
}

// raw is one parsed line before the options apply: its timestamp in the
// format's own time and the line it came from.
type raw struct {
	at   time.Duration
	line int
	req  Request
}

// Read parses a trace of format f from r; name is the file's name in errors.
// It stops reading at the end of the window or at Max requests (the
// timestamps being in order, nothing later can be kept), so a window of a
// week-long trace costs what the window holds.
func Read(r io.Reader, name string, f Format, o Options) ([]Request, error) {
	if _, err := ParseFormat(string(f)); err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if o.Speed < 0 || math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0) {
		return nil, &Error{File: name, Msg: fmt.Sprintf("speed %g is not a positive number", o.Speed)}
	}
	if o.Start < 0 || o.Duration < 0 || o.Max < 0 {
		return nil, &Error{File: name, Msg: "start, duration and max must not be negative"}
	}
	c := &collector{o: o, speed: o.Speed}
	if c.speed == 0 {
		c.speed = 1
	}
	var err error
	switch f {
	case FormatMooncake, FormatJSONL:
		err = readJSONL(r, f, c.add)
	case FormatAzure, FormatBurstGPT:
		err = readCSV(r, f, c.add)
	}
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.File = name
			return nil, e
		}
		return nil, &Error{File: name, Msg: err.Error()}
	}
	return c.out, nil
}

// MaxWindowHashIDs bounds the hash ids a window keeps (16 MB of them, a
// billion prompt tokens in 512-token blocks; Mooncake's published
// conversation trace has about 425,000): past it a window is refused, so a
// trace file of hundreds of megabytes of ids is not held whole.
const MaxWindowHashIDs = 1 << 21

// collector checks the order of the parsed rows and windows, re-bases,
// compresses and caps them as they come.
type collector struct {
	o     Options
	speed float64
	first time.Duration
	prev  *raw
	out   []Request
	ids   int // hash ids kept
}

// add takes the next row; done when no later row can be kept.
func (c *collector) add(row raw) (done bool, err error) {
	if c.prev == nil {
		c.first = row.at
	} else if row.at < c.prev.at {
		return true, &Error{Line: row.line, Msg: fmt.Sprintf(
			"timestamp goes back: %v before line %d's", c.prev.at-row.at, c.prev.line)}
	}
	c.prev = &row
	off := row.at - c.first
	if c.o.Duration > 0 && off >= c.o.Start+c.o.Duration {
		return true, nil
	}
	if off < c.o.Start {
		return false, nil
	}
	q := row.req
	if c.ids += len(q.HashIDs); c.ids > MaxWindowHashIDs {
		return true, &Error{Line: row.line, Msg: fmt.Sprintf(
			"the window holds over %d hash ids; narrow it (start, duration) or cap its requests", MaxWindowHashIDs)}
	}
	q.Offset = time.Duration(float64(off-c.o.Start) / c.speed)
	c.out = append(c.out, q)
	return c.o.Max > 0 && len(c.out) == c.o.Max, nil
}

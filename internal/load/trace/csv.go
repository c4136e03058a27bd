package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// columns of the CSV formats: the ones a trace must have and the ones it
// may have besides.
var (
	azureCols    = []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
	burstCols    = []string{"Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"}
	burstOptCols = []string{"Session ID", "Elapsed time"}
)

// azureLayouts are the Azure traces' TIMESTAMP forms; time.Parse accepts
// the fraction of a second (seven digits in the 2023 trace) without it
// being in the layout.
var azureLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05 Z07:00"}

// errLongRecord is a CSV record (a line, or the lines an open quote
// joins) over MaxLine bytes.
var errLongRecord = fmt.Errorf("a record over %d bytes (the cap on one line; an unclosed quote joins every line after it)", MaxLine)

// boundedReader fails once more than MaxLine bytes (plus the CSV reader's
// buffer) were read past the end of the last whole record, so a file with
// no line end or an open quote is refused at the cap rather than read
// into memory whole.
type boundedReader struct {
	r          io.Reader
	read, mark int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.read-b.mark > MaxLine+64<<10 {
		return 0, errLongRecord
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func readCSV(r io.Reader, f Format, add func(raw) (bool, error)) error {
	br := &boundedReader{r: r}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	header, err := cr.Read()
	br.mark = cr.InputOffset()
	if err == io.EOF {
		return &Error{Line: 1, Msg: "empty file: no header"}
	}
	if errors.Is(err, errLongRecord) {
		return &Error{Line: 1, Msg: errLongRecord.Error()}
	}
	if err != nil {
		return csvProblem(err)
	}
	header = slices.Clone(header) // the reader reuses its record
	need, may := azureCols, []string(nil)
	if f == FormatBurstGPT {
		need, may = burstCols, burstOptCols
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if !slices.Contains(need, h) && !slices.Contains(may, h) {
			return &Error{Line: 1, Msg: fmt.Sprintf("unknown column %q (%s has %s)", h, f, strings.Join(slices.Concat(need, may), ", "))}
		}
		if _, dup := col[h]; dup {
			return &Error{Line: 1, Msg: fmt.Sprintf("column %q twice", h)}
		}
		col[h] = i
	}
	for _, h := range need {
		if _, ok := col[h]; !ok {
			return &Error{Line: 1, Msg: fmt.Sprintf("missing column %q", h)}
		}
	}
	tsCol, inCol, outCol := col["TIMESTAMP"], col["ContextTokens"], col["GeneratedTokens"]
	if f == FormatBurstGPT {
		tsCol, inCol, outCol = col["Timestamp"], col["Request tokens"], col["Response tokens"]
	}
	var origin time.Time
	last := 1 // the line of the last whole record
	for first := true; ; first = false {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if errors.Is(err, errLongRecord) {
				return &Error{Line: last + 1, Msg: errLongRecord.Error()}
			}
			return csvProblem(err)
		}
		br.mark = cr.InputOffset()
		line, _ := cr.FieldPos(0)
		last = line
		fail := func(format string, a ...any) error {
			return &Error{Line: line, Msg: fmt.Sprintf(format, a...)}
		}
		var at time.Duration
		ts := strings.TrimSpace(rec[tsCol])
		if f == FormatAzure {
			t, err := azureTime(ts)
			if err != nil {
				return fail("TIMESTAMP %q: not a time like 2023-11-16 18:15:46.6805900", ts)
			}
			if first {
				origin = t
			}
			// Times before the first are kept negative so the order
			// check in Read names them.
			at = t.Sub(origin)
		} else {
			v, err := strconv.ParseFloat(ts, 64)
			if err == nil {
				at, err = duration(v, float64(time.Second))
			}
			if err != nil {
				return fail("Timestamp %q: not seconds", ts)
			}
		}
		in, err := count(rec[inCol])
		if err != nil {
			return fail("%s: %v", header[inCol], err)
		}
		out, err := count(rec[outCol])
		if err != nil {
			return fail("%s: %v", header[outCol], err)
		}
		if err := lengths(header[inCol], in, header[outCol], out); err != nil {
			return fail("%v", err)
		}
		if done, err := add(raw{at: at, line: line, req: Request{Input: in, Output: out}}); done || err != nil {
			return err
		}
	}
}

func azureTime(s string) (time.Time, error) {
	var err error
	for _, l := range azureLayouts {
		var t time.Time
		if t, err = time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// count reads a token count: an integer, or a number with no fraction
// (some exports write 472.0).
func count(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("missing")
	}
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != float64(int(v)) {
		return 0, fmt.Errorf("%q is not a token count", s)
	}
	return int(v), nil
}

func csvProblem(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{Line: pe.Line, Msg: "malformed CSV: " + pe.Err.Error()}
	}
	return err
}

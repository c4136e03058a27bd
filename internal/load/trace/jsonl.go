package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"
)

// mooncakeLine and plainLine are the formats' keys; pointers tell a
// missing key from a zero.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

type plainLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputTokens  *int     `json:"input_tokens"`
	OutputTokens *int     `json:"output_tokens"`
	HashIDs      []int64  `json:"hash_ids"`
}

func readJSONL(r io.Reader, f Format, add func(raw) (bool, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		b := sc.Bytes()
		if n == 1 {
			// A byte-order mark, as Windows editors write: the CSV
			// reader accepts one too.
			b = bytes.TrimPrefix(b, []byte("\ufeff"))
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		row, err := jsonRow(b, f)
		if err != nil {
			return &Error{Line: n, Msg: err.Error()}
		}
		row.line = n
		if done, err := add(row); done || err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &Error{Line: n + 1, Msg: fmt.Sprintf("line over %d bytes (the cap on one line)", MaxLine)}
		}
		return &Error{Line: n + 1, Msg: err.Error()}
	}
	return nil
}

func jsonRow(b []byte, f Format) (raw, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ts *float64
	var in, out *int
	var ids []int64
	// The timestamp's unit: Mooncake's are milliseconds, the plain
	// format's seconds.
	unit := float64(time.Millisecond)
	keys := [3]string{"timestamp", "input_length", "output_length"}
	if f == FormatMooncake {
		var l mooncakeLine
		if err := dec.Decode(&l); err != nil {
			return raw{}, jsonProblem(err)
		}
		ts, in, out, ids = l.Timestamp, l.InputLength, l.OutputLength, l.HashIDs
	} else {
		var l plainLine
		if err := dec.Decode(&l); err != nil {
			return raw{}, jsonProblem(err)
		}
		ts, in, out, ids = l.Timestamp, l.InputTokens, l.OutputTokens, l.HashIDs
		unit = float64(time.Second)
		keys = [3]string{"timestamp", "input_tokens", "output_tokens"}
	}
	if dec.More() {
		return raw{}, fmt.Errorf("more than one JSON value on the line")
	}
	for i, p := range []bool{ts == nil, in == nil, out == nil} {
		if p {
			return raw{}, fmt.Errorf("missing %q", keys[i])
		}
	}
	at, err := duration(*ts, unit)
	if err != nil {
		return raw{}, fmt.Errorf("%s: %v", keys[0], err)
	}
	if err := lengths(keys[1], *in, keys[2], *out); err != nil {
		return raw{}, err
	}
	q := Request{Input: *in, Output: *out}
	if ids != nil {
		// Each id stands for a block of the prompt: more ids than the
		// prompt has blocks name tokens it does not have.
		if most := (*in + MooncakeBlockSize - 1) / MooncakeBlockSize; len(ids) > most {
			return raw{}, fmt.Errorf("%d hash ids for %s %d: at most %d (one per %d tokens)", len(ids), keys[1], *in, most, MooncakeBlockSize)
		}
		q.HashIDs, q.BlockSize = ids, MooncakeBlockSize
	}
	return raw{at: at, req: q}, nil
}

// jsonProblem shortens encoding/json's messages to the problem.
func jsonProblem(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Go's wording names the struct; the user wrote a key.
		want := "number"
		if te.Type.Kind() == reflect.Slice {
			want = "list of integers"
		}
		return fmt.Errorf("%q: want a %s, got %s", te.Field, want, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return fmt.Errorf("malformed JSON: %s", msg)
}

// duration converts a timestamp in units of unit, refusing what is not a
// finite, non-negative time. It rounds to the microsecond: epoch seconds
// in a float64 carry no finer digits.
func duration(v, unit float64) (time.Duration, error) {
	us := v * unit / float64(time.Microsecond)
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || us > math.MaxInt64/1000 {
		return 0, fmt.Errorf("%v is not a time", v)
	}
	return time.Duration(math.Round(us)) * time.Microsecond, nil
}

// MaxLength bounds a request's input and output lengths: ten million
// tokens, the longest context any model publishes, as bench's --input-len
// (internal/load/bench/dist.go MaxLen). Past it one line would make a
// prompt of gigabytes before any server could refuse it.
const MaxLength = 10_000_000

// MaxLine bounds one line of a trace (a record of the CSV formats): a
// line of MaxLength input tokens has 19,532 hash ids, under 400 KB
// however they are written, and a CSV row is under a hundred bytes.
const MaxLine = 1 << 20

func lengths(inName string, in int, outName string, out int) error {
	for _, c := range []struct {
		name string
		v    int
	}{{inName, in}, {outName, out}} {
		if c.v < 0 {
			return fmt.Errorf("%s %d is negative", c.name, c.v)
		}
		if c.v > MaxLength {
			return fmt.Errorf("%s %d is over %d tokens", c.name, c.v, MaxLength)
		}
	}
	return nil
}

package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

// maxLine bounds one JSON line (a 2M-token prompt's hash ids fit).
const maxLine = 64 << 20

func readJSONL(r io.Reader, f Format, add func(raw) (bool, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
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
		q.HashIDs, q.BlockSize = ids, MooncakeBlockSize
	}
	return raw{at: at, req: q}, nil
}

// jsonProblem shortens encoding/json's messages to the problem.
func jsonProblem(err error) error {
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

func lengths(inName string, in int, outName string, out int) error {
	if in < 0 {
		return fmt.Errorf("%s %d is negative", inName, in)
	}
	if out < 0 {
		return fmt.Errorf("%s %d is negative", outName, out)
	}
	return nil
}

package trace

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Every format refuses a length past MaxLength, naming the cap, before
// anything is built from it (a line of input_length 1e9 ran out of memory
// in Prompts).
func TestLengthCap(t *testing.T) {
	for _, c := range []struct {
		f    Format
		text string
	}{
		{FormatMooncake, `{"timestamp": 1, "input_length": 1000000000, "output_length": 1}`},
		{FormatJSONL, `{"timestamp": 1, "input_tokens": 1, "output_tokens": 1000000000}`},
		{FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1000000000,44\n"},
		{FormatBurstGPT, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,1000000000,490,Conversation log\n"},
	} {
		_, err := Read(strings.NewReader(c.text), "t", c.f, Options{})
		if err == nil || !strings.Contains(err.Error(), "is over 10000000 tokens") {
			t.Errorf("%s: %v, want the 10000000-token cap named", c.f, err)
		}
	}
}

// Hash ids past the prompt's blocks are refused with the cap (7 million
// ids on a 100-token line took 1.8 GB).
func TestHashIDCap(t *testing.T) {
	line := `{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [1,2,3]}`
	_, err := Read(strings.NewReader(line), "t", FormatMooncake, Options{})
	if err == nil || !strings.Contains(err.Error(), "3 hash ids for input_length 1024: at most 2") {
		t.Errorf("got %v", err)
	}
	ok := `{"timestamp": 1, "input_length": 1025, "output_length": 1, "hash_ids": [1,2,3]}`
	if _, err := Read(strings.NewReader(ok), "t", FormatMooncake, Options{}); err != nil {
		t.Errorf("a partial last block: %v", err)
	}
}

// countingReader counts what a reader took from its source.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// zeros is /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A source with no line end (/dev/zero) or a CSV quote that never closes
// is refused at MaxLine, having read little more than it (the CSV reader
// read 2.8 GB of /dev/zero, and 920 MB of a 200 MB file with an open quote).
func TestLineCap(t *testing.T) {
	openQuote := "TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023-11-16" + strings.Repeat("x\n", 4<<20)
	for _, c := range []struct {
		f   Format
		src func() io.Reader
	}{
		{FormatMooncake, func() io.Reader { return zeros{} }},
		{FormatJSONL, func() io.Reader { return zeros{} }},
		{FormatAzure, func() io.Reader { return zeros{} }},
		{FormatBurstGPT, func() io.Reader { return zeros{} }},
		{FormatAzure, func() io.Reader { return strings.NewReader(openQuote) }},
		{FormatAzure, func() io.Reader {
			return io.MultiReader(strings.NewReader("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n"), zeros{})
		}},
	} {
		cr := &countingReader{r: c.src()}
		_, err := Read(cr, "t", c.f, Options{})
		if err == nil || !strings.Contains(err.Error(), "over 1048576 bytes (the cap on one line") {
			t.Errorf("%s: %v, want the line cap named", c.f, err)
		}
		if cr.n > 3*MaxLine {
			t.Errorf("%s: read %d bytes to refuse it", c.f, cr.n)
		}
	}
}

// A JSONL trace may start with a UTF-8 byte-order mark, as a CSV may.
func TestJSONLByteOrderMark(t *testing.T) {
	text := "\ufeff" + `{"timestamp": 1, "input_length": 5, "output_length": 6, "hash_ids": [1]}` + "\n"
	reqs, err := Read(bytes.NewReader([]byte(text)), "t", FormatMooncake, Options{})
	if err != nil || len(reqs) != 1 || reqs[0].Input != 5 {
		t.Errorf("%v %+v", err, reqs)
	}
}

// A timestamp of the wrong type is named by its key, in plain words
// (it printed Go's "cannot unmarshal ... into Go struct field plainLine.timestamp").
func TestJSONLTypeMessage(t *testing.T) {
	_, err := Read(strings.NewReader(`{"timestamp": "NaN", "input_tokens": 1, "output_tokens": 1}`), "t.jsonl", FormatJSONL, Options{})
	if err == nil || err.Error() != `t.jsonl:1: "timestamp": want a number, got string` {
		t.Errorf("got %v", err)
	}
}

// A window of more than MaxWindowHashIDs hash ids is refused naming the
// cap, having kept no more than it.
func TestWindowHashIDCap(t *testing.T) {
	ids := strings.TrimSuffix(strings.Repeat("7,", 2000), ",")
	line := `{"timestamp": 1, "input_length": 1024000, "output_length": 1, "hash_ids": [` + ids + "]}\n"
	n := MaxWindowHashIDs/2000 + 2
	_, err := Read(strings.NewReader(strings.Repeat(line, n)), "t", FormatMooncake, Options{})
	if err == nil || !strings.Contains(err.Error(), "the window holds over 2097152 hash ids") {
		t.Errorf("got %v", err)
	}
	if _, err := Read(strings.NewReader(strings.Repeat(line, n)), "t", FormatMooncake, Options{Max: 10}); err != nil {
		t.Errorf("a capped window: %v", err)
	}
}

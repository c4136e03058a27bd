package bench

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ typ, data, id string }

// readAll parses r to the end.
func readAll(r io.Reader) ([]ev, error) {
	s := NewSSEReader(r)
	var out []ev
	for {
		e, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev{string(e.Type), string(e.Data), string(e.ID)})
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"one event", "data: hello\n\n", []ev{{"", "hello", ""}}},
		{"no space after colon", "data:hello\n\n", []ev{{"", "hello", ""}}},
		{"only one space removed", "data:  two\n\n", []ev{{"", " two", ""}}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"", "a", ""}, {"", "b", ""}}},
		{"CR only", "data: a\r\rdata: b\r\r", []ev{{"", "a", ""}, {"", "b", ""}}},
		{"comments", ": ping\n:\ndata: x\n: another\n\n", []ev{{"", "x", ""}}},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []ev{{"", "a\nb\n", ""}}},
		{"event type", "event: error\ndata: {\"x\":1}\n\n", []ev{{"error", `{"x":1}`, ""}}},
		{"type resets", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{"a", "1", ""}, {"", "2", ""}}},
		{"no data, no event", "event: x\n\ndata: y\n\n", []ev{{"", "y", ""}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []ev{{"", "a", "7"}, {"", "b", "7"}}},
		{"unknown fields ignored", "retry: 10\nfoo: bar\ndata: z\n\n", []ev{{"", "z", ""}}},
		{"partial event dropped at EOF", "data: a\n\ndata: b\n", []ev{{"", "a", ""}}},
		{"empty data line dispatches", "data:\n\n", []ev{{"", "", ""}}},
		{"BOM", "\xef\xbb\xbfdata: a\n\n", []ev{{"", "a", ""}}},
		{"vLLM stream", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", []ev{{"", `{"choices":[]}`, ""}, {"", "[DONE]", ""}}},
		{"several events in one read", "data: 1\n\ndata: 2\n\ndata: 3\n\n", []ev{{"", "1", ""}, {"", "2", ""}, {"", "3", ""}}},
	}
	readers := map[string]func(string) io.Reader{
		"whole":     func(s string) io.Reader { return strings.NewReader(s) },
		"bytewise":  func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":      func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+eof":  func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		"splitting": func(s string) io.Reader { return &splitReader{data: []byte(s), sizes: []byte{3, 1, 7, 2}} },
	}
	for _, tc := range tests {
		for rname, mk := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(mk(tc.in))
				if err != nil {
					t.Fatal(err)
				}
				if !equalEvents(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	got, err := readAll(strings.NewReader("data: " + long + "\n\ndata: b\n\n"))
	if err != nil || len(got) != 2 || got[0].data != long {
		t.Fatalf("long line: %d events, err %v", len(got), err)
	}
}

func TestSSEReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	_, err := readAll(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
}

func equalEvents(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// splitReader returns data in reads of the given sizes, cycling.
type splitReader struct {
	data  []byte
	sizes []byte
	k     int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.k%len(r.sizes)])%16 + 1
		r.k++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// refParse is a literal transcription of the specification's algorithm over
// the whole input, the oracle for the fuzz test.
func refParse(in string) []ev {
	in = strings.TrimPrefix(in, "\xef\xbb\xbf")
	var lines []string
	complete := false
	for len(in) > 0 {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // unterminated last line: stream ended mid-line
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	_ = complete
	var out []ev
	var data, typ, id string
	hasData := false
	for _, l := range lines {
		if l == "" {
			if hasData {
				out = append(out, ev{typ, strings.TrimSuffix(data, "\n"), id})
			}
			data, typ, hasData = "", "", false
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value := l, ""
		if i := strings.IndexByte(l, ':'); i >= 0 {
			field, value = l[:i], strings.TrimPrefix(l[i+1:], " ")
		}
		switch field {
		case "data":
			data += value + "\n"
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	return out
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "data:a\r\n\r\n", ": c\ndata: x\ndata: y\n\n", "event: error\ndata: 1\r\r",
		"id: 1\ndata\n\n", "\xef\xbb\xbfdata: z\n\n", "data: a\r", "data: [DONE]\n\n",
	} {
		f.Add([]byte(s), []byte{1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		want := refParse(string(in))
		got, err := readAll(&splitReader{data: bytes.Clone(in), sizes: sizes})
		if err != nil {
			t.Fatal(err)
		}
		if !equalEvents(got, want) {
			t.Fatalf("input %q split %v:\n got %q\nwant %q", in, sizes, got, want)
		}
	})
}

// BenchmarkSSEReader parses vLLM-shaped completion chunks; one op is one
// event (SSE framing plus the chunk's JSON fields), so allocs/op is
// allocations per event.
func BenchmarkSSEReader(b *testing.B) {
	chunk := "data: {\"id\":\"cmpl-8\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" the\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":1024,\"completion_tokens\":17,\"total_tokens\":1041}}\n\n"
	stream := []byte(strings.Repeat(chunk, 256))
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	s := NewSSEReader(nil)
	var r bytes.Reader
	r.Reset(stream)
	s.Reset(&r)
	for b.Loop() {
		e, err := s.Next()
		if err == io.EOF {
			r.Reset(stream)
			s.Reset(&r)
			e, err = s.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		if _, err := parseChunk(e.Data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

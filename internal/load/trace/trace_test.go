package trace

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSamples(t *testing.T) {
	for _, c := range []struct {
		file       string
		f          Format
		n          int
		first      Request
		lastOffset time.Duration
		blocks     bool
	}{
		{"testdata/mooncake.jsonl", FormatMooncake, 36, Request{Input: 3037, Output: 463, BlockSize: 512}, 0, true},
		{"testdata/azure.csv", FormatAzure, 36, Request{Input: 4097, Output: 257}, 0, false},
		{"testdata/burstgpt.csv", FormatBurstGPT, 36, Request{Input: 287, Output: 537}, 0, false},
		{"testdata/plain.jsonl", FormatJSONL, 30, Request{Input: 1096, Output: 230}, 0, false},
	} {
		reqs, err := Load(c.file, c.f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != c.n {
			t.Errorf("%s: %d requests, want %d", c.file, len(reqs), c.n)
			continue
		}
		got := reqs[0]
		if got.Offset != 0 || got.Input != c.first.Input || got.Output != c.first.Output || got.BlockSize != c.first.BlockSize {
			t.Errorf("%s: first request %+v, want %+v", c.file, got, c.first)
		}
		if c.blocks != (got.HashIDs != nil) {
			t.Errorf("%s: hash ids %v", c.file, got.HashIDs)
		}
		for i := 1; i < len(reqs); i++ {
			if reqs[i].Offset < reqs[i-1].Offset {
				t.Errorf("%s: offset %d goes back", c.file, i)
			}
		}
		if reqs[len(reqs)-1].Offset <= 0 {
			t.Errorf("%s: the last offset is %v", c.file, reqs[len(reqs)-1].Offset)
		}
	}
}

// The formats' time units: Mooncake milliseconds, Azure a wall clock,
// BurstGPT and the plain format seconds; offsets count from the first.
func TestTimeUnits(t *testing.T) {
	for _, c := range []struct {
		f    Format
		text string
		want time.Duration
	}{
		{FormatMooncake, `{"timestamp": 100, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" +
			`{"timestamp": 3152, "input_length": 1, "output_length": 1, "hash_ids": [2]}`, 3052 * time.Millisecond},
		{FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
			4314579 * time.Microsecond},
		{FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,374,44\n2024-05-10 00:00:01.5+00:00,396,109\n",
			1490070 * time.Microsecond},
		{FormatBurstGPT, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,230,1317,API log\n",
			40 * time.Second},
		{FormatBurstGPT, "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n5.5,a,1,ChatGPT,472,18,490,Conversation log\n6,b,2,GPT-4,1087,230,1317,API log\n",
			500 * time.Millisecond},
		{FormatJSONL, `{"timestamp": 1700000000.25, "input_tokens": 5, "output_tokens": 6}` + "\n" +
			`{"timestamp": 1700000001, "input_tokens": 5, "output_tokens": 6}`, 750 * time.Millisecond},
	} {
		reqs, err := Read(strings.NewReader(c.text), "t", c.f, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.f, err)
		}
		if len(reqs) != 2 || reqs[1].Offset != c.want {
			t.Errorf("%s: %+v, want the second at %v", c.f, reqs, c.want)
		}
	}
}

func TestOptions(t *testing.T) {
	all, err := Load("testdata/burstgpt.csv", FormatBurstGPT, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := Load("testdata/burstgpt.csv", FormatBurstGPT, Options{Speed: 4})
	for i := range all {
		if fast[i].Offset != all[i].Offset/4 {
			t.Fatalf("speed 4: request %d at %v, want %v", i, fast[i].Offset, all[i].Offset/4)
		}
	}
	start, dur := 20*time.Second, 30*time.Second
	win, _ := Load("testdata/burstgpt.csv", FormatBurstGPT, Options{Start: start, Duration: dur, Speed: 2})
	var want []Request
	for _, q := range all {
		if q.Offset >= start && q.Offset < start+dur {
			q.Offset = (q.Offset - start) / 2
			want = append(want, q)
		}
	}
	if len(want) == 0 || len(want) == len(all) || !slices.EqualFunc(win, want, equalRequest) {
		t.Errorf("window: %+v, want %+v", win, want)
	}
	capped, _ := Load("testdata/burstgpt.csv", FormatBurstGPT, Options{Max: 5})
	if len(capped) != 5 || !slices.EqualFunc(capped, all[:5], equalRequest) {
		t.Errorf("max 5: %+v", capped)
	}
	if _, err := Read(strings.NewReader(""), "t", "sharegpt", Options{}); err == nil || !strings.Contains(err.Error(), `unknown trace format "sharegpt"`) {
		t.Errorf("unknown format: %v", err)
	}
	for _, o := range []Options{{Speed: -1}, {Speed: math.Inf(1)}, {Start: -time.Second}, {Duration: -1}, {Max: -1}} {
		if _, err := Read(strings.NewReader(""), "t", FormatJSONL, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := ParseFormat("azure"); err != nil {
		t.Error(err)
	}
}

// Reading stops at the window's end and at Max: a week-long trace's first
// minutes cost what they hold, and what lies after them is not read.
func TestReadStopsAtTheWindow(t *testing.T) {
	text := "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
		"0,ChatGPT,1,2,3,API log\n1,ChatGPT,1,2,3,API log\n2,ChatGPT,1,2,3,API log\n\"broken\n"
	for _, c := range []struct {
		o Options
		n int
	}{{Options{Duration: 2 * time.Second}, 2}, {Options{Max: 2}, 2}, {Options{Start: time.Second, Duration: time.Second}, 1}} {
		reqs, err := Read(strings.NewReader(text), "t", FormatBurstGPT, c.o)
		if err != nil || len(reqs) != c.n {
			t.Errorf("%+v: %d requests, %v; want %d", c.o, len(reqs), err, c.n)
		}
	}
	if _, err := Read(strings.NewReader(text), "t", FormatBurstGPT, Options{Duration: 5 * time.Second}); err == nil {
		t.Error("a window past the broken line read no error")
	}
}

func equalRequest(a, b Request) bool {
	return a.Offset == b.Offset && a.Input == b.Input && a.Output == b.Output &&
		a.BlockSize == b.BlockSize && slices.Equal(a.HashIDs, b.HashIDs)
}

func TestBadTraces(t *testing.T) {
	const (
		azH = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
		bgH = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
		mc  = `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}` + "\n"
		pl  = `{"timestamp": 0, "input_tokens": 10, "output_tokens": 5}` + "\n"
	)
	for _, c := range []struct {
		name, text string
		f          Format
		line       int
		problem    string
	}{
		{"mooncake unsorted", mc + `{"timestamp": 2000, "input_length": 1, "output_length": 1, "hash_ids": [2]}` + "\n" +
			`{"timestamp": 1000, "input_length": 1, "output_length": 1, "hash_ids": [3]}`, FormatMooncake, 3, "timestamp goes back: 1s before line 2's"},
		{"mooncake negative input", mc + `{"timestamp": 1, "input_length": -4, "output_length": 1}`, FormatMooncake, 2, "input_length -4 is negative"},
		{"mooncake negative output", mc + `{"timestamp": 1, "input_length": 4, "output_length": -1}`, FormatMooncake, 2, "output_length -1 is negative"},
		{"mooncake missing length", mc + "\n" + `{"timestamp": 1, "input_length": 4}`, FormatMooncake, 3, `missing "output_length"`},
		{"mooncake missing timestamp", `{"input_length": 4, "output_length": 1}`, FormatMooncake, 1, `missing "timestamp"`},
		{"mooncake unknown key", mc + `{"timestamp": 1, "input_length": 4, "output_length": 1, "prompt": "hi"}`, FormatMooncake, 2, `unknown field "prompt"`},
		{"mooncake malformed", mc + `{"timestamp": 1, "input_length": 4,`, FormatMooncake, 2, "malformed JSON"},
		{"mooncake wrong type", `{"timestamp": "0", "input_length": 4, "output_length": 1}`, FormatMooncake, 1, `"timestamp": want a number, got string`},
		{"mooncake two values", `{"timestamp": 0, "input_length": 4, "output_length": 1} {}`, FormatMooncake, 1, "more than one JSON value"},
		{"mooncake negative time", `{"timestamp": -1, "input_length": 4, "output_length": 1}`, FormatMooncake, 1, "timestamp: -1 is not a time"},
		{"jsonl mooncake keys", `{"timestamp": 0, "input_length": 4, "output_length": 1}`, FormatJSONL, 1, `unknown field "input_length"`},
		{"jsonl unsorted", pl + `{"timestamp": -0.5, "input_tokens": 10, "output_tokens": 5}`, FormatJSONL, 2, "timestamp: -0.5 is not a time"},
		{"jsonl unsorted", `{"timestamp": 3, "input_tokens": 10, "output_tokens": 5}` + "\n" + `{"timestamp": 2.5, "input_tokens": 10, "output_tokens": 5}`, FormatJSONL, 2, "timestamp goes back: 500ms"},
		{"jsonl negative", pl + `{"timestamp": 1, "input_tokens": 10, "output_tokens": -5}`, FormatJSONL, 2, "output_tokens -5 is negative"},
		{"jsonl missing", pl + `{"timestamp": 1, "output_tokens": 5}`, FormatJSONL, 2, `missing "input_tokens"`},
		{"azure unsorted", azH + "2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:47.00,1,2\n2023-11-16 18:15:46.99,1,2\n", FormatAzure, 4, "timestamp goes back: 10ms before line 3's"},
		{"azure before the first", azH + "2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:45.68,1,2\n", FormatAzure, 3, "timestamp goes back: 1s"},
		{"azure negative", azH + "2023-11-16 18:15:46.68,-1,2\n", FormatAzure, 2, "ContextTokens -1 is negative"},
		{"azure missing value", azH + "2023-11-16 18:15:46.68,1,\n", FormatAzure, 2, "GeneratedTokens: missing"},
		{"azure not a count", azH + "2023-11-16 18:15:46.68,1.5,2\n", FormatAzure, 2, `ContextTokens: "1.5" is not a token count`},
		{"azure bad time", azH + "16/11/2023 18:15,1,2\n", FormatAzure, 2, `TIMESTAMP "16/11/2023 18:15": not a time`},
		{"azure unknown column", "TIMESTAMP,ContextTokens,GeneratedTokens,Model\n", FormatAzure, 1, `unknown column "Model"`},
		{"azure missing column", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,1\n", FormatAzure, 1, `missing column "GeneratedTokens"`},
		{"azure short row", azH + "2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:47.68,1\n", FormatAzure, 3, "malformed CSV: wrong number of fields"},
		{"azure bad quote", azH + "2023-11-16 18:15:46.68,1,2\n\"2023-11-16 18:15:47.68,1,2\n", FormatAzure, 3, "malformed CSV"},
		{"azure empty", "", FormatAzure, 1, "empty file: no header"},
		{"burstgpt unsorted", bgH + "5,ChatGPT,1,2,3,API log\n4,ChatGPT,1,2,3,API log\n", FormatBurstGPT, 3, "timestamp goes back: 1s"},
		{"burstgpt negative", bgH + "5,ChatGPT,-1,2,3,API log\n", FormatBurstGPT, 2, "Request tokens -1 is negative"},
		{"burstgpt missing", bgH + "5,ChatGPT,1,,3,API log\n", FormatBurstGPT, 2, "Response tokens: missing"},
		{"burstgpt bad time", bgH + "yesterday,ChatGPT,1,2,3,API log\n", FormatBurstGPT, 2, `Timestamp "yesterday": not seconds`},
		{"burstgpt azure header", azH, FormatBurstGPT, 1, `unknown column "TIMESTAMP"`},
		{"burstgpt missing column", "Timestamp,Model,Request tokens,Response tokens,Total tokens\n", FormatBurstGPT, 1, `missing column "Log Type"`},
		{"burstgpt twice", "Timestamp,Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", FormatBurstGPT, 1, `column "Timestamp" twice`},
	} {
		_, err := Read(strings.NewReader(c.text), "traces/x", c.f, Options{})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want a *trace.Error", c.name, err)
			continue
		}
		msg := err.Error()
		prefix := "traces/x:" + strconv.Itoa(c.line) + ": "
		if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, c.problem) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line starting %q naming %q", c.name, msg, prefix, c.problem)
		}
	}
}

func TestMissingFile(t *testing.T) {
	if _, err := Load("testdata/none.jsonl", FormatJSONL, Options{}); err == nil {
		t.Error("no error for a missing file")
	}
}

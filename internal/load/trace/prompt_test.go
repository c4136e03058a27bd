package trace

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPromptsShareBlocksAsTheTraceDoes(t *testing.T) {
	reqs, err := Load("testdata/mooncake.jsonl", FormatMooncake, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := Prompts(reqs, 42)
	if again := Prompts(reqs, 42); !slices.EqualFunc(ps, again, slices.Equal) {
		t.Fatal("the same seed built different prompts")
	}
	if other := Prompts(reqs, 43); slices.Equal(ps[0], other[0]) {
		t.Fatal("another seed built the same prompt")
	}
	// Every pair of blocks: equal where the hash ids are equal, different
	// where they differ (the last block of a prompt may be partial: its
	// tokens are the full block's first ones).
	type ref struct{ req, block int }
	byID := map[int64]ref{}
	for i, q := range reqs {
		if len(ps[i]) != q.Input {
			t.Fatalf("request %d: %d tokens, want %d", i, len(ps[i]), q.Input)
		}
		for j, id := range q.HashIDs {
			b := block(ps[i], j, q.BlockSize)
			if first, ok := byID[id]; ok {
				a := block(ps[first.req], first.block, q.BlockSize)
				n := min(len(a), len(b))
				if !slices.Equal(a[:n], b[:n]) {
					t.Errorf("hash id %d: request %d block %d differs from request %d block %d", id, i, j, first.req, first.block)
				}
			} else {
				byID[id] = ref{i, j}
			}
		}
	}
	seen := map[string]int64{}
	for i, q := range reqs {
		for j, id := range q.HashIDs {
			b := block(ps[i], j, q.BlockSize)
			if len(b) < q.BlockSize {
				continue
			}
			key := toString(b)
			if other, ok := seen[key]; ok && other != id {
				t.Errorf("hash ids %d and %d built the same block", id, other)
			}
			seen[key] = id
		}
	}
}

func block(p []int, j, size int) []int { return p[j*size : min(len(p), (j+1)*size)] }

func toString(b []int) string {
	s := make([]rune, len(b))
	for i, v := range b {
		s[i] = rune(v)
	}
	return string(s)
}

func TestPromptsWithoutBlocksAreUnique(t *testing.T) {
	reqs, err := Load("testdata/azure.csv", FormatAzure, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := Prompts(reqs, 1)
	for i := range ps {
		if len(ps[i]) != reqs[i].Input {
			t.Fatalf("request %d: %d tokens, want %d", i, len(ps[i]), reqs[i].Input)
		}
		for _, tok := range ps[i] {
			if tok < tokenBase || tok >= tokenBase+tokenSpan {
				t.Fatalf("token %d outside [%d, %d)", tok, tokenBase, tokenBase+tokenSpan)
			}
		}
		for j := range i {
			if n := min(len(ps[i]), len(ps[j]), 16); slices.Equal(ps[i][:n], ps[j][:n]) {
				t.Errorf("requests %d and %d start alike", i, j)
			}
		}
	}
}

// A prompt longer than its blocks is filled with its own tokens; one
// shorter stops inside them.
func TestPromptsBeyondTheBlocks(t *testing.T) {
	reqs := []Request{
		{Input: 700, HashIDs: []int64{7}, BlockSize: 512},
		{Input: 300, HashIDs: []int64{7, 8}, BlockSize: 512},
		{Input: 700, HashIDs: []int64{7}, BlockSize: 512},
	}
	ps := Prompts(reqs, 3)
	if len(ps[0]) != 700 || len(ps[1]) != 300 {
		t.Fatalf("lengths %d, %d", len(ps[0]), len(ps[1]))
	}
	if !slices.Equal(ps[0][:300], ps[1]) || !slices.Equal(ps[0][:512], ps[2][:512]) {
		t.Error("block 7 differs between requests")
	}
	if slices.Equal(ps[0][512:], ps[2][512:]) {
		t.Error("the tokens past the blocks are shared")
	}
}

func TestShared(t *testing.T) {
	reqs := []Request{
		{Input: 1024, HashIDs: []int64{1, 2}, BlockSize: 512},
		{Input: 1500, HashIDs: []int64{1, 2, 3}, BlockSize: 512},
		{Input: 1024, HashIDs: []int64{4, 2}, BlockSize: 512}, // 2 follows another prefix
		{Input: 1000, HashIDs: []int64{1, 3}, BlockSize: 512}, // 3 was sent in part: 476 of 488
		{Input: 100},
		{Input: 1100, HashIDs: []int64{1, 3, 5}, BlockSize: 512}, // 488 of 3 were sent, 5 is new
		{Input: 1100, HashIDs: []int64{1, 3, 5}, BlockSize: 512}, // all of it
	}
	if got, want := Shared(reqs), []int{0, 1024, 0, 512 + 476, 0, 512 + 488, 1100}; !slices.Equal(got, want) {
		t.Errorf("Shared = %v, want %v", got, want)
	}
}

func TestText(t *testing.T) {
	reqs := []Request{
		{Input: 600, HashIDs: []int64{1, 2}, BlockSize: 512},
		{Input: 600, HashIDs: []int64{1, 3}, BlockSize: 512},
	}
	ps := Prompts(reqs, 5)
	a, b := Text(ps[0]), Text(ps[1])
	if n := len(strings.Fields(a)); n != 600 {
		t.Fatalf("%d words, want 600", n)
	}
	shared := Text(ps[0][:512])
	if !strings.HasPrefix(a, shared) || !strings.HasPrefix(b, shared) || a == b {
		t.Error("the shared block's text is not shared, or the rest is")
	}
	if len(words) < 200 || len(slices.Compact(slices.Sorted(slices.Values(words)))) != len(words) {
		t.Errorf("%d words, or some twice", len(words))
	}
	for _, w := range words {
		if len(w) > 4 {
			t.Errorf("%q: over four bytes, two tokens in the simulated engine's tokenizer", w)
		}
	}
}

// A Mooncake line longer than bufio's default 64 KiB is read.
func TestLongLine(t *testing.T) {
	ids := make([]string, 19000)
	for i := range ids {
		ids[i] = strconv.Itoa(100000 + i)
	}
	line := `{"timestamp": 0, "input_length": 9728000, "output_length": 1, "hash_ids": [` + strings.Join(ids, ", ") + `]}`
	reqs, err := Read(strings.NewReader(line), "t", FormatMooncake, Options{})
	if err != nil || len(reqs) != 1 || len(reqs[0].HashIDs) != 19000 {
		t.Fatalf("%d requests, %v", len(reqs), err)
	}
}

// Prompt builds alone what Prompts builds for the whole trace.
func TestPromptAlone(t *testing.T) {
	reqs, err := Load("testdata/mooncake.jsonl", FormatMooncake, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, Request{Input: 700}, Request{Input: 100, HashIDs: []int64{1, 2}, BlockSize: 512})
	all := Prompts(reqs, 42)
	for i, q := range reqs {
		if !slices.Equal(Prompt(q, i, 42), all[i]) {
			t.Fatalf("request %d: built alone it differs", i)
		}
	}
}

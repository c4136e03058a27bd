package bench

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/load/measure"
)

func TestGenerate(t *testing.T) {
	tests := []struct {
		name  string
		spec  DatasetSpec
		check func(t *testing.T, rs []measure.Request)
	}{
		{"random fixed", DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 20}, Output: Dist{Value: 7}}, func(t *testing.T, rs []measure.Request) {
			for _, r := range rs {
				if len(strings.Fields(r.Prompt)) != 20 || r.PromptTokens != 20 || r.MaxTokens != 7 || r.PrefixID != -1 || !r.Synthetic {
					t.Fatalf("request %+v", r)
				}
			}
		}},
		{"prefix", DatasetSpec{Kind: DatasetPrefix, PrefixGroups: 3, PrefixLen: 10, Input: Dist{Value: 5}, Output: Dist{Value: 2}}, func(t *testing.T, rs []measure.Request) {
			prefixes := map[int]string{}
			for _, r := range rs {
				w := strings.Fields(r.Prompt)
				if len(w) != 15 || r.PromptTokens != 15 || r.PrefixTokens != 10 || r.PrefixID < 0 || r.PrefixID > 2 {
					t.Fatalf("request %+v", r)
				}
				p := strings.Join(w[:10], " ")
				if old, ok := prefixes[r.PrefixID]; ok && old != p {
					t.Fatalf("group %d has two prefixes", r.PrefixID)
				}
				prefixes[r.PrefixID] = p
			}
			if len(prefixes) != 3 {
				t.Errorf("%d groups used, want 3", len(prefixes))
			}
		}},
		{"sharegpt filters", DatasetSpec{Kind: DatasetShareGPT, Path: "testdata/sharegpt.json"}, func(t *testing.T, rs []measure.Request) {
			for _, r := range rs {
				// "Hi" (< 4 tokens), the "Ok" reply and the one-turn entry are skipped.
				if strings.HasPrefix(r.Prompt, "Hi") || strings.Contains(r.Prompt, "capital of France") || strings.Contains(r.Prompt, "sleep better") {
					t.Fatalf("filtered entry used: %q", r.Prompt)
				}
				if r.PromptTokens < 4 || r.MaxTokens < 4 || r.Synthetic {
					t.Fatalf("request %+v", r)
				}
			}
		}},
		{"sharegpt fixed output", DatasetSpec{Kind: DatasetShareGPT, Path: "testdata/sharegpt.json", Output: Dist{Value: 64}}, func(t *testing.T, rs []measure.Request) {
			for _, r := range rs {
				if r.MaxTokens != 64 {
					t.Fatalf("max tokens %d, want 64", r.MaxTokens)
				}
			}
		}},
		{"jsonl", DatasetSpec{Kind: DatasetJSONL, Path: "testdata/prompts.jsonl", Output: Dist{Value: 33}}, func(t *testing.T, rs []measure.Request) {
			outs := map[int]bool{}
			for _, r := range rs {
				outs[r.MaxTokens] = true
			}
			if !outs[64] || !outs[33] || !outs[48] {
				t.Errorf("output lengths %v, want 64 (output_len), 48 (max_tokens), 33 (default)", outs)
			}
		}},
		{"mix", DatasetSpec{Kind: DatasetMix, Mix: []MixPart{
			{Weight: 3, Spec: DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 5}, Output: Dist{Value: 1}}},
			{Weight: 1, Spec: DatasetSpec{Kind: DatasetPrefix, PrefixGroups: 2, PrefixLen: 4, Input: Dist{Value: 2}, Output: Dist{Value: 2}}},
		}}, func(t *testing.T, rs []measure.Request) {
			n := 0
			for _, r := range rs {
				if r.PrefixID >= 0 {
					n++
				}
			}
			if n < 25 || n > 75 {
				t.Errorf("%d of 200 from the weight-1 part, want about 50", n)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tc.spec.Generate(newRNG(5, 1), 200)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 200 {
				t.Fatalf("%d requests, want 200", len(rs))
			}
			for i, r := range rs {
				if r.Index != i {
					t.Fatalf("request %d has index %d", i, r.Index)
				}
			}
			tc.check(t, rs)
			again, _ := tc.spec.Generate(newRNG(5, 1), 200)
			if !reflect.DeepEqual(rs, again) {
				t.Error("equal seeds gave different requests")
			}
			lens, err := tc.spec.GenerateLengths(newRNG(5, 1), 200)
			if err != nil {
				t.Fatal(err)
			}
			for i := range rs {
				r := rs[i]
				r.Prompt = ""
				if lens[i] != r || lens[i].Prompt != "" {
					t.Fatalf("GenerateLengths request %d = %+v, want %+v", i, lens[i], r)
				}
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\": \"ok\"}\nnot json\n"), 0o644)
	noPrompt := filepath.Join(dir, "np.jsonl")
	os.WriteFile(noPrompt, []byte("{\"output_len\": 3}\n"), 0o644)
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte("[]"), 0o644)
	tests := []struct {
		name string
		spec DatasetSpec
		want string
	}{
		{"unknown kind", DatasetSpec{Kind: "imagenet"}, "unknown kind"},
		{"bad input", DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 0}, Output: Dist{Value: 1}}, "input"},
		{"prefix without groups", DatasetSpec{Kind: DatasetPrefix, Input: Dist{Value: 1}, Output: Dist{Value: 1}}, "prefix"},
		{"sharegpt without path", DatasetSpec{Kind: DatasetShareGPT}, "path"},
		{"missing file", DatasetSpec{Kind: DatasetJSONL, Path: filepath.Join(dir, "nope"), Output: Dist{Value: 1}}, "no such file"},
		{"bad jsonl line", DatasetSpec{Kind: DatasetJSONL, Path: bad, Output: Dist{Value: 1}}, "bad.jsonl:2"},
		{"jsonl without prompt", DatasetSpec{Kind: DatasetJSONL, Path: noPrompt, Output: Dist{Value: 1}}, "no \"prompt\""},
		{"empty sharegpt", DatasetSpec{Kind: DatasetShareGPT, Path: empty}, "no usable entries"},
		{"not sharegpt", DatasetSpec{Kind: DatasetShareGPT, Path: bad}, "not a ShareGPT"},
		{"mix weight", DatasetSpec{Kind: DatasetMix, Mix: []MixPart{{Weight: 0, Spec: DatasetSpec{Kind: DatasetRandom, Input: Dist{Value: 1}, Output: Dist{Value: 1}}}}}, "weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Generate(newRNG(1, 1), 3)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrBadDataset) && !errors.Is(err, ErrBadDist) {
				t.Errorf("err %v does not wrap ErrBadDataset", err)
			}
		})
	}
}

// FuzzShareGPT: a ShareGPT file of any content parses or is refused with
// ErrBadDataset; every request it gives has lengths within the filters.
func FuzzShareGPT(f *testing.F) {
	f.Add([]byte(`[{"id":"a","conversations":[{"from":"human","value":"what is the capital of france"},{"from":"gpt","value":"paris is the capital of france"}]}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"not": "a list"}`))
	f.Add([]byte(`[{"conversations":[{"value":""}]}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := DatasetSpec{Kind: DatasetShareGPT, Path: "f.json"}
		pool, err := d.parseShareGPT(raw, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			if !errors.Is(err, ErrBadDataset) {
				t.Fatalf("error %v is not ErrBadDataset", err)
			}
			return
		}
		for _, r := range pool {
			if r.PromptTokens < 4 || r.PromptTokens > 1024 || r.MaxTokens < 4 || r.PromptTokens+r.MaxTokens > 2048 {
				t.Fatalf("request outside the filters: %+v", r)
			}
		}
	})
}

// FuzzJSONL: a jsonl dataset of any content parses or is refused with
// ErrBadDataset naming its line; every request has a prompt and an output
// length in range.
func FuzzJSONL(f *testing.F) {
	f.Add([]byte("{\"prompt\": \"hello there\", \"output_len\": 16}\n{\"text\": \"x\"}\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte("{\"prompt\": \"a\", \"max_tokens\": -3}\n"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := DatasetSpec{Kind: DatasetJSONL, Path: "f.jsonl", Output: Dist{Kind: DistFixed, Value: 8}}
		pool, err := d.parseJSONL(bytes.NewReader(raw), rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			if !errors.Is(err, ErrBadDataset) {
				t.Fatalf("error %v is not ErrBadDataset", err)
			}
			return
		}
		for _, r := range pool {
			if r.Prompt == "" || r.MaxTokens < 1 || r.MaxTokens > MaxLen {
				t.Fatalf("bad request %+v", r)
			}
		}
	})
}

package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"unicode"

	"github.com/servetune/servetune/internal/load/measure"
)

// Dataset kinds.
const (
	DatasetRandom   = "random"
	DatasetShareGPT = "sharegpt"
	DatasetJSONL    = "jsonl"
	DatasetPrefix   = "prefix"
	DatasetMix      = "mix"
	// DatasetConversation is multi-turn sessions (conversation.go).
	DatasetConversation = "conversation"
)

// words are short common English words; with a leading space each is one
// token in the BPE vocabularies of Llama, Qwen and Mistral, so a synthetic
// prompt of n words is about n tokens before /tokenize alignment.
var words = strings.Fields(`the of and to in is was he for it with as his on be at by
had are but from or have an they which one you were her all she there would their we
him been has when who will more no if out so said what up its about into than them can
only other new some could time these two may then do first any my now such like our
over man me even most made after also did many before must through back years where much
your way well down should because each just those people how too little state good very
make world still own see men work long get here between both life being under never day
same another know while last might us great old year off come since against go came
right used take three`)

// Validate reports a spec that cannot generate requests.
func (d DatasetSpec) Validate() error {
	switch d.Kind {
	case DatasetRandom, "":
		if err := d.Input.Validate(); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	case DatasetPrefix:
		if d.PrefixGroups < 1 || d.PrefixLen < 1 {
			return fmt.Errorf("%w: prefix needs prefix groups >= 1 and prefix length >= 1", ErrBadDataset)
		}
		if err := d.Input.Validate(); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	case DatasetShareGPT, DatasetJSONL:
		if d.Path == "" {
			return fmt.Errorf("%w: %s needs a dataset path", ErrBadDataset, d.Kind)
		}
	case DatasetMix:
		if len(d.Mix) == 0 {
			return fmt.Errorf("%w: mix has no parts", ErrBadDataset)
		}
		for i, p := range d.Mix {
			if p.Weight <= 0 || math.IsNaN(p.Weight) || math.IsInf(p.Weight, 0) {
				return fmt.Errorf("%w: mix part %d: weight %g must be > 0", ErrBadDataset, i, p.Weight)
			}
			if p.Spec.Kind == DatasetMix {
				return fmt.Errorf("%w: mix part %d: nested mix", ErrBadDataset, i)
			}
			if err := p.Spec.Validate(); err != nil {
				return fmt.Errorf("mix part %d: %w", i, err)
			}
		}
		return nil
	case DatasetTrace:
		return d.validateTrace()
	case DatasetConversation:
		if err := d.validateConversation(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown kind %q (random, sharegpt, jsonl, prefix, mix, trace, conversation)", ErrBadDataset, d.Kind)
	}
	// ShareGPT's answers give the output lengths unless Output is set.
	fromFile := d.Kind == DatasetShareGPT || d.Kind == DatasetConversation && d.Path != ""
	if !fromFile || d.Output.isSet() {
		if err := d.Output.Validate(); err != nil {
			return fmt.Errorf("output: %w", err)
		}
	}
	return nil
}

// Generate returns n requests drawn from the dataset with rng (a trace's
// first n of its window, or all when it holds fewer). It reads the
// dataset file for sharegpt, jsonl and trace and never touches the network, so the
// simulated engine can call it; equal seeds give equal requests. measure.Request
// indices run 0..n-1 and PrefixID is -1 unless the request shares a prefix.
func (d DatasetSpec) Generate(rng *rand.Rand, n int) ([]measure.Request, error) {
	return d.generate(rng, n, true)
}

// GenerateLengths is Generate without prompt text (Prompt is empty): the
// same lengths, prefix groups and output lengths for the same seed, at a
// fraction of the memory. For the simulated engine, which needs only sizes.
func (d DatasetSpec) GenerateLengths(rng *rand.Rand, n int) ([]measure.Request, error) {
	return d.generate(rng, n, false)
}

func (d DatasetSpec) generate(rng *rand.Rand, n int, text bool) ([]measure.Request, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: negative request count %d", ErrBadDataset, n)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	// Words come from their own stream, so lengths do not depend on
	// whether text is generated.
	textRNG := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	prompt := func(k int) string {
		if !text {
			return ""
		}
		return randomWords(textRNG, k)
	}
	var (
		reqs []measure.Request
		err  error
	)
	switch d.Kind {
	case DatasetRandom, "", DatasetConversation: // a conversation's single requests (its warm-up): first turns
		reqs = make([]measure.Request, n)
		for i := range reqs {
			in, out := d.Input.Sample(rng), d.Output.Sample(rng)
			reqs[i] = measure.Request{Prompt: prompt(in), PromptTokens: in, MaxTokens: out, PrefixID: -1, Synthetic: true}
		}
	case DatasetPrefix:
		prefixes := make([]string, d.PrefixGroups)
		for i := range prefixes {
			prefixes[i] = prompt(d.PrefixLen)
		}
		reqs = make([]measure.Request, n)
		for i := range reqs {
			g := rng.IntN(d.PrefixGroups)
			in, out := d.Input.Sample(rng), d.Output.Sample(rng)
			p := ""
			if text {
				p = prefixes[g] + " " + prompt(in)
			}
			reqs[i] = measure.Request{
				Prompt: p, PromptTokens: d.PrefixLen + in,
				MaxTokens: out, PrefixID: g, PrefixTokens: d.PrefixLen, Synthetic: true,
			}
		}
	case DatasetShareGPT:
		reqs, err = d.shareGPT(rng, n)
	case DatasetJSONL:
		reqs, err = d.jsonl(rng, n)
	case DatasetMix:
		reqs, err = d.mix(rng, n, text)
	case DatasetTrace:
		reqs, _, err = d.traceRequests(rng, n, text)
	}
	if err != nil {
		return nil, err
	}
	for i := range reqs {
		reqs[i].Index = i
		if !text {
			reqs[i].Prompt = ""
		}
	}
	return reqs, nil
}

// randomWords returns n words from the fixed list, space separated.
func randomWords(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n * 5)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// ApproxTokens estimates the token count of natural text without a
// tokenizer: the larger of the word count and a quarter of the characters.
func ApproxTokens(s string) int {
	n := len(strings.FieldsFunc(s, unicode.IsSpace))
	return max(n, (len(s)+3)/4)
}

// shareGPTEntry is one conversation of a ShareGPT JSON file.
type shareGPTEntry struct {
	ID            string `json:"id"`
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// shareGPTEntries reads a ShareGPT file's JSON array.
func shareGPTEntries(raw []byte, path string) ([]shareGPTEntry, error) {
	var entries []shareGPTEntry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%w: %s: not a ShareGPT JSON array: %w", ErrBadDataset, path, err)
	}
	return entries, nil
}

// shareGPT samples n prompts from a ShareGPT file with vLLM's filters: the
// first human turn is the prompt and the next turn's length the output
// length; pairs with prompt or output < 4 tokens, prompt > 1024 or
// prompt+output > 2048 tokens are skipped. A fixed Output overrides the
// output length. Entries are drawn with replacement when n exceeds them.
func (d DatasetSpec) shareGPT(rng *rand.Rand, n int) ([]measure.Request, error) {
	raw, err := os.ReadFile(d.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDataset, err)
	}
	pool, err := d.parseShareGPT(raw, rng)
	if err != nil {
		return nil, err
	}
	return drawFrom(rng, pool, n, d.Path)
}

// parseShareGPT reads a ShareGPT file's usable pairs (shareGPT).
func (d DatasetSpec) parseShareGPT(raw []byte, rng *rand.Rand) ([]measure.Request, error) {
	entries, err := shareGPTEntries(raw, d.Path)
	if err != nil {
		return nil, err
	}
	var pool []measure.Request
	for _, e := range entries {
		if len(e.Conversations) < 2 {
			continue
		}
		prompt, completion := e.Conversations[0].Value, e.Conversations[1].Value
		in, out := ApproxTokens(prompt), ApproxTokens(completion)
		if d.Output.isSet() {
			out = d.Output.Sample(rng)
		}
		if in < 4 || out < 4 || in > 1024 || in+out > 2048 {
			continue
		}
		pool = append(pool, measure.Request{Prompt: prompt, PromptTokens: in, MaxTokens: out, PrefixID: -1})
	}
	return pool, nil
}

// jsonlLine is one line of a jsonl dataset.
type jsonlLine struct {
	Prompt    string `json:"prompt"`
	Text      string `json:"text"`
	OutputLen int    `json:"output_len"`
	MaxTokens int    `json:"max_tokens"`
}

// jsonl reads one JSON object per line: {"prompt": "...", "output_len": N}
// ("text" and "max_tokens" are accepted aliases). Lines without an output
// length take one from Output.
func (d DatasetSpec) jsonl(rng *rand.Rand, n int) ([]measure.Request, error) {
	f, err := os.Open(d.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDataset, err)
	}
	defer f.Close()
	pool, err := d.parseJSONL(f, rng)
	if err != nil {
		return nil, err
	}
	return drawFrom(rng, pool, n, d.Path)
}

// maxJSONLLine bounds one line of a jsonl dataset (a prompt of about ten
// million tokens).
const maxJSONLLine = 64 << 20

// parseJSONL reads a jsonl dataset's lines (jsonl).
func (d DatasetSpec) parseJSONL(r io.Reader, rng *rand.Rand) ([]measure.Request, error) {
	var pool []measure.Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxJSONLLine)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var l jsonlLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrBadDataset, d.Path, lineNo, err)
		}
		p := l.Prompt
		if p == "" {
			p = l.Text
		}
		if p == "" {
			return nil, fmt.Errorf("%w: %s:%d: no \"prompt\"", ErrBadDataset, d.Path, lineNo)
		}
		out := l.OutputLen
		if out == 0 {
			out = l.MaxTokens
		}
		if out <= 0 || out > MaxLen {
			if l.OutputLen != 0 || l.MaxTokens != 0 {
				return nil, fmt.Errorf("%w: %s:%d: output length %d: want 1 to %d", ErrBadDataset, d.Path, lineNo, out, MaxLen)
			}
			out = d.Output.Sample(rng)
		}
		pool = append(pool, measure.Request{Prompt: p, PromptTokens: ApproxTokens(p), MaxTokens: out, PrefixID: -1})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: %s: a line over %d MiB", ErrBadDataset, d.Path, maxJSONLLine>>20)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrBadDataset, d.Path, err)
	}
	return pool, nil
}

// drawFrom shuffles pool and takes n, cycling through reshuffled copies
// when n exceeds the pool.
func drawFrom(rng *rand.Rand, pool []measure.Request, n int, path string) ([]measure.Request, error) {
	if len(pool) == 0 {
		return nil, fmt.Errorf("%w: %s: no usable entries", ErrBadDataset, path)
	}
	out := make([]measure.Request, 0, n)
	for len(out) < n {
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		out = append(out, pool[:min(len(pool), n-len(out))]...)
	}
	return out, nil
}

// mix draws each request's part by weight, then generates every part's
// requests in one call so files are read once.
func (d DatasetSpec) mix(rng *rand.Rand, n int, text bool) ([]measure.Request, error) {
	total := 0.0
	for _, p := range d.Mix {
		total += p.Weight
	}
	pick := make([]int, n)
	counts := make([]int, len(d.Mix))
	for i := range pick {
		x := rng.Float64() * total
		k := 0
		for k < len(d.Mix)-1 && x >= d.Mix[k].Weight {
			x -= d.Mix[k].Weight
			k++
		}
		pick[i] = k
		counts[k]++
	}
	parts := make([][]measure.Request, len(d.Mix))
	for k, p := range d.Mix {
		rs, err := p.Spec.generate(rng, counts[k], text)
		if err != nil {
			return nil, fmt.Errorf("mix part %d: %w", k, err)
		}
		parts[k] = rs
	}
	out := make([]measure.Request, n)
	next := make([]int, len(d.Mix))
	prefixBase := make([]int, len(d.Mix)) // keep prefix groups of parts apart
	for k := 1; k < len(d.Mix); k++ {
		prefixBase[k] = prefixBase[k-1] + d.Mix[k-1].Spec.PrefixGroups
	}
	for i, k := range pick {
		r := parts[k][next[k]]
		next[k]++
		if r.PrefixID >= 0 {
			r.PrefixID += prefixBase[k]
		}
		out[i] = r
	}
	return out, nil
}

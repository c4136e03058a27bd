package quality

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The kinds of task, each with one exact answer a model that reads the
// question can give: they exercise arithmetic, faithful copying, counting
// and calendar reasoning, where quantization and FP8 KV errors show first
// (a digit, a dropped word, a day off).
const (
	KindArithmetic = "arithmetic"
	KindCopy       = "copy"
	KindCount      = "count"
	KindDate       = "date"
)

// Kinds lists the task kinds in the order Tasks deals them.
var Kinds = []string{KindArithmetic, KindCopy, KindCount, KindDate}

// DefaultItems is the size of the task set when none is given: 100 of each
// kind, enough that one point of accuracy is four answers.
const DefaultItems = 400

// shots is how many solved examples of its kind precede each question.
const shots = 3

// Task is one question with its exact answer.
type Task struct {
	ID     int    `json:"id"`
	Kind   string `json:"kind"`
	Prompt string `json:"prompt"` // the whole prompt: instructions, solved examples, the question
	Answer string `json:"answer"`
}

// qa is one question and its answer.
type qa struct{ q, a string }

// Tasks generates n tasks from seed, the kinds dealt in turn. The same seed
// and n give the same tasks, byte for byte, on every machine: a study's
// baseline and its trials are asked the same questions.
func Tasks(seed uint64, n int) []Task {
	rng := rand.New(rand.NewPCG(seed, 0x7a5c))
	out := make([]Task, n)
	for i := range out {
		kind := Kinds[i%len(Kinds)]
		gen := generators[kind]
		var b strings.Builder
		b.WriteString("Answer each question with the answer only.\n\n")
		for range shots {
			ex := gen(rng)
			fmt.Fprintf(&b, "Q: %s\nA: %s\n\n", ex.q, ex.a)
		}
		t := gen(rng)
		fmt.Fprintf(&b, "Q: %s\nA:", t.q)
		out[i] = Task{ID: i, Kind: kind, Prompt: b.String(), Answer: t.a}
	}
	return out
}

var generators = map[string]func(*rand.Rand) qa{
	KindArithmetic: arithmetic,
	KindCopy:       copying,
	KindCount:      counting,
	KindDate:       dateArithmetic,
}

func arithmetic(rng *rand.Rand) qa {
	switch rng.IntN(3) {
	case 0:
		a, b := 100+rng.IntN(900), 10+rng.IntN(990)
		return qa{fmt.Sprintf("What is %d + %d?", a, b), strconv.Itoa(a + b)}
	case 1:
		a, b := 100+rng.IntN(900), 10+rng.IntN(90)
		return qa{fmt.Sprintf("What is %d - %d?", a, b), strconv.Itoa(a - b)}
	}
	a, b := 10+rng.IntN(90), 2+rng.IntN(18)
	return qa{fmt.Sprintf("What is %d * %d?", a, b), strconv.Itoa(a * b)}
}

// syllables build pronounceable nonsense words, so copying them cannot be
// done from memory of real phrases.
var (
	onsets = []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"}
	vowels = []string{"a", "e", "i", "o", "u"}
)

func nonsenseWord(rng *rand.Rand) string {
	var b strings.Builder
	for range 1 + rng.IntN(3) {
		b.WriteString(onsets[rng.IntN(len(onsets))])
		b.WriteString(vowels[rng.IntN(len(vowels))])
	}
	return b.String()
}

func copying(rng *rand.Rand) qa {
	words := make([]string, 3+rng.IntN(4))
	for i := range words {
		words[i] = nonsenseWord(rng)
	}
	s := strings.Join(words, " ")
	return qa{"Repeat exactly: " + s, s}
}

var countWords = []string{"apple", "pear", "plum", "fig", "lime", "kiwi"}

func counting(rng *rand.Rand) qa {
	target := countWords[rng.IntN(len(countWords))]
	list := make([]string, 5+rng.IntN(8))
	n := 0
	for i := range list {
		list[i] = countWords[rng.IntN(len(countWords))]
		if list[i] == target {
			n++
		}
	}
	return qa{fmt.Sprintf("How many times does %q appear in: %s?", target, strings.Join(list, " ")), strconv.Itoa(n)}
}

func dateArithmetic(rng *rand.Rand) qa {
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(365*30))
	days := 1 + rng.IntN(120)
	if rng.IntN(2) == 0 {
		return qa{fmt.Sprintf("What date is %d days after %s? Answer as YYYY-MM-DD.", days, base.Format(time.DateOnly)),
			base.AddDate(0, 0, days).Format(time.DateOnly)}
	}
	return qa{fmt.Sprintf("What date is %d days before %s? Answer as YYYY-MM-DD.", days, base.Format(time.DateOnly)),
		base.AddDate(0, 0, -days).Format(time.DateOnly)}
}

// Normalize is how an answer is compared: the first line, spaces trimmed,
// a final period dropped. Nothing else is forgiven: "405" is right, "about
// 405" is not.
func Normalize(s string) string {
	s, _, _ = strings.Cut(strings.TrimLeft(s, " \t\r\n"), "\n")
	s = strings.TrimSpace(s)
	return strings.TrimSuffix(s, ".")
}

package sim

import (
	"hash/fnv"
	"strings"
	"unicode"
)

// CountTokens is the simulator's tokenizer: whitespace-separated words, one
// token per word, and a word longer than four bytes one token per four bytes
// (rounded up). Clients align prompt lengths with /tokenize, so only
// consistency matters, not fidelity to a real vocabulary.
func CountTokens(text string) int {
	n := 0
	inWord, wordLen := false, 0
	flush := func() {
		if inWord {
			n += max(1, (wordLen+3)/4)
		}
		inWord, wordLen = false, 0
	}
	for _, r := range text {
		if unicode.IsSpace(r) {
			flush()
			continue
		}
		inWord = true
		wordLen += len(string(r))
	}
	flush()
	return n
}

// TokenIDs returns token ids for text under the same rules: each piece is
// hashed into the vocabulary, so the same text always gives the same ids.
func TokenIDs(text string, vocab int) []int {
	ids := make([]int, 0, CountTokens(text))
	if vocab <= 0 {
		vocab = 32000
	}
	for _, w := range strings.Fields(text) {
		for len(w) > 0 {
			piece := w
			if len(w) > 4 {
				piece = w[:4]
			}
			w = w[len(piece):]
			h := fnv.New32a()
			h.Write([]byte(piece))
			ids = append(ids, int(h.Sum32()%uint32(vocab)))
		}
	}
	return ids
}

// outputWords are the words generated text is made of: short, so each is
// exactly one token.
var outputWords = [...]string{"the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "as", "with", "was", "at", "by", "an"}

// outputText returns the text of generated token i (0-based) of a request:
// a space and one short word.
func outputText(i int) string {
	return " " + outputWords[i%len(outputWords)]
}

// OutputWord is the word generated token i (0-based) of every request
// is: a client that sends an answer back in its next prompt (a
// conversation's history) writes these words where the answer was, so
// the engine's cached pages of that answer match.
func OutputWord(i int) string { return outputWords[i%len(outputWords)] }

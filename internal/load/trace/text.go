package trace

import "strings"

// words are common English words of at most four letters, which byte-pair
// tokenizers (Llama's, Qwen's, GPT's) mostly encode as one token after a
// space, and the simulated engine's tokenizer exactly as one
// (internal/model/sim/tokenizer.go: one token per four bytes of a word), so
// Text's prompts come near one token a word on a real engine and to it on
// the simulated one; the server's usage gives the exact count.
var words = strings.Fields(`
the of and to in is that for it as was with be by on not he this are or
his from at but have an they you were her she one all we can has been if
more when will who so no out up into do than time only its two may new
some then any like now my over such our man me even most made also did
many must back much your way well down each just how too good very make
own see men work long here get both life day same know last us old year
off come go came used take home hand word part big high low open city
end line area turn move play run show try ask need feel seem call keep
let help talk near room fact book eye side kind head week game car body
news land food case job free true real best sure few half late hard easy
hold plan test list cat dog sun sky red blue art act add age air arm bag
bed bit box boy bus cup cut dry ear eat egg far fit fly fun gas hat hit
ice key kid lay leg lie lot map mix mud net nut oil pan pay pen pet pie
pin pot raw rod row sad sea sit six ten toe ton toy van wet win yes yet
zoo`)

// Text renders token ids as words, one a token, separated by spaces: the
// prompt for an API that takes text. Equal token runs give equal text, so
// the blocks Prompts shares stay shared.
func Text(tokens []int) string {
	var b strings.Builder
	b.Grow(len(tokens) * 6)
	for i, t := range tokens {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[t%len(words)])
	}
	return b.String()
}

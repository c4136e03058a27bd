package trace

import "strings"

// words are common English words, which byte-pair tokenizers (Llama's,
// Qwen's, GPT's) mostly encode as one token after a space, so Text's
// prompts come near one token a word; the server's usage gives the exact
// count.
var words = strings.Fields(`
the of and to in is that for it as was with be by on not he this are or
his from at which but have an they you were her she there one all we can
has been if more when will would who so no out up into do than time only
its two may other new some could these then first any like now my over
such our man me even most made after also did many before must through
back years where much your way well down should because each just those
people how too little state good very make world still own see men work
long here get both between life being under never day same another know
while last might us great old year off come since against go came right
used take three home house hand water word place number part point small
large big high low open close group city school order end start line area
turn move play run show try ask need feel seem leave call keep let begin
help talk change near light room fact book eye side kind head stand night
week month game car body news land food case job money story young free
true real best sure few half early late hard easy hold plan test list`)

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

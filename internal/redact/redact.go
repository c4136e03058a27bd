// Package redact removes credentials from text, argument lists and
// metadata before they are stored, logged or shown: Hugging Face and
// OpenAI-style tokens, bearer headers, the values of the engines' secret
// flags, and the value of any flag, key or variable whose name says it is
// a key, token, secret or password. Everything servetune writes down goes
// through it (docs/reliability.md, "Secrets").
package redact

import (
	"regexp"
	"strings"

	"github.com/servetune/servetune/engine"
)

// Redacted replaces a secret.
const Redacted = "[REDACTED]"

// secretWord is a name that says its value is a credential.
const secretWord = `(?:api[_-]?key|token|secret|password|passwd|credentials?)`

// nameRE matches a flag, key or variable name that carries a credential:
// the word as a whole part of the name (hf_token, OPENAI_API_KEY, but not
// tokenizer_mode).
var nameRE = regexp.MustCompile(`(?i)(^|[_-])` + secretWord + `($|[_-])`)

// patterns are applied in order; each replacement keeps the groups before
// the secret.
var patterns = []struct {
	re   *regexp.Regexp
	keep string
}{
	{regexp.MustCompile(`hf_[A-Za-z0-9]{16,}`), ""},
	{regexp.MustCompile(`sk-[A-Za-z0-9_\-]{16,}`), ""},
	{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/\-]+=*`), "${1}"},
	// A flag followed by its value: --api-key VALUE, --hf-token=VALUE, and
	// the YAML/JSON list form "--api-key", "VALUE".
	{regexp.MustCompile(`(?i)(--?(?:[a-z0-9]+[_-])*` + secretWord + `(?:[_-][a-z0-9]+)*)((?:["']?\s*,\s*["']?)|=["']?|\s+["']?)[^\s"',\[\]}$-][^\s"',\]}]*`), "${1}${2}"},
	// key: value and key=value pairs (YAML, logs, Python dicts).
	{regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_-])*` + secretWord + `)(["']?\s*[:=]\s*["']?)[^\s"',}$][^\s"',}]*`), "${1}${2}"},
}

// Text returns s with every credential it can recognise replaced by
// Redacted. A value that starts with $ is a reference such as ${HF_TOKEN},
// not a secret, and stays.
func Text(s string) string {
	for _, p := range patterns {
		s = p.re.ReplaceAllString(s, p.keep+Redacted)
	}
	return s
}

// Name reports whether a flag, key or environment variable name carries a
// credential: the engines' secret flags (engine.IsSecretFlag) and any name
// with key, token, secret or password in it.
func Name(name string) bool {
	return engine.IsSecretFlag(name) || nameRE.MatchString(strings.TrimLeft(name, "-"))
}

// Args returns a copy of an argument list with the value of every secret
// flag replaced: "--api-key", "X" and "--api-key=X" alike.
func Args(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if name, _, ok := strings.Cut(a, "="); ok {
			if Name(name) {
				out[i] = name + "=" + Redacted
			}
			continue
		}
		if Name(a) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			out[i+1] = Redacted
			i++
		}
	}
	return out
}

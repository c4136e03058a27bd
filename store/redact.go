package store

import "regexp"

// secretPatterns match credentials that may slip into engine logs, error
// messages or a spec: Hugging Face and OpenAI-style tokens, bearer headers,
// and key=value / key: value pairs whose key names a secret (a value that
// starts with $ is a reference such as ${HF_TOKEN}, not a secret, and stays).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`hf_[A-Za-z0-9]{16,}`),
	regexp.MustCompile(`sk-[A-Za-z0-9_\-]{16,}`),
	regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/\-]+=*`),
	regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_-])*(?:api[_-]?key|token|secret|password|passwd))(["']?\s*[:=]\s*["']?)[^\s"',}$][^\s"',}]*`),
}

// Redacted replaces a secret in stored text.
const Redacted = "[REDACTED]"

// Redact returns text with token-like secrets replaced by Redacted. The
// store applies it to every free text it writes (spec, failure message, log
// tail); it is exported so that other writers (result files) can use it.
func Redact(text string) string {
	for i, re := range secretPatterns {
		if i < 2 {
			text = re.ReplaceAllString(text, Redacted)
			continue
		}
		if i == 2 {
			text = re.ReplaceAllString(text, "${1}"+Redacted)
			continue
		}
		text = re.ReplaceAllString(text, "${1}${2}"+Redacted)
	}
	return text
}

// secretKey matches metadata keys that name a credential.
var secretKey = regexp.MustCompile(`(?i)(api[_-]?key|(^|[_-])token$|secret|password|passwd|authorization|^headers?$)`)

// scrubMeta drops summary metadata whose key names a secret (an API key or
// header that a caller put there by mistake) and redacts string values.
func scrubMeta(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		if secretKey.MatchString(k) {
			continue
		}
		if s, ok := v.(string); ok {
			v = Redact(s)
		}
		out[k] = v
	}
	return out
}

package store

import (
	"regexp"

	"github.com/servetune/servetune/internal/redact"
)

// Redact returns text with credentials replaced by redact.Redacted
// (internal/redact). The store applies it to every free text it writes
// (spec, failure message, log tail); it is exported so that other writers
// (result files) can use it.
func Redact(text string) string { return redact.Text(text) }

// RedactSpec returns a study spec with its credentials redacted on the
// parsed YAML (redact.YAML: a block list's secret flag as well as a flow
// list's, a URL's password), then as text. The store keeps specs so.
func RedactSpec(spec string) string { return redact.Text(redact.YAML(spec)) }

// secretKey matches metadata keys that name a credential beside
// redact.Name's: headers and their authorization.
var secretKey = regexp.MustCompile(`(?i)(authorization|^headers?$)`)

// scrubMeta drops summary metadata whose key names a secret (an API key or
// header that a caller put there by mistake) and redacts string values.
func scrubMeta(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		if secretKey.MatchString(k) || redact.Name(k) {
			continue
		}
		if s, ok := v.(string); ok {
			v = Redact(s)
		}
		out[k] = v
	}
	return out
}

package store

import "github.com/servetune/servetune/internal/redact"

// Redact returns text with credentials replaced by redact.Redacted
// (internal/redact). The store applies it to every free text it writes
// (spec, failure message, log tail); it is exported so that other writers
// (result files) can use it.
func Redact(text string) string { return redact.Text(text) }

// RedactSpec returns a study spec with its credentials redacted on the
// parsed YAML (redact.YAML: a block list's secret flag as well as a flow
// list's, a URL's password), then as text. The store keeps specs so.
func RedactSpec(spec string) string { return redact.Text(redact.YAML(spec)) }

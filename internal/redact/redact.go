// Package redact removes credentials from text, argument lists, URLs, YAML
// documents and metadata before they are stored, logged or shown: Hugging
// Face and OpenAI-style tokens, bearer headers, the password of a URL, the
// values of the engines' secret flags, and the value of any flag, key or
// variable whose name says it is a key, token, secret, password or
// authentication. Everything servetune writes down goes through it
// (docs/reliability.md, "Secrets"). Redacted is the one marker that
// replaces a secret anywhere.
package redact

import (
	"bytes"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlenc"
)

// Redacted replaces a secret.
const Redacted = "[REDACTED]"

// secretWord is a name that says its value is a credential.
const secretWord = `(?:api[_-]?key|token|secret|password|passwd|credentials?|auth|authorization)`

// nameRE matches a flag, key or variable name that carries a credential:
// the word as a whole part of the name (hf_token, OPENAI_API_KEY, basic-auth,
// but not tokenizer_mode or author).
var nameRE = regexp.MustCompile(`(?i)(^|[_-])` + secretWord + `($|[_-])`)

// shortFlags are the one-letter flags whose value is a key: -k (curl-style
// tools' and proxies' API key).
var shortFlags = []string{"-k"}

// urlUserinfo is the password of a URL: scheme://user:PASSWORD@host.
var urlUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#@:"'<>]*:)[^\s/?#@"'<>]+@`)

// patterns are applied in order; each replacement keeps the groups around
// the secret.
var patterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{urlUserinfo, "${1}" + Redacted + "@"},
	{regexp.MustCompile(`hf_[A-Za-z0-9]{16,}`), Redacted},
	{regexp.MustCompile(`sk-[A-Za-z0-9_\-]{16,}`), Redacted},
	{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/\-]+=*`), "${1}" + Redacted},
	{regexp.MustCompile(`(?i)(basic\s+)[A-Za-z0-9+/]{8,}=*`), "${1}" + Redacted},
	// A flag followed by its value: --api-key VALUE, --hf-token=VALUE, -k
	// VALUE, and the YAML/JSON list form "--api-key", "VALUE".
	{regexp.MustCompile(`(?i)(--?(?:[a-z0-9]+[_-])*` + secretWord + `(?:[_-][a-z0-9]+)*|(?:^|[\s"'\[,])-k)((?:["']?\s*,\s*["']?)|=["']?|\s+["']?)[^\s"',\[\]}$-][^\s"',\]}]*`), "${1}${2}" + Redacted},
}

// keyValue is a key: value or key=value pair (YAML, logs, Python dicts, a
// middleware's auth=VALUE); an Authorization header's scheme (Bearer,
// Basic) is no secret, the credential after it is redacted by patterns.
var keyValue = regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_-])*` + secretWord + `)(["']?\s*[:=]\s*["']?)([^\s"',}$\[][^\s"',}]*)`)

// Text returns s with every credential it can recognise replaced by
// Redacted. A value that starts with $ is a reference such as ${HF_TOKEN},
// not a secret, and stays.
func Text(s string) string {
	for _, p := range patterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return keyValue.ReplaceAllStringFunc(s, func(m string) string {
		g := keyValue.FindStringSubmatch(m)
		if strings.EqualFold(g[3], "bearer") || strings.EqualFold(g[3], "basic") {
			return m
		}
		return g[1] + g[2] + Redacted
	})
}

// URL returns a URL, which need not parse, with what may carry a secret
// replaced by Redacted: the password of its user information (the whole of
// it when there is no password, as a user alone may be a token), and its
// query and fragment (?api_key=..., ?key=...). Everything before the last
// '@' is user information, so that a URL too broken to parse leaks no
// password either; the rest stays as written.
func URL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i] + "?" + Redacted
	}
	at := strings.LastIndex(u, "@")
	if at < 0 {
		return u
	}
	start := 0
	if i := strings.Index(u, "://"); i >= 0 && i < at {
		start = i + 3
	}
	if user, _, ok := strings.Cut(u[start:at], ":"); ok {
		return u[:start] + user + ":" + Redacted + u[at:]
	}
	return u[:start] + Redacted + u[at:]
}

// urlInText is a URL inside free text: a scheme, "://" and what follows up
// to a space, a quote, an angle bracket or a brace (square brackets belong
// to it: an IPv6 host, and the marker URL leaves in place of a query).
var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s"'<>{}` + "`" + `]+`)

// Message returns a message from a transport, a server or a log, redacted
// for showing or storing: every URL in it as URL (a transport error quotes
// the URL it failed on, query and all), then the whole as Text. A study's
// spec is redacted by YAML and Text instead, which keep its URLs' queries:
// the spec is the study's identity.
func Message(s string) string { return Text(urlInText.ReplaceAllStringFunc(s, URL)) }

// Header returns a NAME:VALUE header argument with its value replaced, for
// messages about it: any header may carry a credential.
func Header(h string) string {
	if k, _, ok := strings.Cut(h, ":"); ok {
		return k + ":" + Redacted
	}
	return h
}

// Known returns msg with each of the given secrets replaced wherever it
// appears: whole, and word by word for a value of several words ("Bearer
// KEY" sent as a header, echoed by a server as KEY alone). Values and
// words shorter than 4 bytes are left, as they would match ordinary text;
// a secret of that size is none.
func Known(msg string, secrets ...string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, Redacted)
		}
	}
	for _, v := range secrets {
		for _, w := range strings.Fields(v) {
			if len(w) >= 4 {
				msg = strings.ReplaceAll(msg, w, Redacted)
			}
		}
	}
	return msg
}

// metaKey names metadata that is a credential beside what Name says:
// headers, whose values may be.
var metaKey = regexp.MustCompile(`(?i)^headers?$`)

// Meta returns a copy of a result's metadata without the entries whose key
// names a secret (Name, or headers: an API key or header a caller put there
// by mistake) and with every string, at any depth, redacted as Message.
func Meta(meta map[string]any) map[string]any {
	if meta == nil {
		return nil
	}
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		if metaKey.MatchString(k) || Name(k) {
			continue
		}
		out[k] = metaValue(v)
	}
	return out
}

// metaValue redacts one metadata value: strings as Message, maps as Meta,
// lists item by item.
func metaValue(v any) any {
	switch x := v.(type) {
	case string:
		return Message(x)
	case map[string]any:
		return Meta(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = metaValue(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = Message(e)
		}
		return out
	}
	return v
}

// Name reports whether a flag, key or environment variable name carries a
// credential: the engines' secret flags (engine.IsSecretFlag), the short
// flags that take a key (-k), and any name with key, token, secret,
// password or auth in it.
func Name(name string) bool {
	for _, f := range shortFlags {
		if name == f {
			return true
		}
	}
	return engine.IsSecretFlag(name) || nameRE.MatchString(strings.TrimLeft(name, "-"))
}

// Args returns a copy of an argument list with the value of every secret
// flag replaced: "--api-key", "X" and "--api-key=X" alike, and the value of
// a NAME=VALUE argument whose name says it is a secret ("--middleware",
// "auth=X"). Every argument is then redacted as Text.
func Args(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if name, v, ok := strings.Cut(a, "="); ok {
			if Name(name) && v != "" && !strings.HasPrefix(v, "$") {
				out[i] = name + "=" + Redacted
			}
			continue
		}
		if strings.HasPrefix(a, "-") && Name(a) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-") {
			out[i+1] = Redacted
			i++
		}
	}
	for i, a := range out {
		out[i] = Text(a)
	}
	return out
}

// YAML returns a YAML document with its credentials redacted on the parsed
// values, not the text: the value of a key that names a secret (at any
// depth), a list's secret flag and its value however the list is written
// (flow or block), and every string as Text, comments too. The document
// is written back from the redacted tree; one with nothing to redact comes
// back as it was, byte for byte. Text that is no YAML is redacted as Text.
func YAML(text string) string {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return Text(text)
		}
		docs = append(docs, &n)
	}
	changed := false
	for _, d := range docs {
		changed = node(d, false) || changed
	}
	if !changed {
		return text
	}
	var b bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		if err := yamlenc.Encode(&b, d); err != nil {
			return Text(text)
		}
	}
	return b.String()
}

// node redacts n in place; secret says its key names a credential. It
// reports whether anything changed.
func node(n *yaml.Node, secret bool) bool {
	changed := false
	for _, c := range []*string{&n.HeadComment, &n.LineComment, &n.FootComment} {
		if r := Text(*c); r != *c {
			*c, changed = r, true
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			changed = node(c, false) || changed
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			changed = node(k, false) || changed
			changed = node(v, k.Kind == yaml.ScalarNode && Name(k.Value)) || changed
		}
	case yaml.SequenceNode:
		// A list of scalars is an argument list: a flag and its value are
		// two items.
		var args []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				args = nil
				break
			}
			args = append(args, c.Value)
		}
		if args != nil {
			for i, a := range Args(args) {
				if a != args[i] {
					set(n.Content[i], a)
					changed = true
				}
			}
		}
		for _, c := range n.Content {
			changed = node(c, secret) || changed
		}
	case yaml.ScalarNode:
		v := n.Value
		if secret && v != "" && !strings.HasPrefix(v, "$") && n.Tag != "!!bool" && n.Tag != "!!null" {
			v = Redacted
		} else {
			v = Text(v)
		}
		if v != n.Value {
			set(n, v)
			changed = true
		}
	case yaml.AliasNode:
		// The anchor's node is redacted where it is defined.
	}
	return changed
}

// set makes n the string v, quoted as the encoder needs (Redacted would
// read as a flow list written plain).
func set(n *yaml.Node, v string) {
	n.Value, n.Tag, n.Style = v, "!!str", n.Style&^(yaml.LiteralStyle|yaml.FoldedStyle)
	if n.Style == 0 {
		n.Style = yaml.SingleQuotedStyle
	}
}

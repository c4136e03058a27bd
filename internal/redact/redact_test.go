package redact

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/servetune/servetune/internal/hostile"
)

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{`extra_args: ["--api-key", "my-internal-token-2024"]`, "my-internal-token-2024"},
		{`extra_args: [--api-key, my-internal-token-2024]`, "my-internal-token-2024"},
		{`vllm serve m --api-key my-internal-token-2024 --port 8000`, "my-internal-token-2024"},
		{`--hf-token=abc123def`, "abc123def"},
		{`non-default args: {'api_key': 'abc123def', 'port': 8000}`, "abc123def"},
		{`HF_TOKEN=hf_abcdefghijklmnopqrstuvwx`, "hf_abcdefghijklmnopqrstuvwx"},
		{`Authorization: Bearer abc.def.ghi`, "abc.def.ghi"},
		{`db_password: hunter2`, "hunter2"},
		{`--admin-api-key "s3cr3t"`, "s3cr3t"},
		{`"--client-secret", "zzz-top"`, "zzz-top"},
	} {
		out := Text(tc.in)
		if strings.Contains(out, tc.secret) || !strings.Contains(out, Redacted) {
			t.Errorf("Text(%q) = %q", tc.in, out)
		}
	}
	for _, keep := range []string{
		`max_running_requests: 64`, `--max-num-seqs 256`, `env: [HF_TOKEN]`, `token: ${HF_TOKEN}`,
		`--tokenizer-mode auto`, `"--disable-log-requests"`,
	} {
		if out := Text(keep); out != keep {
			t.Errorf("Text(%q) = %q, want it unchanged", keep, out)
		}
	}
}

func TestArgs(t *testing.T) {
	in := []string{"vllm", "serve", "m", "--api-key", "tok", "--port", "8000", "--hf-token=x", "--max-num-seqs", "8"}
	got := strings.Join(Args(in), " ")
	want := "vllm serve m --api-key [REDACTED] --port 8000 --hf-token=[REDACTED] --max-num-seqs 8"
	if got != want {
		t.Errorf("Args = %q\nwant   %q", got, want)
	}
	if in[4] != "tok" {
		t.Error("Args changed its input")
	}
}

// FuzzText: redaction (Text, Message, URL) is idempotent and no Hugging
// Face token survives Text.
func FuzzText(f *testing.F) {
	for _, s := range []string{"HF_TOKEN=hf_abcdefghijklmnopqrstu", "Authorization: Bearer x.y", `{"api_key": "k"}`,
		"plain log line", `["--api-key", "tok"]`, "--hf-token=hf_abcdefghijklmnopqrstu"} {
		f.Add(s)
	}
	hf := regexp.MustCompile(`hf_[A-Za-z0-9]{16,}`)
	f.Fuzz(func(t *testing.T, in string) {
		out := Text(in)
		if again := Text(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		if tok := hf.FindString(out); tok != "" {
			t.Fatalf("token %q survived in %q", tok, out)
		}
		if m := Message(in); Message(m) != m {
			t.Fatalf("Message not idempotent: %q -> %q -> %q", in, m, Message(m))
		}
		if u := URL(in); URL(u) != u {
			t.Fatalf("URL not idempotent: %q -> %q -> %q", in, u, URL(u))
		}
	})
}

// TestTextMore: URL passwords, -k, --auth and a middleware's auth=VALUE.
func TestTextMore(t *testing.T) {
	for _, tc := range []struct{ in, secret, keep string }{
		{`base_url: "http://admin:pw1234@host:8000/v1"`, "pw1234", "http://admin:" + Redacted + "@host:8000/v1"},
		{`GET http://admin:pw1234@10.0.0.1:8000/metrics: 401 Unauthorized`, "pw1234", "admin:"},
		{`proxy -k tok-abcdef --port 1`, "tok-abcdef", "--port 1"},
		{`["-k", "tok-abcdef"]`, "tok-abcdef", "-k"},
		{`--auth tok-abcdef`, "tok-abcdef", "--auth"},
		{`--middleware auth=tok-abcdef`, "tok-abcdef", "--middleware auth="},
	} {
		out := Text(tc.in)
		if strings.Contains(out, tc.secret) || !strings.Contains(out, Redacted) || !strings.Contains(out, tc.keep) {
			t.Errorf("Text(%q) = %q", tc.in, out)
		}
	}
	if got := URL("https://u:p@h/x?y=1"); got != "https://u:"+Redacted+"@h/x?"+Redacted {
		t.Errorf("URL = %s", got)
	}
	for _, keep := range []string{"http://host:8000/v1", "--author me", "--enable-prefix-caching", "user@example.com"} {
		if out := Text(keep); out != keep {
			t.Errorf("Text(%q) = %q, want it unchanged", keep, out)
		}
	}
	got := strings.Join(Args([]string{"-k", "a1", "--auth", "a2", "--middleware", "auth=a3", "--x", "basic-auth=a4", "--port", "1"}), " ")
	if want := "-k [REDACTED] --auth [REDACTED] --middleware auth=[REDACTED] --x basic-auth=[REDACTED] --port 1"; got != want {
		t.Errorf("Args = %q\nwant   %q", got, want)
	}
}

// TestCallers: the cases the callers hand over, each redacted with the one
// marker and idempotently: a base URL that may not parse (openai's
// Validate and GoString, eval's output), a transport error that quotes its
// URL (the benchmark client, the prefix-cache reset, the engine-metrics
// scraper), a --header argument (the CLI), values a server may echo (the
// target's key and headers) and a result's metadata (the store).
func TestCallers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://user:s3cret@host:8000/v1", "http://user:" + Redacted + "@host:8000/v1"},
		{"https://ghp-token-only@host", "https://" + Redacted + "@host"},
		{"localhost:8000/v1?api_key=s3cret", "localhost:8000/v1?" + Redacted},
		{"http://h/v1?key=s3cret#frag", "http://h/v1?" + Redacted},
		{"http//user:s3cret@host", "http//user:" + Redacted + "@host"},
		{"://user:s3cret@", "://user:" + Redacted + "@"},
		{"ftp://user:s3cret@host:8000", "ftp://user:" + Redacted + "@host:8000"},
		{"http://127.0.0.1:8000", "http://127.0.0.1:8000"},
	} {
		got := URL(tc.in)
		if got != tc.want || URL(got) != got {
			t.Errorf("URL(%q) = %q (again %q), want %q", tc.in, got, URL(got), tc.want)
		}
	}
	for _, tc := range []struct{ in, secret, keep string }{
		{`Post "http://127.0.0.1:1/v1/completions?key=s3cret": dial tcp 127.0.0.1:1: connect: connection refused`,
			"s3cret", `Post "http://127.0.0.1:1/v1/completions?` + Redacted + `": dial tcp 127.0.0.1:1: connect: connection refused`},
		{`Get "http://admin:s3cret@10.0.0.1:8000/metrics": EOF`, "s3cret", `Get "http://admin:` + Redacted + `@10.0.0.1:8000/metrics": EOF`},
		{"unexpected EOF; Authorization: Bearer s3cret-token", "s3cret", "unexpected EOF; Authorization: Bearer " + Redacted},
		{"user@example.com wrote http://host:8000/v1", "", "user@example.com wrote http://host:8000/v1"},
	} {
		got := Message(tc.in)
		if (tc.secret != "" && strings.Contains(got, tc.secret)) || got != tc.keep || Message(got) != got {
			t.Errorf("Message(%q) = %q, want %q", tc.in, got, tc.keep)
		}
	}
	if got := Header("X-Api-Key: s3cret"); got != "X-Api-Key:"+Redacted {
		t.Errorf("Header = %q", got)
	}
	if got := Header("no colon"); got != "no colon" {
		t.Errorf("Header without a value = %q", got)
	}
	got := Known("bad auth: Bearer sk-ECHOED and tok-HEADER; KEY alone: sk-ECHOED; 'abc' stays", "Bearer sk-ECHOED", "tok-HEADER", "abc", "")
	if want := "bad auth: " + Redacted + " and " + Redacted + "; KEY alone: " + Redacted + "; 'abc' stays"; got != want {
		t.Errorf("Known = %q\nwant    %q", got, want)
	}
	meta := map[string]any{
		"api_key": "s3cret", "Headers": "X-Token: s3cret", "authorization": "Bearer s3cret", "seed": 7.0,
		"endpoint": "http://127.0.0.1:8000", "note": "hf_AbCdEfGhIjKlMnOpQrStUv",
		"engine_metrics_error": `Get "http://u:s3cret@h/metrics?token=s3cret": EOF`,
		"nested":               map[string]any{"hf_token": "s3cret", "url": "http://h/?k=s3cret"},
		"list":                 []any{"password: s3cret", 1},
	}
	out := Meta(meta)
	raw, _ := json.Marshal(out)
	if strings.Contains(string(raw), "s3cret") || strings.Contains(string(raw), "hf_AbCd") {
		t.Errorf("Meta leaks: %s", raw)
	}
	for _, k := range []string{"api_key", "Headers", "authorization"} {
		if _, ok := out[k]; ok {
			t.Errorf("Meta kept %s", k)
		}
	}
	if out["endpoint"] != "http://127.0.0.1:8000" || out["seed"] != 7.0 || meta["api_key"] != "s3cret" {
		t.Errorf("Meta = %v (input %v)", out, meta)
	}
	if Meta(nil) != nil {
		t.Error("Meta(nil) is not nil")
	}
}

const specWithSecrets = `name: s   # the study
model: m
launcher:
  kind: endpoint
  base_url: "http://admin:pw-9f8e7d@10.0.0.1:8000"
space:
  max_running_requests: [32, 64]
  extra_args:
    - --api-key
    - tok-block-1234
    - -k
    - tok-short-1234
    - --auth
    - tok-auth-1234
    - --middleware
    - auth=tok-mw-1234
    - --disable-log-requests
  flow_args: [--api-key, tok-flow-1234, --port, "8000"]
env: {HF_TOKEN: hf_abcdefghijklmnopqrstuvwxyz, PATH_X: /usr/bin}
headers:
  Authorization: Bearer tok-header-1234
# a comment with token: tok-comment-1234
`

// TestYAML: secrets are redacted on the parsed document however the list
// is written; everything else parses back the same, and a document without
// secrets comes back byte for byte.
func TestYAML(t *testing.T) {
	out := YAML(specWithSecrets)
	for _, s := range []string{"pw-9f8e7d", "tok-block-1234", "tok-short-1234", "tok-auth-1234", "tok-mw-1234", "tok-flow-1234",
		"hf_abcdefghijklmnopqrstuvwxyz", "tok-header-1234", "tok-comment-1234"} {
		if strings.Contains(out, s) {
			t.Errorf("%s kept:\n%s", s, out)
		}
	}
	var before, after map[string]any
	if err := yaml.Unmarshal([]byte(specWithSecrets), &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(out), &after); err != nil {
		t.Fatalf("redacted spec does not parse: %v\n%s", err, out)
	}
	args := after["space"].(map[string]any)["extra_args"].([]any)
	want := []any{"--api-key", Redacted, "-k", Redacted, "--auth", Redacted, "--middleware", "auth=" + Redacted, "--disable-log-requests"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("extra_args %q, want %q", args, want)
	}
	if got := after["launcher"].(map[string]any)["base_url"]; got != "http://admin:"+Redacted+"@10.0.0.1:8000" {
		t.Errorf("base_url %v", got)
	}
	if !reflect.DeepEqual(after["space"].(map[string]any)["max_running_requests"], before["space"].(map[string]any)["max_running_requests"]) ||
		after["env"].(map[string]any)["PATH_X"] != "/usr/bin" || after["name"] != "s" {
		t.Errorf("values other than secrets changed:\n%s", out)
	}
	if YAML(out) != out {
		t.Errorf("not idempotent:\n%s\n%s", out, YAML(out))
	}
	plain := "name: s\n# keep this comment\nspace: {extra_args: [--disable-log-requests]}\n"
	if YAML(plain) != plain {
		t.Errorf("a spec without secrets changed: %q", YAML(plain))
	}
}

// TestYAMLHostile: a hostile string as a secret or as a plain value never
// breaks the document: the redacted text parses to the same keys, the
// plain value comes back whole (as Text leaves it), the secret does not.
func TestYAMLHostile(t *testing.T) {
	for _, h := range hostile.Strings {
		if !utf8.ValidString(h) || strings.ContainsAny(h, "\x00\x7f\u0080\u0081\u0082\u0083\u0084\u0086\u0087\u0088\u0089\u008a\u008b\u008c\u008d\u008e\u008f\u0090\u0091\u0092\u0093\u0094\u0095\u0096\u0097\u0098\u0099\u009a\u009b\u009c\u009d\u009e\u009f\ufeff\x07\x08\x1b\u0085") {
			continue // YAML cannot hold it
		}
		in := map[string]any{"plain": h, "api_key": "s3cr3t-" + h, "extra_args": []string{"--api-key", "s3cr3t-" + h, "--x", h}}
		b, err := json.Marshal(in) // YAML too, every string double-quoted
		if err != nil {
			t.Fatal(err)
		}
		out := YAML(string(b))
		var got map[string]any
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: %v\n%s", h, err, out)
		}
		if len(got) != 3 || got["plain"] != Text(h) || got["api_key"] != Redacted || strings.Contains(out, "s3cr3t") ||
			!reflect.DeepEqual(got["extra_args"], []any{"--api-key", Redacted, "--x", Text(h)}) {
			t.Errorf("%q: %#v\n%s", h, got, out)
		}
	}
}

package redact

import (
	"regexp"
	"strings"
	"testing"
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

// FuzzText: redaction is idempotent and no Hugging Face token survives it.
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
	})
}

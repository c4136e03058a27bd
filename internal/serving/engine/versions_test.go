package engine

import (
	"strings"
	"testing"
)

// TestCheckFlags: a flag is checked against the release a command is
// for: vLLM's --disable-log-requests is refused from 0.12.0 on and taken
// before; --enable-log-requests the other way round.
func TestCheckFlags(t *testing.T) {
	newest := NewestVersion(VLLM)
	argv := []string{"vllm", "serve", "m", "--disable-log-requests", "--max-num-seqs", "8"}
	if p := CheckFlags(VLLM, newest, argv); len(p) != 1 || !strings.Contains(p[0], "--disable-log-requests") || !strings.Contains(p[0], newest.String()) {
		t.Errorf("newest vLLM: %q; want --disable-log-requests refused", p)
	}
	old := mustVersion("0.9.2")
	if p := CheckFlags(VLLM, old, argv); p != nil {
		t.Errorf("vLLM 0.9.2: %q; want none", p)
	}
	if p := CheckFlags(VLLM, old, []string{"--enable-log-requests"}); len(p) != 1 {
		t.Errorf("vLLM 0.9.2 --enable-log-requests: %q; want refused", p)
	}
	if p := CheckFlags(SGLang, NewestVersion(SGLang), argv); p != nil {
		t.Errorf("SGLang: %q; want none (vLLM's table only)", p)
	}
	if err := CheckVersion(VLLM, mustVersion("0.5.4")); err == nil || !strings.Contains(err.Error(), "0.6.0") {
		t.Errorf("CheckVersion(0.5.4) = %v; want the known span named", err)
	}
	if v, err := ParseVersion("v0.6.6.post1"); err != nil || v != (Version{0, 6, 6}) {
		t.Errorf("ParseVersion(v0.6.6.post1) = %v, %v", v, err)
	}
	if _, err := ParseVersion("latest"); err == nil {
		t.Error("ParseVersion(latest): want an error")
	}
}

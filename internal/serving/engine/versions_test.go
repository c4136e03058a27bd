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

// An image names the release a command is for, and a command for a
// release names its image: Image and ImageRelease read each other, the
// newest release's tag is the published one, and a study's image decides
// its release only when the table knows that release.
func TestImageRelease(t *testing.T) {
	for _, e := range []Engine{VLLM, SGLang} {
		for _, v := range []Version{NewestVersion(e), mustVersion("0.5.3")} {
			if got, ok := ImageRelease(Image(e, v)); !ok || got != v {
				t.Errorf("%s %s: image %s reads back %s %v", e, v, Image(e, v), got, ok)
			}
		}
	}
	if got := DefaultImage(SGLang); got != "lmsysorg/sglang:v0.5.10.post1" {
		t.Errorf("newest SGLang image %s", got)
	}
	if got := DefaultImage(VLLM); got != "vllm/vllm-openai:v"+NewestVersion(VLLM).String() {
		t.Errorf("newest vLLM image %s", got)
	}
	for image, want := range map[string]Version{
		"vllm/vllm-openai:v0.11.0":           mustVersion("0.11.0"),
		"registry.local:5000/vllm:v0.10.1":   mustVersion("0.10.1"),
		"vllm/vllm-openai:latest":            NewestVersion(VLLM),
		"vllm/vllm-openai":                   NewestVersion(VLLM),
		"":                                   NewestVersion(VLLM),
		"vllm/vllm-openai:v9.0.0":            NewestVersion(VLLM), // past the table's releases
		"localhost:5000/servetune-sim:local": NewestVersion(VLLM),
	} {
		if got := Release(VLLM, image); got != want {
			t.Errorf("Release(vllm, %q) = %s, want %s", image, got, want)
		}
	}
}

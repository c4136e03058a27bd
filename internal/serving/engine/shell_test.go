package engine

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/hostile"
)

// TestShellQuoteHostile: bash reads every hostile string back from its
// quoted word as exactly one argument, and the word is one line of
// printable text.
func TestShellQuoteHostile(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var in []string
	for _, s := range hostile.Strings {
		if !strings.Contains(s, "\x00") { // no argument holds a NUL
			in = append(in, s)
		}
	}
	for _, s := range hostile.Strings {
		q := ShellQuote(s)
		for _, c := range []byte(q) {
			if c < 0x20 || c == 0x7f || c >= 0x80 && !shellPlain(s) {
				t.Errorf("ShellQuote(%q) = %q holds byte %#x", s, q, c)
				break
			}
		}
	}
	script := "printf '%s\\0' " + ShellJoin(in)
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", script).Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(in) {
		t.Fatalf("%d words back, want %d: %q", len(got), len(in), got)
	}
	for i := range in {
		if got[i] != in[i] {
			t.Errorf("bash read %q back as %q (quoted %s)", in[i], got[i], ShellQuote(in[i]))
		}
	}
	for _, s := range []string{"plain", "a/b-c_d.e:f=g,h+i@j%k"} {
		if q := ShellQuote(s); q != s {
			t.Errorf("ShellQuote(%q) = %s, want it bare", s, q)
		}
	}
}

// TestDockerRunQuoted: the docker run line's quoted words are read back by
// bash as the argv, with $HOME expanded in the cache volume.
func TestDockerRunQuoted(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	argv := DockerRun(VLLM, "", "/models/x\n; touch pwned", nil, []string{"--api-key", "[REDACTED]"}, 2)
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "printf '%s\\0' "+ShellJoin(argv))
	cmd.Env = []string{"HOME=/home/u"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	want := append([]string(nil), argv...)
	for i, a := range want {
		want[i] = strings.ReplaceAll(a, "$HOME", "/home/u")
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("read back %q\nwant %q", got, want)
	}
}

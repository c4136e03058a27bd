package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/hostile"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/launcher"
)

// TestJobScriptHostile: a study name, model path, extra flag and module
// name from the hostile list leave the batch script's lines as they are
// (the comment stays one line, no word becomes a command), and bash runs
// it to an exec of exactly the argv (exec replaced by printf here; no
// slurmctld needed).
func TestJobScriptHostile(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	plain := jobScript(launcher.Spec{Study: "s", Trial: 1}, filepath.Join(dir, "addr"), []string{"vllm", "serve", "m"}, []string{"cuda"})
	for i, h := range hostile.Strings {
		if strings.Contains(h, "\x00") {
			continue // no argument holds a NUL
		}
		s := &Slurm{}
		spec := launcher.Spec{Engine: engine.VLLM, Model: "m/" + h, Study: h, Trial: 1, Settings: engine.Settings{"max_running_requests": 8},
			Extra: []string{"--served-model-name", h}}
		argv, err := s.engineArgv(spec)
		if err != nil {
			t.Fatal(err)
		}
		addr := filepath.Join(dir, "addr")
		script := jobScript(spec, addr, argv, []string{h})
		if got, want := strings.Count(script, "\n"), strings.Count(plain, "\n"); got != want {
			t.Errorf("%d: %q: the script has %d lines, want %d:\n%s", i, h, got, want, script)
			continue
		}
		// Run it with module and exec printing their arguments.
		script = strings.Replace(script, "\nexec ", "\nprintf '%s\\0' ", 1)
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "module() { :; }\n"+script)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%d: %q: bash: %v\n%s", i, h, err, script)
			continue
		}
		_, after, _ := strings.Cut(string(out), "\n") // the echo of node and GPUs
		got := strings.Split(strings.TrimSuffix(after, "\x00"), "\x00")
		if len(got) != len(argv) {
			t.Errorf("%d: %q: %d words, want %d: %q", i, h, len(got), len(argv), got)
			continue
		}
		for j, a := range argv {
			if a != hostVar && a != portVar && got[j] != a {
				t.Errorf("%d: word %d read back %q, want %q", i, j, got[j], a)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("%q ran a command", h)
		}
	}
}

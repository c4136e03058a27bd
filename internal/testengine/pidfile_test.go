package testengine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// pidfileOurs runs scripts/pidfile.sh's pidfile_ours on a pid file and a
// program name, as scripts/slurm-up.sh and scripts/kube-up.sh call it.
func pidfileOurs(t *testing.T, pidfile, program string) bool {
	t.Helper()
	script, err := filepath.Abs("../../scripts/pidfile.sh")
	if err != nil {
		t.Fatal(err)
	}
	err = exec.Command("bash", "-c", `. "$1" && pidfile_ours "$2" "$3"`, "bash", script, pidfile, program).Run()
	if err == nil {
		return true
	}
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatal(err)
	}
	return false
}

// A pid file that outlived a restart of the machine names whatever process
// has that pid now: the start scripts must neither take that process for
// their daemon nor kill it: slurm-up.sh would then never start slurmctld
// and wait for it in vain.
func TestPidfileOursNamesOnlyTheDaemon(t *testing.T) {
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		t.Skip("no /proc: pidfile_ours reads /proc/PID/exe")
	}
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "slurmctld.pid")
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pidfileOurs(t, pidfile, "slurmctld") {
		t.Error("a pid file naming a live sleep is taken for slurmctld")
	}
	if !pidfileOurs(t, pidfile, "sleep") {
		t.Error("a pid file naming a live sleep is not taken for sleep")
	}
	other.Process.Kill()
	other.Wait()
	if pidfileOurs(t, pidfile, "sleep") {
		t.Error("a pid file naming an exited process is taken for it")
	}
	for name, content := range map[string]string{"empty": "", "not a number": "12ab\n", "missing": "-"} {
		f := filepath.Join(dir, name)
		if content != "-" {
			if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if pidfileOurs(t, f, "sleep") {
			t.Errorf("%s pid file is taken for a live process", name)
		}
	}
}

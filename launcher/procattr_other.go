//go:build !linux

package launcher

import (
	"os/exec"
	"syscall"
)

// startEngine starts cmd in its own process group. Outside Linux there is no
// parent-death signal: an engine outlives a servetune killed with SIGKILL.
func startEngine(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}

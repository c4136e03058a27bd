//go:build linux

package launcher

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startEngine starts cmd in its own process group with the parent-death
// signal set, so an engine dies with servetune even when servetune is killed
// with SIGKILL and no Stop runs.
//
// Caveat: Linux sends Pdeathsig when the *thread* that forked the child ends,
// not the process. The Go runtime ends a thread only when a goroutine exits
// while locked to it, so Start runs with this goroutine locked to its thread
// for the fork and unlocked afterwards (never exiting locked); callers must
// not call it from a goroutine that holds runtime.LockOSThread and then
// exits. Only the engine's leader gets the signal: workers it forks (vLLM's
// tensor-parallel processes) die through the engine or by Stop's group kill.
func startEngine(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

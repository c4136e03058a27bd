//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// pidAlive: signal 0 checks existence; EPERM means alive but not ours.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

//go:build linux

package proc

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// WaitEnd returns once the process pid has ended (exited or killed; a
// zombie no one has reaped yet counts as ended), or with ctx's error. It
// waits on the process's pidfd, which becomes readable when the process
// terminates, so it returns at the event, not at the next poll of /proc.
func WaitEnd(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // already gone
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		// A bounded wait each time round, so that ctx is honoured.
		n, err := unix.Poll(fds, 100)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return err
		case n > 0:
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

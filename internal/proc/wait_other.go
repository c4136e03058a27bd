//go:build !linux

package proc

import (
	"context"
	"time"
)

// WaitEnd returns once the process pid has ended, or with ctx's error.
// Without Linux's pidfd it checks the process every 20 ms.
func WaitEnd(ctx context.Context, pid int) error {
	for pidAlive(pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

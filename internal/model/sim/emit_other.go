//go:build !unix

package sim

import "syscall"

// writeNow reports that nothing was written: without a portable
// non-blocking write, every stream goes through its drain goroutine.
func writeNow(syscall.RawConn, []byte) (int, error) { return 0, nil }

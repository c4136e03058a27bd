//go:build !unix

package selfstats

import "time"

// CPUTime is 0 where getrusage is missing.
func CPUTime() time.Duration { return 0 }

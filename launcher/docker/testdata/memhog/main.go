// Command memhog allocates memory and touches every page until the kernel
// kills it: the image of TestDockerKernelOOMKill, whose container memory
// limit it exceeds. It never answers /health.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Fprintln(os.Stderr, "INFO memhog: allocating")
	var keep [][]byte
	for {
		b := make([]byte, 8<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		time.Sleep(10 * time.Millisecond)
	}
}

package sim

import (
	"testing"
	"time"
)

// BenchmarkRunVirtual10k is the `sim run` speed goal: 10,000 requests of 512
// in / 128 out at concurrency 256 in virtual time.
func BenchmarkRunVirtual10k(b *testing.B) {
	cfg := mustParse(b, "llama-3.1-8b", "--max-model-len", "4096")
	reqs := fixedReqs(10000, 512, 128)
	sched := make([]time.Duration, len(reqs))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RunVirtualSchedule(cfg, reqs, sched, 256); err != nil {
			b.Fatal(err)
		}
	}
}

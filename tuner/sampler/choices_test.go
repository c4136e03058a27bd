package sampler

import (
	"testing"

	"github.com/servetune/servetune/space"
)

// TestChoicesBuiltOnce: a long choice list's labels are built once, not
// per proposal (9,999 values took 750 MB for 6 trials).
func TestChoicesBuiltOnce(t *testing.T) {
	vals := make([]any, 9999)
	for i := range vals {
		vals[i] = i + 1
	}
	p := space.Param{Name: "max_running_requests", Kind: space.KindCategorical, Choices: vals}
	first := choices(p)
	if len(first) != 9999 || first[9998] != "9998:9999" {
		t.Fatalf("labels %d, last %q", len(first), first[len(first)-1])
	}
	if allocs := testing.AllocsPerRun(10, func() { choices(p) }); allocs > 2 {
		t.Errorf("%v allocations per call of a parsed list's labels, want at most 2", allocs)
	}
}

package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestUnknownSet(t *testing.T) {
	b := bench{from: 1, realities: 1, out: io.Discard}
	err := b.run(context.Background(), "../../examples/guided-bench.yaml", []string{"nonesuch"})
	if err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("unknown set: %v", err)
	}
}

// TestSetLineRounds: the set line's 90th percentile is measure's
// (linear interpolation: 3.4 between the 9th and 10th of ten values 1 1 1
// 1 1 2 2 3 3 7), printed to 3 significant digits, not as the float
// 3.3999999999999986 it is computed as; a whole median stays whole.
func TestSetLineRounds(t *testing.T) {
	trials := map[string][]int{
		"guided": {1, 2, 1, 3, 1, 7, 2, 1, 3, 1},
		"tpe":    {33, 34, 30, 40, 101, 12, 20, 35, 36, 31},
		"random": {18, 19, 20, 17, 18, 19, 16, 15, 101, 14},
	}
	got := setLine("guided-bench", trials, map[string]int{"guided": 1, "tpe": 14})
	want := "guided-bench: guided=1.5 tpe=33.5 random=18 p90_guided=3.4 oom_launches_guided=1 oom_launches_tpe=14"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, c := range []struct {
		x    float64
		want string
	}{{3.3999999999999986, "3.4"}, {18.1, "18.1"}, {101, "101"}, {10.049, "10"}, {1234.5, "1230"}, {0, "0"}} {
		if s := sig3(c.x); s != c.want {
			t.Errorf("sig3(%v) = %s, want %s", c.x, s, c.want)
		}
	}
}

package spec

import (
	"testing"
	"time"
)

func TestETA(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name      string
		durations []time.Duration
		remaining int
		parallel  int
		want      time.Duration
		ok        bool
	}{
		{"nothing finished", nil, 10, 1, 0, false},
		{"nothing left", []time.Duration{s}, 0, 1, 0, false},
		{"mean of finished", []time.Duration{2 * s, 4 * s}, 5, 1, 15 * s, true},
		{"parallel rounds up", []time.Duration{10 * s}, 3, 2, 20 * s, true},
		{"parallel exact", []time.Duration{10 * s}, 4, 2, 20 * s, true},
		{"zero parallel is one", []time.Duration{10 * s}, 2, 0, 20 * s, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ETA(c.durations, c.remaining, c.parallel)
			if got != c.want || ok != c.ok {
				t.Errorf("ETA = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                       "850ms",
		42*time.Second + 300*time.Millisecond:        "42s",
		3*time.Minute + 7*time.Second:                "3m07s",
		2*time.Hour + 5*time.Minute + 10*time.Second: "2h05m",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

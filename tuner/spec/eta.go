package spec

import (
	"fmt"
	"time"
)

// Planned is how many trials the study runs at most: the search trials
// and every confirmation run (fewer when fewer candidates qualify).
func (spec *Spec) Planned() int {
	return spec.Tuner.Trials + spec.Tuner.Confirm.Top*spec.Tuner.Confirm.Runs
}

// ETA estimates the wall time a study still needs from the wall times of
// the trials it has finished: remaining trials × their mean duration,
// divided by the trials that run at once. ok is false before the first
// trial has finished, or when nothing remains.
func ETA(durations []time.Duration, remaining, parallel int) (eta time.Duration, ok bool) {
	if len(durations) == 0 || remaining <= 0 {
		return 0, false
	}
	var sum time.Duration
	for _, d := range durations {
		sum += d
	}
	mean := sum / time.Duration(len(durations))
	// Whole rounds of parallel trials: three trials left on two GPUs
	// take two trial-times, not one and a half.
	rounds := (remaining + max(parallel, 1) - 1) / max(parallel, 1)
	return mean * time.Duration(rounds), true
}

// ShortDuration writes d for a progress line: "850ms", "42s", "3m07s",
// "2h05m".
func ShortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
}

package measure

import (
	"strings"
	"testing"
	"time"
)

// TestClientJudge: a level is suspect when the client's median send lateness
// passes the larger of 10 ms and a tenth of its median E2EL, or its p99
// loop lag the larger of 10 ms and a tenth of its p99 TTFT.
func TestClientJudge(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name             string
		late, lags       []time.Duration
		ttftP99, e2elP50 float64
		why              string // "" = not suspect
	}{
		{"idle client", ms(0, 1, 1), ms(0, 0, 1), 100, 1000, ""},
		{"late sends", ms(120, 150, 200), ms(0, 0, 1), 100, 1000, "sent late: median 150.0 ms"},
		{"a rare late send", ms(0, 1, 1, 1, 500), ms(0, 0, 1), 100, 1000, ""},
		{"late under a tenth of a long request", ms(120, 150, 200), ms(0, 0, 1), 100, 2000, ""},
		{"starved loop", ms(0, 1, 1), ms(0, 2, 15), 50, 1000, "starved"},
		{"floor for a fast server", ms(0, 8, 8), ms(0, 9), 5, 20, ""},
		{"no requests", nil, nil, 0, 0, ""},
	} {
		c := NewClient(tc.late, tc.lags, time.Second, 2*time.Second, tc.ttftP99, tc.e2elP50)
		if c.Suspect != (tc.why != "") || !strings.Contains(c.Why, tc.why) {
			t.Errorf("%s: suspect %v %q, want %q", tc.name, c.Suspect, c.Why, tc.why)
		}
		if c.CPU != 0.5 {
			t.Errorf("%s: cpu %v cores, want 0.5", tc.name, c.CPU)
		}
	}
	if (Summary{}).Suspect() {
		t.Error("a level without client figures is suspect")
	}
}

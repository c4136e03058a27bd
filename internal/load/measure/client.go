package measure

import (
	"fmt"
	"math"
	"time"
)

// Client is the benchmark client's own timing during a level: how late it
// sent each request after it could have, how late a probe of its event
// loop woke, and the CPU its process used. A starved client (a dashboard,
// another process, a slow disk) stretches every figure it takes, so a
// level whose client fell behind is Suspect: its numbers are partly the
// client's, not the server's.
type Client struct {
	// Send lateness: t_send minus the instant the request could go, the
	// later of its intended send time and the moment a concurrency slot
	// freed (closed loop: the end of the response before it).
	SendLatenessP50 float64 `json:"send_lateness_p50_ms"`
	SendLatenessP99 float64 `json:"send_lateness_p99_ms"`
	// Loop lag: how late a probe sleeping ProbeEvery at a time woke; a
	// chunk read that late is timed that late.
	LoopLagP99 float64 `json:"loop_lag_p99_ms"`
	LoopLagMax float64 `json:"loop_lag_max_ms"`
	// CPU is the cores the client's process used during the level (CPU
	// time over wall time; the process may also serve a dashboard or an
	// engine).
	CPU     float64 `json:"cpu_cores"`
	Suspect bool    `json:"suspect,omitempty"`
	Why     string  `json:"suspect_why,omitempty"`
}

// ClientLateFloorMs and ClientLateFraction set when a client fell behind.
// Two ways, each by what it corrupts:
//   - its median send lateness exceeds the larger of 10 ms and a tenth of
//     the level's median E2EL: its slots sat idle (closed loop) or its
//     arrivals came late (open loop) often enough to cut the load offered,
//     and the throughput with it, by about a tenth;
//   - its p99 loop lag exceeds the larger of 10 ms and a tenth of the
//     level's p99 TTFT: a chunk read that late is timed that late, so the
//     tail latencies carry the client's error.
//
// A tenth is the error a figure may carry before it misleads a comparison
// between configurations; the 10 ms floor is ten times what an idle client
// shows (bench sends and wakes within about a millisecond: timer
// resolution, internal/load/bench/http.go spinWindow), so a fast server's levels are not
// marked for scheduling noise. A rare hiccup (one send in a hundred) moves
// neither median nor, alone, the probe's p99.
const (
	ClientLateFloorMs  = 10.0
	ClientLateFraction = 0.1
)

// ProbeEvery is the loop-lag probe's sleep.
const ProbeEvery = 5 * time.Millisecond

// NewClient summarises a level's client timing (late: per-request send
// lateness, lags: probe oversleeps) and judges it against the level's
// p99 TTFT and median E2EL in milliseconds.
func NewClient(late, lags []time.Duration, cpu, wall time.Duration, ttftP99, e2elP50 float64) *Client {
	c := &Client{
		SendLatenessP50: pct(late, 50),
		SendLatenessP99: pct(late, 99),
		LoopLagP99:      pct(lags, 99),
	}
	for _, l := range lags {
		c.LoopLagMax = max(c.LoopLagMax, math.Round(1000*ms(l))/1000)
	}
	if wall > 0 {
		c.CPU = math.Round(100*cpu.Seconds()/wall.Seconds()) / 100
	}
	c.Judge(ttftP99, e2elP50)
	return c
}

// Judge sets Suspect and Why from the figures and the level's p99 TTFT
// and median E2EL (milliseconds; 0 when none completed).
func (c *Client) Judge(ttftP99, e2elP50 float64) {
	send := max(ClientLateFloorMs, ClientLateFraction*e2elP50)
	lag := max(ClientLateFloorMs, ClientLateFraction*ttftP99)
	c.Suspect, c.Why = false, ""
	switch {
	case c.SendLatenessP50 > send:
		c.Suspect, c.Why = true, fmt.Sprintf("the client sent late: median %.1f ms after a request could go, over the %.0f ms limit", c.SendLatenessP50, send)
	case c.LoopLagP99 > lag:
		c.Suspect, c.Why = true, fmt.Sprintf("the client was starved: its loop woke p99 %.1f ms late, over the %.0f ms limit", c.LoopLagP99, lag)
	}
}

// pct is the p-th percentile of ds in milliseconds (PercentileOf), rounded to
// the microsecond, 0 when empty.
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	return math.Round(1000*PercentileOf(ds, p)/float64(time.Millisecond)) / 1000
}

// Suspect reports whether the level's client fell behind (Client.Suspect).
func (s Summary) Suspect() bool { return s.Client != nil && s.Client.Suspect }

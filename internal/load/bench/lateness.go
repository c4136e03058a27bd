package bench

import (
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/selfstats"
)

// latenessReporter is a transport that knows how late it sent each request
// of its last phase (the HTTP transport; the simulated engine in virtual
// time has no wall clock to be late on).
type latenessReporter interface {
	Lateness() []time.Duration
}

// clientProbe watches the client during a measured phase: a goroutine that
// sleeps measure.ProbeEvery at a time and records how late it wakes (the
// lag every goroutine of the client sees, a response's chunks included),
// and the process's CPU time.
type clientProbe struct {
	start time.Time
	cpu0  time.Duration
	quit  chan struct{}
	wg    sync.WaitGroup
	lags  []time.Duration
}

func startClientProbe() *clientProbe {
	p := &clientProbe{start: time.Now(), cpu0: selfstats.CPUTime(), quit: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTimer(measure.ProbeEvery)
		defer t.Stop()
		for {
			want := time.Now().Add(measure.ProbeEvery)
			select {
			case <-p.quit:
				return
			case <-t.C:
				// Now, not the timer's instant: a goroutine starved by
				// the others of this process runs after its timer fired.
				p.lags = append(p.lags, max(time.Since(want), 0))
			}
			t.Reset(measure.ProbeEvery)
		}
	})
	return p
}

// stop ends the probe and judges the level: late is each request's send
// lateness, ttftP99 and e2elP50 the level's latencies (ms, this clock's).
func (p *clientProbe) stop(late []time.Duration, ttftP99, e2elP50 float64) *measure.Client {
	close(p.quit)
	p.wg.Wait()
	return measure.NewClient(late, p.lags, selfstats.CPUTime()-p.cpu0, time.Since(p.start), ttftP99, e2elP50)
}

package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/term"
)

// progressBar draws a one-line progress bar on a terminal stream (stderr),
// redrawn in place with '\r' at most every 100 ms. It is safe for concurrent
// use. Other commands may reuse it: newProgress, Update, Done.
type progressBar struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	total    int           // 0: unknown count, show time against duration
	duration time.Duration // expected length when total is 0
	start    time.Time
	last     time.Time
	done     int
	width    int
	inflight int           // requests in flight (Waiting)
	oldest   time.Duration // the oldest one's age
}

// newProgress returns a bar for total items (or, when total is 0, for a run
// of the given duration); a nil w gives a bar that draws nothing.
func newProgress(w io.Writer, label string, total int, duration time.Duration) *progressBar {
	return &progressBar{w: w, label: term.Line(label), total: total, duration: duration, start: time.Now(), width: 30}
}

// Update records done items out of total (total 0 keeps the bar's own).
func (p *progressBar) Update(done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if total > 0 {
		p.total = total
	}
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.draw(now)
	}
}

// Waiting records the requests in flight and the oldest one's age (every
// second), so a server that answers nothing shows as requests waiting, not
// as a bar stuck at 0%.
func (p *progressBar) Waiting(inflight int, oldest time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight, p.oldest = inflight, oldest
	p.last = time.Now()
	p.draw(p.last)
}

// Done draws the final state and ends the line.
func (p *progressBar) Done() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(time.Now())
	fmt.Fprintln(p.w)
}

func (p *progressBar) draw(now time.Time) {
	if p.w == nil {
		return
	}
	el := now.Sub(p.start)
	frac := 0.0
	switch {
	case p.total > 0:
		frac = float64(p.done) / float64(p.total)
	case p.duration > 0:
		frac = el.Seconds() / p.duration.Seconds()
	}
	frac = min(max(frac, 0), 1)
	n := int(frac * float64(p.width))
	bar := strings.Repeat("=", n) + strings.Repeat(" ", p.width-n)
	rate := 0.0
	if el > 0 {
		rate = float64(p.done) / el.Seconds()
	}
	count := fmt.Sprintf("%d", p.done)
	if p.total > 0 {
		count = fmt.Sprintf("%d/%d", p.done, p.total)
	}
	wait := ""
	if p.inflight > 0 && p.oldest >= 5*time.Second {
		// Only once a request has waited long enough to be worth a look.
		wait = fmt.Sprintf("%d in flight, oldest %s ", p.inflight, p.oldest.Truncate(time.Second))
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%% %s %.1f req/s %s %s", p.label, bar, 100*frac, count, rate, el.Truncate(time.Second), wait)
}

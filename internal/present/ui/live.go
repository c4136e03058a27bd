package ui

import (
	"sort"
	"sync"
	"time"

	"github.com/servetune/servetune/space"
)

// Live is what a running study tells the dashboard beyond the database:
// which load level each running trial is measuring and how far it is.
// Its methods match tuner.Study's hooks and are safe for concurrent use.
type Live struct {
	mu     sync.Mutex
	trials map[int]*LiveTrial
	ver    uint64 // bumped by every change
}

// Version changes whenever the progress does (a dashboard redraws then).
func (l *Live) Version() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ver
}

// LiveTrial is one running trial's progress.
type LiveTrial struct {
	Number      int
	Settings    space.Settings
	GPUs        []int
	Started     time.Time
	Level       string // the level being measured; "" while the engine starts
	Done, Total int    // requests of that level
	Levels      int    // levels finished
}

// Start records a trial that started.
func (l *Live) Start(number int, settings space.Settings, gpus []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ver++
	if l.trials == nil {
		l.trials = map[int]*LiveTrial{}
	}
	l.trials[number] = &LiveTrial{Number: number, Settings: settings, GPUs: gpus, Started: time.Now()}
}

// Progress records done of total requests of a trial's level.
func (l *Live) Progress(number int, level string, done, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.trials[number]
	if t == nil {
		return
	}
	l.ver++
	if t.Level != "" && t.Level != level {
		t.Levels++
	}
	t.Level, t.Done, t.Total = level, done, total
}

// Finish forgets a trial that ended (the database has it now).
func (l *Live) Finish(number int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ver++
	delete(l.trials, number)
}

// Running returns the running trials by number.
func (l *Live) Running() []LiveTrial {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LiveTrial, 0, len(l.trials))
	for _, t := range l.trials {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

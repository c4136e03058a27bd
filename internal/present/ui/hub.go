package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"sync"
	"time"
)

// A hub renders one page's fragments (the index, or one study) for every
// open copy of it: it polls the store's change token (store.Changes, a few
// aggregates) each Poll and reads and renders the study again only when
// the token moved, the running study's Live moved, or a running study's
// clocks (elapsed, ETA, "running for") are clockEvery old. A finished
// study costs one render, whatever the number of pages open on it; each
// connection only copies the encoded events it has not sent yet.
type hub struct {
	s   *Server
	key string // "" for the index, else the study's name

	mu      sync.Mutex
	frags   []hubFrag     // the current render, in page order
	changed chan struct{} // closed and replaced when frags change
	ready   chan struct{} // closed once frags holds a first render
	subs    int
	lastUse time.Time
	ver     uint64
}

// hubFrag is a fragment with the version it last changed at and its
// server-sent event, encoded once for all subscribers.
type hubFrag struct {
	frag
	ver   uint64
	event []byte
}

// clockEvery is how often a running study's clocks are redrawn when
// nothing else changed: they show minutes and seconds, and a redraw of a
// 300-trial study costs milliseconds of CPU the benchmark may need.
const clockEvery = 5 * time.Second

// hubLinger is how many polls a hub nobody watches keeps going, so the
// event stream a page opens right after loading finds the render the
// page was served from.
const hubLinger = 10

// hub returns the running hub of key, starting one.
func (s *Server) hub(key string) *hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hubs[key]; h != nil {
		h.join()
		return h
	}
	if s.hubs == nil {
		s.hubs = map[string]*hub{}
	}
	h := &hub{s: s, key: key, changed: make(chan struct{}), ready: make(chan struct{}), subs: 1, lastUse: time.Now()}
	s.hubs[key] = h
	go h.run()
	return h
}

func (h *hub) join() {
	h.mu.Lock()
	h.subs++
	h.mu.Unlock()
}

func (h *hub) leave() {
	h.mu.Lock()
	h.subs--
	h.lastUse = time.Now()
	h.mu.Unlock()
}

// current waits for the first render and returns the fragments with the
// channel that closes when they next change.
func (h *hub) current(ctx context.Context) ([]hubFrag, <-chan struct{}, error) {
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frags, h.changed, nil
}

// source is what a hub renders from: a study read from the store.
type source interface {
	load(ctx context.Context) error
	// view renders the fragments; clocks reports whether they show a
	// clock that moves by itself (a running study).
	view(now time.Time) (fs []frag, clocks bool, err error)
}

func (h *hub) run() {
	src := h.s.source(h.key)
	poll := h.s.poll()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var (
		token, failed string
		liveVer       uint64
		drawn         time.Time
		clocks        bool
		idle          int
		have          bool
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tok, err := h.s.DB.Changes(ctx, h.key)
		dirty := false
		if err == nil && tok != token {
			if err = src.load(ctx); err == nil {
				token, dirty = tok, true
			}
		}
		cancel()
		if lv := h.s.liveVersion(h.key); lv != liveVer {
			liveVer, dirty = lv, true
		}
		now := time.Now()
		if clocks && now.Sub(drawn) >= clockEvery {
			dirty = true
		}
		var fs []frag
		switch {
		case err != nil:
			// Kept until the next successful read; the last render stays.
			if msg := err.Error(); msg != failed {
				failed = msg
				fs = append(h.snapshot(), frag{ID: "error", HTML: template.HTML(`<p class="card norec">` + template.HTMLEscapeString(msg) + `</p>`)})
			}
		case dirty || !have:
			if fs, clocks, err = src.view(now); err != nil {
				fs = append(h.snapshot(), frag{ID: "error", HTML: template.HTML(`<p class="card norec">` + template.HTMLEscapeString(err.Error()) + `</p>`)})
			} else if failed != "" {
				fs, failed = append(fs, frag{ID: "error"}), ""
			}
			drawn, have = now, true
			h.s.renders.Add(1)
		}
		if fs != nil {
			h.publish(fs)
		}
		select {
		case <-tick.C:
		case <-h.s.done():
			return
		}
		// s.mu before h.mu, as Server.hub takes them: nobody joins a hub
		// while it decides to go.
		h.s.mu.Lock()
		h.mu.Lock()
		if h.subs > 0 || time.Since(h.lastUse) < hubLinger*poll {
			idle = 0
		} else if idle++; idle >= 2 {
			delete(h.s.hubs, h.key)
		}
		h.mu.Unlock()
		h.s.mu.Unlock()
		if idle >= 2 {
			return
		}
	}
}

// snapshot is the current fragments without their versions.
func (h *hub) snapshot() []frag {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]frag, 0, len(h.frags))
	for _, f := range h.frags {
		if f.ID != "error" {
			out = append(out, f.frag)
		}
	}
	return out
}

// publish replaces the current fragments, giving those that changed a
// new version and their event, and wakes the subscribers if any did.
func (h *hub) publish(fs []frag) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := map[string]hubFrag{}
	for _, f := range h.frags {
		old[f.ID] = f
	}
	out := make([]hubFrag, 0, len(fs))
	moved := false
	for _, f := range fs {
		if o, ok := old[f.ID]; ok && o.HTML == f.HTML {
			out = append(out, o)
			continue
		}
		h.ver++
		data, _ := json.Marshal(f)
		out = append(out, hubFrag{frag: f, ver: h.ver, event: fmt.Appendf(nil, "event: frag\ndata: %s\n\n", data)})
		moved = true
	}
	h.frags = out
	select {
	case <-h.ready:
	default:
		close(h.ready)
	}
	if moved {
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/periodic"
)

// DefaultInterval is the scrape period when none is given: fine enough to
// catch a queue that builds within a second, light on the engine (one
// /metrics render every half second).
const DefaultInterval = 500 * time.Millisecond

// maxBody bounds one /metrics response (vLLM's is ~100 kB; many LoRA
// adapters or ranks make it larger).
const maxBody = 16 << 20

// Scraper reads an engine's /metrics at a fixed interval between Start and
// Stop and aggregates what it read (Aggregate).
type Scraper struct {
	url    string
	every  time.Duration
	hc     *http.Client
	header http.Header

	mu    sync.Mutex
	snaps []Snapshot
	errs  int
	first error

	loop *periodic.Loop
}

// New returns a scraper of url (the engine's /metrics) every interval
// (DefaultInterval when <= 0) with hc (http.DefaultClient when nil),
// sending header with each request (it may hold the API key: never
// logged).
func New(url string, every time.Duration, hc *http.Client, header http.Header) *Scraper {
	if every <= 0 {
		every = DefaultInterval
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Scraper{url: url, every: every, hc: hc, header: header}
}

// Start takes the first reading at once (the level's baseline) and then
// one every interval until Stop or ctx ends. Calling Start twice panics.
func (s *Scraper) Start(ctx context.Context) {
	if s.loop != nil {
		panic("scrape: Scraper started twice")
	}
	s.loop = periodic.Start(ctx, s.every, s.read)
}

// read takes one snapshot; a failure is counted, the first kept.
func (s *Scraper) read(ctx context.Context) {
	snap, err := s.fetch(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.errs++
			if s.first == nil {
				s.first = err
			}
		}
		return
	}
	s.snaps = append(s.snaps, snap)
}

func (s *Scraper) fetch(ctx context.Context) (Snapshot, error) {
	// A scrape must not outlive its period by much, or the readings bunch.
	ctx, cancel := context.WithTimeout(ctx, max(s.every, 2*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return Snapshot{}, err
	}
	for k, v := range s.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	at := time.Now()
	resp, err := s.hc.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("GET %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return Snapshot{}, fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	snap, err := Parse(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Snapshot{}, fmt.Errorf("GET %s: %w", s.url, err)
	}
	snap.Time = at
	return snap, nil
}

// ErrTooFewReadings is wrapped by Stop's error when fewer than two
// readings succeeded: no change over the level can be told.
var ErrTooFewReadings = errors.New("too few readings of /metrics")

// Stop ends the scraping, takes a last reading (the level's end) and
// aggregates every reading. The error says why there is nothing (the
// first failure); the metrics may come with an error when some readings
// failed but two or more succeeded (the error then counts the failures).
func (s *Scraper) Stop() (*measure.EngineMetrics, error) {
	if s.loop == nil {
		return nil, nil
	}
	s.loop.Stop()
	s.read(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snaps) < 2 {
		if s.first != nil {
			return nil, fmt.Errorf("%w: %w", ErrTooFewReadings, s.first)
		}
		return nil, ErrTooFewReadings
	}
	m := Aggregate(s.snaps, s.every)
	if s.errs > 0 {
		return m, fmt.Errorf("%d of %d readings of /metrics failed, the first: %w", s.errs, s.errs+len(s.snaps), s.first)
	}
	return m, nil
}

package scrape

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestScraperReadsALevel serves the three vLLM scrapes of a level over
// loopback HTTP: the first reading is the level's start, the last (taken
// by Stop) its end.
func TestScraperReadsALevel(t *testing.T) {
	var phase atomic.Value
	phase.Store("start")
	var auth atomic.Value
	auth.Store("")
	// midRead is closed once the scraper has read the level's middle
	// twice: the start, two middles and Stop's end make its readings.
	var midReads atomic.Int32
	midRead := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		auth.Store(r.Header.Get("Authorization"))
		p := phase.Load().(string)
		b, err := os.ReadFile(filepath.Join("testdata", "vllm-0.10-"+p+".prom"))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(b)
		if p == "mid" && midReads.Add(1) == 2 {
			close(midRead)
		}
	}))
	defer srv.Close()
	s := New(srv.URL+"/metrics", 5*time.Millisecond, nil, http.Header{"Authorization": {"Bearer k"}})
	s.Start(context.Background())
	phase.Store("mid")
	select {
	case <-midRead:
	case <-time.After(time.Minute):
		t.Fatal("the scraper did not read the level's middle twice in a minute")
	}
	phase.Store("end")
	m, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if m.Samples < 3 || m.NumRequestsWaitingPeak != 17 || m.Preemptions != 5 || m.TTFT == nil || m.TTFT.Count != 200 {
		t.Errorf("level %+v", m)
	}
	if m.NumRequestsRunningMean <= 0 || m.NumRequestsRunningMean >= 64 {
		t.Errorf("running mean %v over %d samples", m.NumRequestsRunningMean, m.Samples)
	}
	if auth.Load() != "Bearer k" {
		t.Errorf("the scrape did not carry the header: %q", auth.Load())
	}
}

// TestScraperWithoutMetrics: a server with no /metrics gives no figures
// and an error naming the status, never a panic or zeros.
func TestScraperWithoutMetrics(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	s := New(srv.URL+"/metrics", time.Millisecond, nil, nil)
	s.Start(context.Background()) // its first reading, the 404, is taken before Start returns
	m, err := s.Stop()
	if m != nil || !errors.Is(err, ErrTooFewReadings) || !strings.Contains(err.Error(), "404") {
		t.Errorf("Stop = %+v, %v", m, err)
	}
	if m, err := New("http://127.0.0.1:1/metrics", 0, nil, nil).Stop(); m != nil || err != nil {
		t.Errorf("Stop without Start = %v, %v", m, err)
	}
}

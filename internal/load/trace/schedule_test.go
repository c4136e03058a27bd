package trace

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestScheduleRun(t *testing.T) {
	reqs := []Request{{Offset: 0}, {Offset: 2 * time.Millisecond}, {Offset: 2 * time.Millisecond}, {Offset: 5 * time.Millisecond}}
	s := NewSchedule(reqs)
	start := time.Now()
	times := s.Times(start)
	var mu sync.Mutex
	got := map[int]time.Time{}
	err := s.Run(context.Background(), start, func(i int, at time.Time) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if now.Before(at) {
			t.Errorf("request %d sent %v early", i, at.Sub(now))
		}
		got[i] = at
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if !got[i].Equal(times[i]) {
			t.Errorf("request %d intended %v, want %v", i, got[i], times[i])
		}
	}
}

func TestScheduleRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var sent []int
	var mu sync.Mutex
	s := Schedule{0, time.Millisecond, time.Hour}
	err := s.Run(ctx, time.Now(), func(i int, _ time.Time) {
		mu.Lock()
		sent = append(sent, i)
		mu.Unlock()
		if i == 1 {
			cancel()
		}
	})
	if err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	slices.Sort(sent)
	if !slices.Equal(sent, []int{0, 1}) {
		t.Errorf("sent %v, want [0 1]", sent)
	}
}

// BenchmarkReplay1000rps replays 1,000 requests a second to a loopback HTTP
// server and reports the send lateness (actual minus intended send time):
// the median should stay under 1 ms and the p99 under 5 ms on an idle
// machine. It reports; it asserts nothing, since shared machines are noisy.
//
//	go test -run '^$' -bench Replay1000rps -benchtime 2000x ./internal/load/trace/
func BenchmarkReplay1000rps(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	s := make(Schedule, b.N)
	for i := range s {
		s[i] = time.Duration(i) * time.Millisecond
	}
	late := make([]time.Duration, b.N)
	b.ResetTimer()
	err := s.Run(context.Background(), time.Now().Add(10*time.Millisecond), func(i int, at time.Time) {
		late[i] = time.Since(at)
		req, _ := http.NewRequest("POST", srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(late)
	q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "median-late-ms")
	b.ReportMetric(q(0.99), "p99-late-ms")
	b.ReportMetric(float64(late[len(late)-1])/1e6, "max-late-ms")
}

package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/load/scrape"
	"github.com/servetune/servetune/internal/periodic"
)

// minSample is the shortest real time between two scrapes of the
// replicas' gauges: at a high speed-up the autoscaler samples less often
// on the trace's clock than the plan's fleet.SampleInterval, so that
// scraping leaves this machine's cores to the engines.
const minSample = 50 * time.Millisecond

// sampleEvery is the trace's seconds between two samples of the gauges.
func (f *live) sampleEvery() float64 {
	s := f.o.Policy.Scale
	return min(s.Interval, max(fleet.SampleInterval, minSample.Seconds()*f.o.Speed))
}

// autoscale is the plan's autoscaler on the live fleet: it samples the
// ready replicas' signal from their /metrics, and every interval of the
// trace's clock recommends replicas on the samples' mean (fleet's
// Autoscaler.Desired), adds replicas at once (each serving once it is
// ready) and drains down to the highest recommendation of the cooldown
// window (fleet.Window).
func (f *live) autoscale(ctx context.Context) {
	s := f.o.Policy.Scale
	every := time.Duration(f.sampleEvery() / f.o.Speed * float64(time.Second))
	var window fleet.Window
	next, acc, accN := s.Interval, 0.0, 0
	periodic.Run(ctx, every, func(ctx context.Context) {
		f.mu.Lock()
		urls := make([]string, len(f.pool))
		for i, r := range f.pool {
			urls[i] = r.url
		}
		f.mu.Unlock()
		sum, n := 0.0, 0
		for _, u := range urls {
			snap, err := f.scrape(ctx, u)
			if err != nil {
				continue // stopped since, or busy: the others speak for the fleet
			}
			sum += gauge(snap, s.Signal)
			n++
		}
		if n == 0 {
			return
		}
		acc += sum / float64(n)
		accN++
		t := f.now()
		if t+1e-9 < next {
			return
		}
		next = t + s.Interval
		f.mu.Lock()
		ready := len(f.pool)
		if ready > 0 && !f.closing {
			desired := s.Desired(acc/float64(accN)*float64(ready), ready, f.prov)
			keep := window.Keep(s.Cooldown, t, desired)
			if desired > f.prov {
				for range desired - f.prov {
					f.add(s.UpDelay)
				}
			} else {
				for f.prov > keep {
					f.drainOne()
				}
			}
		}
		f.mu.Unlock()
		acc, accN = 0, 0
	})
}

// gauge is the signal's reading in snap.
func gauge(snap scrape.Snapshot, s fleet.Signal) float64 {
	switch s {
	case fleet.SignalWaiting:
		return snap.Waiting.V
	case fleet.SignalKV:
		return snap.KVUsage.V
	}
	return snap.Running.V
}

// progress writes a line every Every of real time: the trace's clock,
// the replicas, the requests sent and finished, and the SLO met so far.
func (f *live) progress(ctx context.Context, total int, span float64) {
	periodic.Run(ctx, f.o.Every, func(context.Context) {
		f.mu.Lock()
		ready, prov := len(f.pool), f.prov
		f.mu.Unlock()
		done, met := f.finished.Load(), f.met.Load()
		so := "-"
		if done > 0 {
			so = fmt.Sprintf("%.2f%%", 100*float64(met)/float64(done))
		}
		fmt.Fprintf(f.o.Log, "replay: %.1f of %.1f min of traffic; replicas %d (%d ready); requests sent %d of %d, finished %d; SLO met so far %s\n",
			f.now()/60, span/60, prov, ready, f.received.Load(), total, done, so)
	})
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(v) }

package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/load/bench"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/openai"
	"github.com/servetune/servetune/internal/load/scrape"
	"github.com/servetune/servetune/launcher"
)

// Options say what to run and how fast.
type Options struct {
	// Binary is the servetune executable whose `sim serve` each replica
	// runs; EngineArgs the engine's command line the plan simulated
	// (--host, --port, --time-scale and --sim-load-time are set here).
	Binary     string
	EngineArgs []string
	// Speed is how many times faster than the trace everything runs.
	Speed float64
	// Policy is the plan's policy: its router, its replicas at the
	// start, its autoscaler (nil: a static fleet of Replicas).
	Policy fleet.Policy
	// UpDelay is how long, in the trace's seconds, a replica the
	// autoscaler adds loads its weights before it serves.
	UpDelay float64
	SLO     fleet.SLO
	// KVTokens is a replica's KV cache in tokens: the router's index of
	// what it sent a replica holds that many prompt tokens.
	KVTokens int
	// Label names the replicas for the launcher's reaping label
	// (launcher.Spec.Study), so what a killed run left can be found.
	Label string
	// Seed seeds the prompts' words.
	Seed uint64
	// Log gets a progress line every Every of real time (nil: none).
	Log   io.Writer
	Every time.Duration
}

// Result is what the fleet did with the traffic, in the trace's time.
type Result struct {
	Requests, Met, Failed int
	Attainment            float64
	// PeakReplicas is the most replicas provisioned at once (starting or
	// ready); MeanReplicas the replicas paid for (from their launch to
	// their end) over Duration; ReplicaHours their hours.
	PeakReplicas int
	MeanReplicas float64
	ReplicaHours float64
	// Duration is the run until its last request finished, in the
	// trace's seconds.
	Duration float64
	// PromptTokens looked up in the replicas' prefix caches and
	// CachedTokens found there, from their /metrics.
	PromptTokens, CachedTokens float64
	// Replicas is every replica started, the first ones included.
	Replicas int
	Wall     time.Duration
}

// PrefixHitRate is the share of prompt tokens served from a prefix
// cache.
func (r Result) PrefixHitRate() float64 {
	if r.PromptTokens == 0 {
		return 0
	}
	return r.CachedTokens / r.PromptTokens
}

// ErrReplica wraps a replica's failure to start or its exit mid-run.
var ErrReplica = errors.New("replica failed")

// The states of a replica.
const (
	starting = iota
	ready
	draining
	gone
)

// replica is one engine process of the fleet.
type replica struct {
	n           int
	inst        launcher.Instance // nil while it launches
	url         string
	state       int
	start, end  time.Time
	outstanding int
	index       *prefixIndex
}

// live is one replay's fleet.
type live struct {
	o      Options
	seed   maphash.Seed
	router fleet.Router
	proc   *launcher.Process
	client *http.Client
	ctx    context.Context // the run's: ends on failure or the caller's end
	fail   context.CancelCauseFunc
	stops  sync.WaitGroup // replicas being stopped

	mu      sync.Mutex
	members []*replica
	pool    []*replica // ready, by readiness
	view    view
	readyCh chan struct{} // closed, and replaced, when a replica is ready
	prov    int
	peak    int
	t0      time.Time
	closing bool
	queries float64 // prefix-cache counters of the replicas stopped
	hits    float64

	received atomic.Int64
	finished atomic.Int64
	met      atomic.Int64
}

// Run starts the fleet, replays reqs (sorted by arrival) through its
// router at o.Speed, and stops every replica before it returns, on
// every path: the caller's ctx ending (its error then), a replica that
// fails (ErrReplica), or the end of the traffic.
func Run(ctx context.Context, reqs []fleet.Request, o Options) (Result, error) {
	router, err := check(reqs, o)
	if err != nil {
		return Result{}, err
	}
	wall := time.Now()
	rctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	f := &live{o: o, seed: maphash.MakeSeed(), router: router, ctx: rctx, fail: fail, readyCh: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second, DisableCompression: true}},
		proc: &launcher.Process{Command: []string{o.Binary, "sim", "serve", "{args}", "--host", "{host}", "--port", "{port}"},
			PollInterval: 10 * time.Millisecond, StopTimeout: 5 * time.Second}}
	defer f.shutdown()
	addr, stop, err := f.serve()
	if err != nil {
		return Result{}, err
	}
	defer stop()
	model, err := f.startFirst()
	if err != nil {
		return Result{}, err
	}

	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(rctx)
	if o.Policy.Scale != nil {
		bg.Go(func() { f.autoscale(bgCtx) })
	}
	if o.Log != nil && o.Every > 0 {
		bg.Go(func() { f.progress(bgCtx, len(reqs), reqs[len(reqs)-1].At) })
	}
	recs := f.send(rctx, reqs, addr, model)
	end := time.Now()
	stopBg()
	bg.Wait()
	if err := context.Cause(rctx); err != nil {
		return Result{}, err
	}
	res := f.result(reqs, recs, end)
	f.shutdown()
	f.mu.Lock()
	res.PromptTokens, res.CachedTokens = f.queries, f.hits
	f.mu.Unlock()
	res.Wall = time.Since(wall)
	return res, nil
}

// check refuses what Run cannot replay and builds the policy's router.
func check(reqs []fleet.Request, o Options) (fleet.Router, error) {
	switch {
	case len(reqs) == 0:
		return nil, fleet.ErrNoTraffic
	case !(o.Speed > 0) || math.IsInf(o.Speed, 0):
		return nil, fmt.Errorf("speed %g: want a positive number", o.Speed)
	case o.Binary == "":
		return nil, errors.New("no servetune binary to run the replicas")
	case o.Policy.Replicas < 1:
		return nil, fmt.Errorf("%d replicas: want at least 1", o.Policy.Replicas)
	}
	router, err := fleet.NewRouter(o.Policy.Router)
	if err != nil {
		return nil, err
	}
	if s := o.Policy.Scale; s != nil {
		if err := s.Check(); err != nil {
			return nil, err
		}
	}
	return router, nil
}

// serve starts the fleet's router on a loopback port; stop ends it and
// waits for it.
func (f *live) serve() (addr net.Addr, stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.handleGenerate)
	mux.HandleFunc("POST /v1/chat/completions", f.handleGenerate)
	hs := &http.Server{Addr: "127.0.0.1:0", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	sctx, cancel := context.WithCancel(context.Background())
	addrc, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		served <- httpserve.ListenAndServe(sctx, hs, time.Second, httpserve.Hooks{Ready: func(a net.Addr) { addrc <- a }})
	}()
	select {
	case addr = <-addrc:
		return addr, func() { cancel(); <-served }, nil
	case err := <-served:
		cancel()
		return nil, nil, fmt.Errorf("the router: %w", err)
	}
}

// startFirst starts the policy's first replicas and waits for them: they
// serve from the start, as the plan's do, loading before the clock starts
// (t0) and paid from then. It returns the model they serve.
func (f *live) startFirst() (string, error) {
	f.mu.Lock()
	first := f.o.Policy.Replicas
	if s := f.o.Policy.Scale; s != nil {
		first = min(max(first, s.Min), s.Max)
	}
	for range first {
		f.add(0)
	}
	f.mu.Unlock()
	if err := f.waitReady(first); err != nil {
		return "", err
	}
	model, err := f.model()
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.t0 = time.Now()
	for _, r := range f.members {
		r.start = f.t0
	}
	f.mu.Unlock()
	return model, nil
}

// send replays reqs through the router at addr at the replay's speed,
// counting each finished request and whether it met the SLO.
func (f *live) send(ctx context.Context, reqs []fleet.Request, addr net.Addr, model string) []measure.Record {
	build := newPrompts(reqs, f.o.Seed)
	next := 0
	tr := bench.HTTP(openai.Target{BaseURL: "http://" + addr.String(), Model: model})
	recs, _ := tr.Send(ctx, measure.Phase{
		Count: len(reqs),
		Request: func(i int) measure.Request {
			r := reqs[i]
			return measure.Request{Index: i, Prompt: build.build(i, r), PromptTokens: int(r.Prompt), MaxTokens: int(r.Output), PrefixID: -1}
		},
		Next: func() time.Duration {
			d := time.Duration(reqs[next].At / f.o.Speed * float64(time.Second))
			next++
			return d
		},
		Timeout: time.Duration(float64(24*time.Hour) / f.o.Speed),
		Done: func(rec *measure.Record) {
			f.finished.Add(1)
			if f.met1(*rec) {
				f.met.Add(1)
			}
		},
	})
	return recs
}

// met1 says whether rec met the SLO, in the trace's time.
func (f *live) met1(rec measure.Record) bool {
	if rec.Error != "" || len(rec.Chunks) == 0 {
		return false
	}
	rec.Chunks = slices.Clone(rec.Chunks) // EngineTime converts them in place
	one := []measure.Record{rec}
	measure.EngineTime(one, f.o.Speed)
	r := one[0]
	ttft, e2e, tpot := (r.First - r.Send).Seconds(), (r.Last - r.Send).Seconds(), 0.0
	if r.OutputTokens > 1 {
		tpot = (r.Last - r.First).Seconds() / float64(r.OutputTokens-1)
	}
	return f.o.SLO.Met(ttft, tpot, e2e)
}

// result tallies the records and the replicas' bills; the replicas
// still up are paid until end.
func (f *live) result(reqs []fleet.Request, recs []measure.Record, end time.Time) Result {
	var res Result
	for _, rec := range recs {
		res.Requests++
		if rec.Error != "" {
			res.Failed++
		}
		if f.met1(rec) {
			res.Met++
		}
	}
	if res.Requests > 0 {
		res.Attainment = float64(res.Met) / float64(res.Requests)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	paid := 0.0
	for _, r := range f.members {
		stop := r.end
		if r.state != gone || stop.IsZero() {
			stop = end
		}
		if stop.After(r.start) {
			paid += stop.Sub(r.start).Seconds() * f.o.Speed
		}
	}
	res.Duration = math.Max(end.Sub(f.t0).Seconds()*f.o.Speed, reqs[len(reqs)-1].At)
	res.ReplicaHours = paid / 3600
	res.MeanReplicas = paid / res.Duration
	res.PeakReplicas = f.peak
	res.Replicas = len(f.members)
	return res
}

// now is the trace's clock.
func (f *live) now() float64 { return time.Since(f.t0).Seconds() * f.o.Speed }

// add launches a replica that serves after delay seconds of the trace
// (mu held).
func (f *live) add(delay float64) {
	r := &replica{n: len(f.members) + 1, start: time.Now(), index: newPrefixIndex(f.o.KVTokens / pageWords)}
	f.members = append(f.members, r)
	f.prov++
	f.peak = max(f.peak, f.prov)
	args := append(withoutFlags(f.o.EngineArgs, "--host", "--port", "--time-scale", "--sim-load-time"),
		"--time-scale", strconv.FormatFloat(f.o.Speed, 'g', -1, 64),
		"--sim-load-time", strconv.FormatFloat(delay, 'g', -1, 64)+"s")
	spec := launcher.Spec{Extra: args, Study: f.o.Label, Trial: r.n}
	f.stops.Go(func() {
		inst, err := f.proc.Launch(f.ctx, spec)
		if err != nil {
			f.fail(fmt.Errorf("%w: replica %d: %w", ErrReplica, r.n, err))
			return
		}
		f.mu.Lock()
		r.inst, r.url = inst, inst.Endpoint()
		dropped := r.state == gone
		f.mu.Unlock()
		if dropped {
			f.stop(r)
			return
		}
		if err := inst.Ready(f.ctx); err != nil {
			f.mu.Lock()
			dropped = r.state == gone || f.closing
			f.mu.Unlock()
			if !dropped && f.ctx.Err() == nil {
				f.fail(fmt.Errorf("%w: replica %d: %w\n%s", ErrReplica, r.n, err, lastLines(inst.Logs(), 5)))
			}
			return
		}
		f.mu.Lock()
		if r.state == starting && !f.closing {
			r.state = ready
			f.pool = append(f.pool, r)
			close(f.readyCh)
			f.readyCh = make(chan struct{})
		}
		f.mu.Unlock()
		if ex, ok := inst.(launcher.Exiter); ok {
			select {
			case <-ex.Exited():
				f.mu.Lock()
				expected := r.state == gone || f.closing
				f.mu.Unlock()
				if !expected {
					f.fail(fmt.Errorf("%w: replica %d exited (code %d)\n%s", ErrReplica, r.n, ex.Exit().Code, lastLines(inst.Logs(), 5)))
				}
			case <-f.ctx.Done():
			}
		}
	})
}

// waitReady waits for n replicas to be ready.
func (f *live) waitReady(n int) error {
	for {
		f.mu.Lock()
		k, wake := len(f.pool), f.readyCh
		f.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-f.ctx.Done():
			return context.Cause(f.ctx)
		case <-wake:
		}
	}
}

// model is the served model's name, as the first replica lists it.
func (f *live) model() (string, error) {
	f.mu.Lock()
	u := f.pool[0].url
	f.mu.Unlock()
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, u+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %s/v1/models: %w", ErrReplica, u, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := jsonDecode(resp.Body, &list); err != nil || len(list.Data) == 0 {
		return "", fmt.Errorf("%w: %s/v1/models lists no model", ErrReplica, u)
	}
	return list.Data[0].ID, nil
}

// drainOne takes one replica out of service (mu held): the newest
// starting one, else the ready one with the fewest outstanding requests,
// which finishes them first.
func (f *live) drainOne() {
	for i := len(f.members) - 1; i >= 0; i-- {
		if r := f.members[i]; r.state == starting {
			f.prov--
			f.retire(r)
			return
		}
	}
	best := 0
	for i, r := range f.pool {
		if r.outstanding < f.pool[best].outstanding {
			best = i
		}
	}
	r := f.pool[best]
	f.pool = slices.Delete(f.pool, best, best+1)
	r.state = draining
	f.prov--
	if r.outstanding == 0 {
		f.retire(r)
	}
}

// retire ends r's bill now and stops its process (mu held).
func (f *live) retire(r *replica) {
	r.state, r.end = gone, time.Now()
	if r.inst != nil {
		f.stops.Go(func() { f.stop(r) })
	}
}

// stop reads r's prefix-cache counters and stops its process.
func (f *live) stop(r *replica) {
	if s, err := f.scrape(context.Background(), r.url); err == nil {
		f.mu.Lock()
		f.queries += s.PrefixQueries.V
		f.hits += s.PrefixHits.V
		f.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = r.inst.Stop(ctx)
}

// shutdown stops every replica and waits for them; safe to call twice.
func (f *live) shutdown() {
	f.mu.Lock()
	if !f.closing {
		f.closing = true
		now := time.Now()
		for _, r := range f.members {
			if r.state != gone {
				r.state, r.end = gone, now
				if r.inst != nil {
					f.stops.Go(func() { f.stop(r) })
				}
			}
		}
		f.pool = nil
	}
	f.mu.Unlock()
	f.fail(errClosed)
	f.stops.Wait()
}

// errClosed ends the run's context once the fleet is shut down.
var errClosed = errors.New("the fleet is stopped")

// scrape reads one replica's /metrics.
func (f *live) scrape(ctx context.Context, u string) (scrape.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/metrics", nil)
	if err != nil {
		return scrape.Snapshot{}, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return scrape.Snapshot{}, err
	}
	defer resp.Body.Close()
	return scrape.Parse(resp.Body)
}

// withoutFlags is args less the given flags and their values.
func withoutFlags(args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasVal := strings.Cut(args[i], "=")
		if slices.Contains(names, name) {
			if !hasVal && i+1 < len(args) {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

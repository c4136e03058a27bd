package fleet

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/servetune/servetune/internal/model/sim"
)

// Request is one request of the traffic a fleet serves: when it
// arrives (seconds from the start), its lengths, and what its content
// shares with other requests. PrefixID names the content its first
// PrefixTokens tokens are (a conversation: every turn of one session
// reads the same content at the same position; PrefixTokens may pass
// the prompt, when the answer is the session's too, which its next
// turn sends back); GroupID's first GroupTokens tokens begin it (a
// system prompt several sessions share). PrefixID -1: nothing shared.
type Request struct {
	At           float64
	Prompt       int32
	Output       int32
	PrefixTokens int32
	GroupTokens  int32
	PrefixID     int64
	GroupID      int32
}

// SLO holds per-request latency limits in seconds (0: no limit). A
// request meets the SLO when it succeeds within every limit: TTFT from
// its arrival to its first token, TPOT the mean gap between its later
// tokens, E2E from its arrival to its last token.
type SLO struct{ TTFT, TPOT, E2E float64 }

// Met says whether a request of these latencies (seconds) meets the
// SLO.
func (s SLO) Met(ttft, tpot, e2e float64) bool {
	return (s.TTFT == 0 || ttft <= s.TTFT) && (s.TPOT == 0 || tpot <= s.TPOT) && (s.E2E == 0 || e2e <= s.E2E)
}

// Policy is one way to run the fleet: a router and either a fixed
// number of replicas (Scale nil) or an autoscaler starting from
// Replicas.
type Policy struct {
	Router   string
	Replicas int
	Scale    *Autoscaler
	// Sample is the interval, in seconds, at which the replicas'
	// gauges are averaged into Result's means when Scale is nil (the
	// autoscaler samples at its own interval); 0: not sampled.
	Sample float64
}

// Name is the policy's short name: "prefix + running=12" or "static 8".
func (p Policy) Name() string {
	if p.Scale == nil {
		return fmt.Sprintf("%s, static %d", p.Router, p.Replicas)
	}
	return fmt.Sprintf("%s, %s", p.Router, p.Scale)
}

// Hour is one hour of a run, by the arrival of its requests.
type Hour struct {
	Requests     int     `json:"requests"`
	Met          int     `json:"met"`
	Attainment   float64 `json:"slo_attainment"`
	MeanReplicas float64 `json:"mean_replicas"`
}

// Point is a change in the replicas provisioned (starting or ready).
type Point struct {
	At       float64 `json:"at_s"`
	Replicas int     `json:"replicas"`
}

// Result is what a policy did with the traffic.
type Result struct {
	Policy     Policy
	Requests   int
	Met        int
	Failed     int // refused by the engine (longer than its context)
	Attainment float64
	Hours      []Hour
	// PeakReplicas is the most replicas provisioned at once (starting
	// or ready; a draining one is on its way out); MeanReplicas is the
	// time-weighted mean of the replicas paid for (starting, ready or
	// draining) over Duration.
	PeakReplicas int
	MeanReplicas float64
	// ReplicaHours are the hours of replicas paid for, from the start
	// of their weight loading to the end of their draining.
	ReplicaHours float64
	// PromptTokens looked up in the replicas' prefix caches and
	// CachedTokens found there (the engines' counters).
	PromptTokens, CachedTokens int64
	// Duration is the run in seconds: until the last request finished.
	Duration float64
	// Timeline is every change in the replicas provisioned.
	Timeline []Point
	// The replicas' gauges, each the mean over replicas and samples:
	// running and waiting requests, KV-cache usage.
	MeanRunning, MeanWaiting, MeanKV float64
	// Wall is how long the simulation took.
	Wall time.Duration
}

// PrefixHitRate is the share of prompt tokens served from a prefix
// cache.
func (r Result) PrefixHitRate() float64 {
	if r.PromptTokens == 0 {
		return 0
	}
	return float64(r.CachedTokens) / float64(r.PromptTokens)
}

// ErrNoTraffic is returned by Simulate for an empty request list.
var ErrNoTraffic = errors.New("no requests to plan for")

// The states of a replica in a run.
const (
	starting = iota
	ready
	draining
	gone
)

// member is one replica of a run.
type member struct {
	r          *sim.Replica
	state      int
	start, end float64 // paid from start (weight loading) to end
	readyAt    float64
	next       float64 // r.Next(), its key in the event heap
	hi         int     // its index in the heap, -1 when not there
}

// run is one policy's simulation.
type run struct {
	cfg     sim.Config
	reqs    []Request
	slo     SLO
	pol     Policy
	router  Router
	members []*member
	heap    []*member // ready and draining replicas by their next event
	pool    []*sim.Replica
	poolM   []*member // pool's members
	pending []int     // arrived while no replica was ready
	view    engines   // what the router sees of pool
	first   []float64 // each request's first token, NaN before it
	res     Result
	now     float64
	// paid integrates the replicas paid for over time; prov is the
	// provisioned count now.
	paid, lastT float64
	billed      int
	prov        int
	hourPaid    []float64
	window      Window // the autoscaler's recent recommendations
	samples     int
	sums        [3]float64
	// acc sums the gauge samples since the autoscaler's last decision
	// (accN of them): it decides on their mean over its interval, as
	// a Prometheus avg_over_time query of the window gives it.
	acc       [3]float64
	accN      int
	nextScale float64
}

// rec is one recommendation of the autoscaler.
type rec struct {
	at      float64
	desired int
}

// Simulate runs reqs (sorted by arrival) through a fleet of replicas of
// cfg under pol and returns what happened. Each replica is the
// simulator's engine (sim.Replica): its scheduler, KV and prefix cache
// and step times; the fleet's clock is virtual, so a day of traffic
// takes what its engine steps take to compute.
func Simulate(cfg sim.Config, reqs []Request, slo SLO, pol Policy) (Result, error) {
	if len(reqs) == 0 {
		return Result{}, ErrNoTraffic
	}
	router, err := NewRouter(pol.Router)
	if err != nil {
		return Result{}, err
	}
	if pol.Replicas < 1 {
		return Result{}, fmt.Errorf("%d replicas: want at least 1", pol.Replicas)
	}
	if s := pol.Scale; s != nil {
		if err := s.Check(); err != nil {
			return Result{}, err
		}
		pol.Replicas = min(max(pol.Replicas, s.Min), s.Max)
	}
	wall := time.Now()
	f := &run{cfg: cfg, reqs: reqs, slo: slo, pol: pol, router: router,
		first: make([]float64, len(reqs))}
	for i := range f.first {
		f.first[i] = math.NaN()
	}
	f.res.Policy = pol
	f.res.Hours = make([]Hour, int(reqs[len(reqs)-1].At/3600)+1)
	f.hourPaid = make([]float64, len(f.res.Hours))
	for range pol.Replicas {
		if err := f.add(0, 0); err != nil {
			return Result{}, err
		}
	}
	if err := f.loop(); err != nil {
		return Result{}, err
	}
	f.finish()
	f.res.Wall = time.Since(wall)
	return f.res, nil
}

// SampleInterval is how often, in seconds, an autoscaled fleet samples
// its replicas' gauges: the autoscaler decides on their mean over its
// interval.
const SampleInterval = 1.0

// interval is how often the gauges are sampled.
func (f *run) interval() float64 {
	if s := f.pol.Scale; s != nil {
		return min(SampleInterval, s.Interval)
	}
	return f.pol.Sample
}

// loop runs the events in time order: replicas becoming ready, the
// autoscaler's ticks, the replicas' steps, arrivals.
func (f *run) loop() error {
	i, n := 0, len(f.reqs)
	tick := math.Inf(1)
	if f.interval() > 0 {
		tick = f.interval()
	}
	if s := f.pol.Scale; s != nil {
		f.nextScale = s.Interval
	}
	for {
		ta := math.Inf(1)
		if i < n {
			ta = f.reqs[i].At
		}
		tr := math.Inf(1)
		if len(f.heap) > 0 {
			tr = f.heap[0].next
		}
		tup := f.nextReady()
		if i >= n {
			tick = math.Inf(1) // nothing left to scale for
		}
		switch {
		case tup <= tick && tup <= tr && tup <= ta && !math.IsInf(tup, 1):
			f.advance(tup)
			f.becomeReady(tup)
		case tick <= tr && tick <= ta && !math.IsInf(tick, 1):
			f.advance(tick)
			if err := f.tick(tick); err != nil {
				return err
			}
			tick += f.interval()
		case tr <= ta && !math.IsInf(tr, 1):
			f.advance(tr)
			f.step(f.heap[0], tr)
		case !math.IsInf(ta, 1):
			f.advance(ta)
			f.arrive(i, ta)
			i++
		default:
			if len(f.pending) > 0 {
				return fmt.Errorf("%d requests never found a ready replica", len(f.pending))
			}
			return nil
		}
	}
}

// advance moves the clock to t, integrating the replicas paid for.
func (f *run) advance(t float64) {
	if t <= f.lastT {
		return
	}
	d := t - f.lastT
	f.paid += d * float64(f.billed)
	// The hour's share, for its mean replicas.
	for t0 := f.lastT; t0 < t; {
		h := int(t0 / 3600)
		end := math.Min(t, float64(h+1)*3600)
		if h < len(f.hourPaid) {
			f.hourPaid[h] += (end - t0) * float64(f.billed)
		}
		t0 = end
	}
	f.lastT, f.now = t, t
}

// add starts a replica at t, ready after delay.
func (f *run) add(t, delay float64) error {
	r, err := sim.NewReplica(f.cfg)
	if err != nil {
		return err
	}
	m := &member{r: r, state: starting, start: t, readyAt: t + delay, hi: -1}
	f.members = append(f.members, m)
	f.billed++
	f.setProv(t, f.prov+1)
	if delay == 0 {
		f.becomeReady(t)
	}
	return nil
}

// setProv records a change in the replicas provisioned.
func (f *run) setProv(t float64, n int) {
	f.prov = n
	f.res.PeakReplicas = max(f.res.PeakReplicas, n)
	if k := len(f.res.Timeline); k > 0 && f.res.Timeline[k-1].At == t {
		f.res.Timeline[k-1].Replicas = n
		return
	}
	f.res.Timeline = append(f.res.Timeline, Point{At: t, Replicas: n})
}

// nextReady is when the next starting replica is ready.
func (f *run) nextReady() float64 {
	t := math.Inf(1)
	for _, m := range f.members {
		if m.state == starting && m.readyAt < t {
			t = m.readyAt
		}
	}
	return t
}

// becomeReady puts every replica whose loading has ended by t into
// service and sends it the requests that waited for one.
func (f *run) becomeReady(t float64) {
	for _, m := range f.members {
		if m.state == starting && m.readyAt <= t {
			m.state = ready
			f.pool = append(f.pool, m.r)
			f.poolM = append(f.poolM, m)
			f.push(m)
		}
	}
	waiting := f.pending
	f.pending = nil
	for _, i := range waiting {
		f.arrive(i, t)
	}
}

// arrive routes request i at t.
func (f *run) arrive(i int, t float64) {
	if len(f.pool) == 0 {
		f.pending = append(f.pending, i)
		return
	}
	r := f.reqs[i]
	q := &sim.ReplicaRequest{ID: i, Prompt: int(r.Prompt), MaxTokens: int(r.Output), PrefixID: int(r.PrefixID),
		PrefixTokens: int(r.PrefixTokens), GroupID: int(r.GroupID), GroupTokens: int(r.GroupTokens)}
	if r.PrefixID < 0 {
		q.PrefixID, q.PrefixTokens = -1, 0
	}
	f.view.q, f.view.rs = q, f.pool
	k := f.router.Pick(&f.view)
	m := f.poolM[k]
	maxOut, msg := m.r.Admit(q)
	if msg != "" {
		f.res.Failed++
		f.count(i, false)
		return
	}
	m.r.Add(t, q, maxOut)
	f.fix(m)
}

// count records request i's outcome in its hour.
func (f *run) count(i int, met bool) {
	h := &f.res.Hours[int(f.reqs[i].At/3600)]
	h.Requests++
	f.res.Requests++
	if met {
		h.Met++
		f.res.Met++
	}
}

// step runs m's next event at t.
func (f *run) step(m *member, t float64) {
	m.r.Step(func(id, generated int, last bool) {
		if math.IsNaN(f.first[id]) {
			f.first[id] = t
		}
		if !last {
			return
		}
		at := f.reqs[id].At
		ttft, e2e, tpot := f.first[id]-at, t-at, 0.0
		if generated > 1 {
			tpot = (t - f.first[id]) / float64(generated-1)
		}
		f.count(id, f.slo.Met(ttft, tpot, e2e))
		f.res.Duration = math.Max(f.res.Duration, t)
	})
	f.fix(m)
	if m.state == draining && m.r.Outstanding() == 0 {
		f.retire(m, t)
	}
}

// retire ends a replica's service and its bill at t.
func (f *run) retire(m *member, t float64) {
	m.state, m.end = gone, t
	f.billed--
	f.remove(m)
	q, h := m.r.PrefixCounts()
	f.res.PromptTokens += q
	f.res.CachedTokens += h
}

// finish closes the books: the replicas still paid for end with the
// run.
func (f *run) finish() {
	end := math.Max(f.res.Duration, f.reqs[len(f.reqs)-1].At)
	f.res.Duration = end
	f.advance(end)
	for _, m := range f.members {
		if m.state != gone {
			f.retire(m, end)
		}
	}
	f.res.ReplicaHours = f.paid / 3600
	f.res.MeanReplicas = f.paid / end
	if f.res.Requests > 0 {
		f.res.Attainment = float64(f.res.Met) / float64(f.res.Requests)
	}
	for h := range f.res.Hours {
		hr := &f.res.Hours[h]
		if hr.Requests > 0 {
			hr.Attainment = float64(hr.Met) / float64(hr.Requests)
		}
		span := math.Min(3600, end-float64(h)*3600)
		if span > 0 {
			hr.MeanReplicas = f.hourPaid[h] / span
		}
	}
	if f.samples > 0 {
		f.res.MeanRunning = f.sums[0] / float64(f.samples)
		f.res.MeanWaiting = f.sums[1] / float64(f.samples)
		f.res.MeanKV = f.sums[2] / float64(f.samples)
	}
}

// tick samples the ready replicas' gauges and, with an autoscaler,
// applies its decision.
func (f *run) tick(t float64) error {
	if len(f.pool) == 0 {
		return nil
	}
	var g [3]float64
	for _, r := range f.pool {
		g[0] += float64(r.Running())
		g[1] += float64(r.Waiting())
		g[2] += r.KVUsage()
	}
	n := float64(len(f.pool))
	for k := range g {
		f.sums[k] += g[k] / n
		f.acc[k] += g[k] / n
	}
	f.samples++
	f.accN++
	s := f.pol.Scale
	if s == nil || t+1e-9 < f.nextScale {
		return nil
	}
	f.nextScale = t + s.Interval
	var mean [3]float64
	for k := range mean {
		mean[k] = f.acc[k] / float64(f.accN) * n
	}
	f.acc, f.accN = [3]float64{}, 0
	return f.scale(t, s.desired(mean, len(f.pool), f.prov))
}

// scale moves the replicas provisioned towards desired: up at once (the
// new ones ready after the scale-up delay), down only to the highest
// recommendation of the cooldown window (Kubernetes' scale-down
// stabilization), the starting replicas first, then the ready ones with
// the fewest outstanding requests, which drain.
func (f *run) scale(t float64, desired int) error {
	s := f.pol.Scale
	keep := f.window.Keep(s.Cooldown, t, desired)
	if desired > f.prov {
		for range desired - f.prov {
			if err := f.add(t, s.UpDelay); err != nil {
				return err
			}
		}
		return nil
	}
	for f.prov > keep {
		f.drainOne(t)
	}
	return nil
}

// drainOne takes one replica out of service at t: the newest starting
// one, else the ready one with the fewest outstanding requests.
func (f *run) drainOne(t float64) {
	for i := len(f.members) - 1; i >= 0; i-- {
		if m := f.members[i]; m.state == starting {
			m.state, m.end = gone, t
			f.billed--
			f.setProv(t, f.prov-1)
			return
		}
	}
	best := 0
	for i, r := range f.pool {
		if r.Outstanding() < f.pool[best].Outstanding() {
			best = i
		}
	}
	m := f.poolM[best]
	f.pool = slices.Delete(f.pool, best, best+1)
	f.poolM = slices.Delete(f.poolM, best, best+1)
	m.state = draining
	f.setProv(t, f.prov-1)
	if m.r.Outstanding() == 0 {
		f.retire(m, t)
	}
}

// The event heap: ready and draining replicas by their next event.

func (f *run) push(m *member) {
	m.next = m.r.Next()
	m.hi = len(f.heap)
	f.heap = append(f.heap, m)
	f.up(m.hi)
}

func (f *run) fix(m *member) {
	m.next = m.r.Next()
	if m.hi < 0 {
		return
	}
	f.up(m.hi)
	f.down(m.hi)
}

func (f *run) remove(m *member) {
	i := m.hi
	if i < 0 {
		return
	}
	last := len(f.heap) - 1
	f.swap(i, last)
	f.heap = f.heap[:last]
	m.hi = -1
	if i < last {
		f.up(i)
		f.down(i)
	}
}

func (f *run) swap(i, j int) {
	f.heap[i], f.heap[j] = f.heap[j], f.heap[i]
	f.heap[i].hi, f.heap[j].hi = i, j
}

func (f *run) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if f.heap[p].next <= f.heap[i].next {
			return
		}
		f.swap(i, p)
		i = p
	}
}

func (f *run) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(f.heap) && f.heap[l].next < f.heap[small].next {
			small = l
		}
		if r := l + 1; r < len(f.heap) && f.heap[r].next < f.heap[small].next {
			small = r
		}
		if small == i {
			return
		}
		f.swap(i, small)
		i = small
	}
}

package fleet

import (
	"math"
	"strings"
	"testing"

	"github.com/servetune/servetune/internal/model/sim"
)

func testConfig(t testing.TB) sim.Config {
	t.Helper()
	cfg, err := sim.ParseArgs([]string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L40S", "--max-model-len", "16384"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nightCurve is the first two hours of the day at mean (a night: about
// 0.4 of it).
func nightCurve(mean float64) Curve {
	c := Day(mean)
	return Curve{Step: 3600, Rates: c.Rates[:3]}
}

// The promise: on conversations, the prefix-aware router serves
// at least 20 points more of the prompt tokens from cache than
// round-robin, and needs fewer GPU-hours for the same attainment.
func TestPrefixRouterBeatsRoundRobinOnConversations(t *testing.T) {
	cfg := testConfig(t)
	reqs, err := Conversations(nightCurve(10), DefaultChat, 1)
	if err != nil {
		t.Fatal(err)
	}
	for len(reqs) > 0 && reqs[len(reqs)-1].At >= 7200 {
		reqs = reqs[:len(reqs)-1]
	}
	slo := SLO{TTFT: 2, TPOT: 0.05}
	capacity, err := MeasureCapacity(cfg, reqs, slo, 0.99, DefaultHeadroom, 1)
	if err != nil {
		t.Fatal(err)
	}
	run := func(router string) Result {
		res, err := Simulate(cfg, reqs, slo, Policy{Router: router, Replicas: 2, Scale: &Autoscaler{
			Signal: SignalRunning, Target: capacity.Running, Min: 1, Max: 16, Interval: DefaultInterval,
			UpDelay: 60, Cooldown: DefaultCooldown, Tolerance: DefaultTolerance}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: attainment %.4f, %.2f replica-hours, peak %d, prefix hits %.3f", res.Policy.Name(), res.Attainment, res.ReplicaHours, res.PeakReplicas, res.PrefixHitRate())
		return res
	}
	rr, px := run(RouterRoundRobin), run(RouterPrefix)
	if d := px.PrefixHitRate() - rr.PrefixHitRate(); d < 0.20 {
		t.Errorf("prefix router serves %.1f points more of the prompt tokens from cache than round-robin, want at least 20", 100*d)
	}
	if px.ReplicaHours >= rr.ReplicaHours {
		t.Errorf("prefix router needs %.2f replica-hours, round-robin %.2f: want fewer", px.ReplicaHours, rr.ReplicaHours)
	}
	if px.Attainment < rr.Attainment-0.001 {
		t.Errorf("prefix router meets the SLO for %.4f, round-robin %.4f: want the same or better", px.Attainment, rr.Attainment)
	}
	if rr.Requests != len(reqs) || px.Requests != len(reqs) {
		t.Errorf("counted %d and %d requests of %d", rr.Requests, px.Requests, len(reqs))
	}
}

// A static fleet keeps its replicas all day; the books add up.
func TestStaticFleetBooks(t *testing.T) {
	cfg := testConfig(t)
	reqs, err := Independent(Curve{Step: 600, Rates: []float64{1, 1}}, AzureConversation, 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(cfg, reqs, SLO{TPOT: 0.05}, Policy{Router: RouterLeastLoad, Replicas: 3, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakReplicas != 3 || math.Abs(res.MeanReplicas-3) > 1e-9 {
		t.Errorf("static 3: peak %d, mean %g", res.PeakReplicas, res.MeanReplicas)
	}
	if want := 3 * res.Duration / 3600; math.Abs(res.ReplicaHours-want) > 1e-9 {
		t.Errorf("replica-hours %g, want %g", res.ReplicaHours, want)
	}
	if res.Requests != len(reqs) || res.Met > res.Requests || res.Attainment < 0.99 {
		t.Errorf("%d requests counted of %d, %d met", res.Requests, len(reqs), res.Met)
	}
	if res.PrefixHitRate() != 0 {
		t.Errorf("independent requests hit the prefix cache: %g", res.PrefixHitRate())
	}
}

// Traffic past one replica's capacity scales the fleet up, after the
// scale-up delay, and back down when it ebbs.
func TestAutoscalerFollowsTraffic(t *testing.T) {
	cfg := testConfig(t)
	reqs, err := Independent(Curve{Step: 600, Rates: []float64{0.5, 0.5, 6, 6, 0.5, 0.5, 0.5}}, AzureConversation, 3)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(cfg, reqs, SLO{TPOT: 0.05}, Policy{Router: RouterLeastLoad, Replicas: 1, Scale: &Autoscaler{
		Signal: SignalRunning, Target: 16, Min: 1, Max: 8, Interval: 15, UpDelay: 90, Cooldown: 300, Tolerance: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakReplicas < 2 {
		t.Fatalf("peak %d replicas: the fleet never grew", res.PeakReplicas)
	}
	last := res.Timeline[len(res.Timeline)-1]
	if last.Replicas >= res.PeakReplicas {
		t.Errorf("the fleet ended at %d replicas, its peak: it never shrank (%v)", last.Replicas, res.Timeline)
	}
	if res.MeanReplicas >= float64(res.PeakReplicas) {
		t.Errorf("mean %g replicas, peak %d", res.MeanReplicas, res.PeakReplicas)
	}
}

func TestRouters(t *testing.T) {
	cfg := testConfig(t)
	reps := make([]*sim.Replica, 3)
	for i := range reps {
		r, err := sim.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}
	q := func(id int) *sim.ReplicaRequest {
		return &sim.ReplicaRequest{ID: id, Prompt: 2000, MaxTokens: 10, PrefixID: 7, PrefixTokens: 2010}
	}
	rr := &RoundRobin{}
	for i, want := range []int{0, 1, 2, 0} {
		if got := rr.Pick(&engines{q(i), reps}); got != want {
			t.Errorf("round-robin pick %d: %d, want %d", i, got, want)
		}
	}
	// Replica 1 serves one request of session 7 to its end: it holds the
	// session's prefix, and nothing is outstanding anywhere.
	first := q(0)
	maxOut, msg := reps[1].Admit(first)
	if msg != "" {
		t.Fatal(msg)
	}
	reps[1].Add(0, first, maxOut)
	for !math.IsInf(reps[1].Next(), 1) {
		reps[1].Step(func(int, int, bool) {})
	}
	if got := reps[1].Cached(q(1)); got < 1900 {
		t.Fatalf("replica 1 holds %d tokens of the session's prefix, want about 2000", got)
	}
	if got := (&Prefix{Bound: DefaultPrefixBound}).Pick(&engines{q(1), reps}); got != 1 {
		t.Errorf("prefix router picked %d, want 1 (holds the prefix)", got)
	}
	if got := (LeastLoad{}).Pick(&engines{q(1), reps}); got != 0 {
		t.Errorf("least-load picked %d, want 0 (all idle: the first)", got)
	}
	// Loaded past the bound, replica 1 loses the request to an idle one.
	for i := range 4 {
		r := q(10 + i)
		r.PrefixID = 100 + i
		reps[1].Add(1, r, 10)
	}
	if got := (&Prefix{Bound: DefaultPrefixBound}).Pick(&engines{q(2), reps}); got == 1 {
		t.Errorf("prefix router sent the request to replica 1 with %d outstanding of %d in all", reps[1].Outstanding(), 4)
	}
	if _, err := NewRouter("random"); err == nil || !strings.Contains(err.Error(), "round-robin") {
		t.Errorf("unknown router: %v", err)
	}
}

func TestAutoscalerDesired(t *testing.T) {
	a := Autoscaler{Signal: SignalKV, Target: 0.5, Min: 1, Max: 10, Interval: 15, Tolerance: 0.1}
	for _, c := range []struct {
		kv          float64
		ready, prov int
		want        int
	}{
		{kv: 4 * 0.52, ready: 4, prov: 4, want: 4}, // within the tolerance
		{kv: 4 * 0.9, ready: 4, prov: 4, want: 8},
		{kv: 4 * 0.1, ready: 4, prov: 5, want: 1},
		{kv: 4 * 2, ready: 4, prov: 4, want: 10}, // the maximum
	} {
		if got := a.desired([3]float64{0, 0, c.kv}, c.ready, c.prov); got != c.want {
			t.Errorf("kv %g on %d ready: %d, want %d", c.kv, c.ready, got, c.want)
		}
	}
	for _, bad := range []Autoscaler{{Signal: SignalKV, Target: 2, Min: 1, Max: 2, Interval: 1}, {Signal: SignalRunning, Target: 1, Min: 3, Max: 2, Interval: 1}} {
		if bad.Check() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestReadCurve(t *testing.T) {
	c, err := ReadCurve(strings.NewReader("seconds,rate\n# a comment\n0,1\n3600,2\n7200,3\n"), "c.csv")
	if err != nil {
		t.Fatal(err)
	}
	if c.Step != 3600 || len(c.Rates) != 3 || c.At(1800) != 1.5 {
		t.Errorf("curve %+v, at 1800 s %g", c, c.At(1800))
	}
	for _, bad := range []string{"0,1\n", "0,1\n3600,x\n", "0,1\n3600,2\n9000,3\n", "0,-1\n3600,2\n", "0,0\n60,0\n"} {
		if _, err := ReadCurve(strings.NewReader(bad), "c.csv"); err == nil || !strings.HasPrefix(err.Error(), "c.csv") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestDayShapeMean(t *testing.T) {
	c := Day(20)
	if m := avg(c.Rates); math.Abs(m-20) > 1e-9 {
		t.Errorf("mean %g, want 20", m)
	}
	peak, trough := 0.0, math.Inf(1)
	for _, r := range DayShape {
		peak, trough = math.Max(peak, r), math.Min(trough, r)
	}
	if trough/peak > 0.4 {
		t.Errorf("trough %g of peak %g: the daily shape is flatter than the trace's", trough, peak)
	}
}

// BenchmarkDay plans one policy over a day of single-turn traffic at a
// mean of 20 requests per second (about 1.7 million requests), the
// issue's speed goal: `go test ./internal/fleet -bench Day -benchtime 1x`.
func BenchmarkDay(b *testing.B) {
	cfg, err := sim.ParseArgs([]string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "16384"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	reqs, err := Independent(Day(20), AzureConversation, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := Simulate(cfg, reqs, SLO{TTFT: 2, TPOT: 0.05}, Policy{Router: RouterPrefix, Replicas: 2, Scale: &Autoscaler{
			Signal: SignalRunning, Target: 24, Min: 1, Max: 64, Interval: DefaultInterval, UpDelay: 60,
			Cooldown: DefaultCooldown, Tolerance: DefaultTolerance}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(reqs)), "requests")
		b.ReportMetric(res.Attainment, "attainment")
	}
}

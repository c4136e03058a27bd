package guided

import (
	"context"
	"fmt"
	"github.com/servetune/servetune/tuner/memory"
	"math"
	"strings"
	"testing"

	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

// TestGuidedStartBoundary: the chance to start follows what the study
// saw. An OOM at a configuration of critical scale 1.1 rules out every
// configuration at or below it; a start at 1.4 makes every one at or
// above it certain; between them the chance rises with the critical scale.
func TestGuidedStartBoundary(t *testing.T) {
	g := &guide{hi: math.Inf(1)}
	if p := g.pStart(1); math.Abs(p-0.5) > 1e-9 {
		t.Errorf("before any observation, a configuration at the model's boundary starts with %.3f, want 0.5", p)
	}
	if p := g.pStart(0.6); p >= confidentFail {
		t.Errorf("a configuration needing reservations 40%% under the model's starts with %.3f: want it under the launch threshold", p)
	}
	g.lo, g.hi = 1.1, 1.4
	for _, c := range []struct {
		crit, lo, hi float64
	}{{1.05, 0, 0}, {1.1, 0, 0}, {1.4, 1, 1}, {2, 1, 1}, {math.Inf(1), 1, 1}, {1.2, 0.01, 0.99}} {
		if p := g.pStart(c.crit); p < c.lo || p > c.hi {
			t.Errorf("pStart(%g) = %.3f, want in [%g, %g]", c.crit, p, c.lo, c.hi)
		}
	}
	if a, b := g.pStart(1.15), g.pStart(1.3); !(a < b) {
		t.Errorf("pStart(1.15) = %.3f not below pStart(1.3) = %.3f", a, b)
	}
}

// TestGuidedDefaultSampler: a spec naming no sampler gets guided when the
// simulator knows its model and GPU, TPE otherwise; naming guided for a
// study the simulator cannot forecast is refused at the key.
func TestGuidedDefaultSampler(t *testing.T) {
	base := `name: s
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
HW
space: {max_running_requests: [16, 64]}
workload: {dataset: {kind: random, input: 64, output: 8}, load: {concurrency: [2]}, requests_per_level: 4}
tuner: {trials: 2TUNER}
`
	parse := func(hw, tuner string) (*spec.Spec, error) {
		src := strings.NewReplacer("HW", hw, "TUNER", tuner).Replace(base)
		return spec.ParseSpec([]byte(src), "s.yaml")
	}
	study, err := parse("hardware: {gpu: H100-SXM}", "")
	if err != nil {
		t.Fatal(err)
	}
	if study.Tuner.Sampler != spec.SamplerGuided {
		t.Errorf("catalog model and GPU: sampler %q, want guided", study.Tuner.Sampler)
	}
	study, err = parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	if study.Tuner.Sampler != spec.SamplerTPE {
		t.Errorf("no hardware.gpu: sampler %q, want tpe", study.Tuner.Sampler)
	}
	_, err = parse("", ", sampler: guided")
	if err == nil || !strings.Contains(err.Error(), "tuner.sampler") || !strings.Contains(err.Error(), "hardware.gpu") {
		t.Errorf("guided without a GPU: %v, want a tuner.sampler error naming hardware.gpu", err)
	}
}

// TestGuidedFallbackRule: three measurements in a row that the refit
// simulator does not reproduce hand the search to TPE; an agreeing one in
// between starts the count again.
func TestGuidedFallbackRule(t *testing.T) {
	study, err := spec.ParseSpec([]byte(`name: s
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual}
hardware: {gpu: H100-SXM}
space: {max_running_requests: [16, 32, 64, 128]}
workload: {dataset: {kind: random, input: 64, output: 8}, load: {concurrency: [2]}, requests_per_level: 4}
tuner: {trials: 4}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	g := &guide{spec: study, hi: math.Inf(1), note: func(s string) { notes = append(notes, s) }}
	measured := func(forecast, got float64) *cand {
		return &cand{fc: Forecast{Met: forecast > 0, Value: forecast}, mu: got, measured: true, started: true}
	}
	for i, c := range []*cand{
		measured(100, 0),   // met the SLOs in the forecast only
		measured(100, 130), // off by more than 1.25
		measured(100, 110), // agrees: the count starts again
		measured(0, 50),    // met the SLOs in the measurement only
		measured(100, 70),
	} {
		g.checkAgreement(c)
		if g.fallback != nil {
			t.Fatalf("TPE took over after measurement %d", i)
		}
	}
	g.checkAgreement(measured(100, 40))
	if g.fallback == nil {
		t.Fatalf("no fallback after three disagreements in a row; notes %q", notes)
	}
	if last := notes[len(notes)-1]; !strings.Contains(last, "TPE proposes from here") {
		t.Errorf("the fallback is not said: %q", last)
	}
}

// TestForecastKeepsSummariesOnly: a forecast of a whole space holds each
// configuration's level summaries, not its per-request records (which made
// a dry run of an 864-configuration space take gigabytes).
func TestForecastKeepsSummariesOnly(t *testing.T) {
	d, err := ForecastSpace(context.Background(), mustSpec(t, studySpec))
	if err != nil {
		t.Fatal(err)
	}
	levels := 0
	for _, fc := range d.Ranked {
		for _, p := range fc.pts {
			levels++
			if p.Level.Records != nil {
				t.Fatalf("%s %s keeps %d request records", fc.Settings.Line(), p.Level.Label, len(p.Level.Records))
			}
			if p.Level.Summary.Completed == 0 {
				t.Fatalf("%s %s: no summary", fc.Settings.Line(), p.Level.Label)
			}
		}
	}
	if levels == 0 {
		t.Fatal("no forecast level to look at")
	}
}

// guidedRangeSpec searches one wide integer range beside fixed settings,
// the shape where a step of one request is far inside the noise.
const guidedRangeSpec = `name: gr
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0]}
hardware: {gpu: H100-SXM}
space:
  quantization: [none, fp8]
  max_running_requests: {int: [16, 256]}
  max_model_len: 8192
workload:
  dataset: {kind: random, input: 512, output: 64}
  load: {concurrency: [64]}
  requests_per_level: 64
  warmup: 0
slo: {ttft_p99_ms: 5000}
tuner: {sampler: guided, trials: 14, seed: 1, objective: max output_throughput_per_gpu, confirm: false}
`

// TestGuidedProposalsApart: the guided sampler does not measure
// configurations the noise cannot tell apart (max_running_requests 461,
// 460, 459 of a range 16 to 512; here 16 to 256), and stops once what is left to gain is
// inside the noise, before its 14 trials.
func TestGuidedProposalsApart(t *testing.T) {
	study := mustSpec(t, guidedRangeSpec)
	db := openStore(t)
	var notes []string
	if _, err := (&tuner.Study{Spec: study, Store: db, Memory: memory.Model{}, OnNote: func(m string) { notes = append(notes, m) }}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := db.GetStudy(context.Background(), "gr")
	trials, _ := db.Trials(context.Background(), st.ID)
	var got []string
	for i, a := range trials {
		qa, _ := a.Settings.String("quantization")
		ma, _ := a.Settings.Int("max_running_requests")
		got = append(got, fmt.Sprintf("%s/%d", qa, ma))
		for _, b := range trials[:i] {
			qb, _ := b.Settings.String("quantization")
			mb, _ := b.Settings.Int("max_running_requests")
			if qa == qb && math.Abs(float64(ma-mb)) < 0.02*(256-16) {
				t.Errorf("trials %d and %d: %s max_running_requests %d and %d", b.Number, a.Number, qa, mb, ma)
			}
		}
	}
	t.Logf("trials %v; notes %q", got, notes)
	if len(trials) >= 14 || !strings.Contains(strings.Join(notes, "\n"), "guided: stopping after") {
		t.Errorf("%d trials, no early stop: %q", len(trials), notes)
	}
}

// TestGuidedTempersOddsAfterMisses: before any evidence the sampler bets
// on a configuration of high upside that it rates unlikely to meet the
// SLOs; once two measurements it rated likely to meet them have missed,
// their odds count as P^3 and a configuration likely to meet them comes
// first. Misses it did not rate likely are no such evidence.
func TestGuidedTempersOddsAfterMisses(t *testing.T) {
	study := mustSpec(t, guidedRangeSpec) // one SLO: ttft_p99_ms 5000
	limit := study.SLO[0].Max
	lvl := func(u, ttft float64) []view { return []view{{u: u, lat: []float64{ttft}}} }
	g := &guide{spec: study, hi: math.Inf(1), note: func(string) {}}
	add := func(c *cand) *cand {
		c.crit = math.Inf(1)
		g.cands = append(g.cands, c)
		return c
	}
	// Open: likely (TTFT half the limit, p 0.99) and a bet (TTFT 10%
	// over the limit, p 0.37, three times the throughput).
	likely := add(&cand{key: "likely", coords: []float64{0}, fv: lvl(100, limit/2)})
	bet := add(&cand{key: "bet", coords: []float64{0}, fv: lvl(300, 1.1*limit)})
	// Measured: one that met the SLOs, as forecast, and two that missed
	// them, far from the open ones (their residuals barely reach them).
	add(&cand{key: "met", coords: []float64{1}, fv: lvl(90, limit/2), mv: lvl(90, limit/2),
		measured: true, started: true, mu: 90, ratedMet: true})
	var misses []*cand
	for _, k := range []string{"miss1", "miss2"} {
		misses = append(misses, add(&cand{key: k, coords: []float64{1}, fv: lvl(90, 0.8*limit), mv: lvl(90, 1.2*limit),
			measured: true, started: true, mu: 0}))
	}
	top := func() string {
		r := g.ranked(1)
		if len(r) == 0 {
			t.Fatal("nothing ranked")
		}
		return r[0].key
	}
	if got := top(); got != bet.key {
		t.Errorf("misses the model did not rate likely: %s first, want the bet (expected %.3g vs %.3g)", got, g.expected(bet), g.expected(likely))
	}
	for _, m := range misses {
		m.ratedMet = true
	}
	if n := g.missed(); n != 2 {
		t.Fatalf("missed() = %d, want 2", n)
	}
	if got := top(); got != likely.key {
		t.Errorf("after two misses of configurations rated likely: %s first, want the likely one (expected %.3g vs %.3g)", got, g.expected(likely), g.expected(bet))
	}
}

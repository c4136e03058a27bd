package sim

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
)

// Regime is the load a prediction sits in, named as the fidelity suite
// (internal/model/sim/testdata/fidelity/runs.json, docs/fidelity.md) names its runs'.
type Regime string

// The load regimes of the fidelity suite.
const (
	RegimeLight      Regime = "light"      // a few requests in flight
	RegimeModerate   Regime = "moderate"   // Poisson load, batches of tens
	RegimeSaturation Regime = "saturation" // batches of hundreds, queues forming
	RegimeOffline    Regime = "offline"    // every request at once
	// RegimeConcurrency is a closed loop: a fixed number of requests in
	// flight, each sending its next when it ends (the suite's silicon
	// tables; fidelity.RegimeConcurrency).
	RegimeConcurrency Regime = "concurrency"
)

// LightLoad and ModerateLoad are the most requests in flight (by Little's
// law) of a light and of a moderate load: the suite's light runs hold 1-8,
// its moderate ones 15-50.
const (
	LightLoad    = 8
	ModerateLoad = 64
)

// Poisson says whether r is a load of Poisson arrivals (light, moderate,
// saturation): not every request at once (offline) nor a closed loop
// (concurrency), whose errors measure other regimes.
func (r Regime) Poisson() bool {
	return r == RegimeLight || r == RegimeModerate || r == RegimeSaturation
}

// LongContextOf says whether a level's requests hold LongContext tokens or
// more on average, prompt and output together.
func LongContextOf(s measure.Summary) bool {
	return s.Completed > 0 && (s.TotalInputTokens+s.TotalOutputTokens)/s.Completed >= LongContext
}

// RegimeOf is the load regime of a Poisson load with inflight requests in
// flight on average.
func RegimeOf(inflight float64) Regime {
	switch {
	case inflight <= LightLoad:
		return RegimeLight
	case inflight <= ModerateLoad:
		return RegimeModerate
	default:
		return RegimeSaturation
	}
}

// RegimeAt is the load regime of a level whose requests arrive at rate a
// second: by Little's law, rate times its mean E2E requests in flight.
func RegimeAt(rate float64, s measure.Summary) Regime {
	return RegimeOf(rate * s.E2EL.Mean / 1000)
}

// LongContext is the fewest prompt and output tokens a request holds for
// its prediction to count in the suite's long-context regime.
const LongContext = 2048

// Situation is what a prediction's error depends on: its load regime,
// the structure of the configuration, and the metrics its verdict rests
// on (the suite's names: ttft, itl, e2e, throughput).
type Situation struct {
	Regime      Regime
	TP          int
	MoE         bool
	LongContext bool // requests of LongContext tokens or more
	Speculative bool // speculative decoding at a given acceptance rate
	// Disaggregated: prefill and decode engines apart (disaggrun.go), the
	// suite's disaggregated regime.
	Disaggregated bool
	// Engine is the row's engine (vllm, sglang): where set, the band is
	// the suite's runs of that engine at the row's load and context
	// (ErrorBand).
	Engine  string
	Metrics []string
}

// Regimes are the fidelity suite's regimes s sits in: its load regime,
// then the structural ones it adds (tp>1, moe, long-context,
// speculative, disaggregated).
func (s Situation) Regimes() []string {
	regimes := []string{string(s.Regime)}
	if s.TP > 1 {
		regimes = append(regimes, "tp>1")
	}
	if s.MoE {
		regimes = append(regimes, "moe")
	}
	if s.LongContext {
		regimes = append(regimes, "long-context")
	}
	if s.Speculative {
		regimes = append(regimes, "speculative")
	}
	if s.Disaggregated {
		regimes = append(regimes, "disaggregated")
	}
	return regimes
}

// suiteStat is one regime and metric of the suite's recorded errors.
type suiteStat struct {
	N      int     `json:"n"`
	Median float64 `json:"median_abs"`
	P90    float64 `json:"p90_abs"`
}

//go:embed medians.json
var suiteMedians []byte

// suiteFigures are the fidelity suite's recorded errors (medians.json,
// which make fidelity checks and records): by regime and metric over
// every load, and each structural regime's by load regime and metric.
type suiteFigures struct {
	Regimes map[string]map[string]suiteStat            `json:"regimes"`
	ByLoad  map[string]map[string]map[string]suiteStat `json:"by_load"`
	// Bands are the runs' errors by load, engine and context
	// (fidelity.TabulateBands): "moderate/vllm/long-context",
	// "moderate/vllm", "moderate", and "poisson/..." for light, moderate
	// and saturation together.
	Bands map[string]map[string]suiteStat `json:"bands"`
}

// suite is medians.json's figures.
var suite = func() suiteFigures {
	var f suiteFigures
	if err := json.Unmarshal(suiteMedians, &f); err != nil {
		panic("sim: medians.json: " + err.Error())
	}
	return f
}()

// MinBandRuns is the fewest runs of a metric a band group, or a
// structural regime within a load, needs for a row's band to take its
// p90: fewer say too little of the error's spread.
const MinBandRuns = 20

// poissonLoad is medians.json's by_load and bands key for every run under
// Poisson arrivals: light, moderate and saturation (fidelity.Poisson).
const poissonLoad = "poisson"

// MetricOfLimit maps an SLO metric (ttft_p99_ms, tpot_p50, e2el_mean_ms...)
// to the suite's metric, "" when it has none.
func MetricOfLimit(name string) string {
	switch {
	case strings.HasPrefix(name, "ttft"):
		return "ttft"
	case strings.HasPrefix(name, "tpot"), strings.HasPrefix(name, "itl"):
		return "itl"
	case strings.HasPrefix(name, "e2e"):
		return "e2e"
	}
	return ""
}

// ErrorBand is the simulator's expected relative error (0.1 = ±10%) of a
// prediction in situation s with stock constants, from the fidelity
// suite's measured error: for each metric the verdict rests on, the p90
// absolute error of the suite's runs in s's load regime, and of its runs
// in each of the tp>1, moe, long-context, speculative and disaggregated
// regimes where s is one; the widest of these. A structural regime's
// figure is its runs' within s's load regime where it has at least
// MinBandRuns runs of the metric there (a moderate-load tp>1 row takes
// the tp>1 runs at moderate load, not the bursts'). Where the load regime
// has too few, a row found under load (light, moderate, saturation) takes
// the regime's runs under every Poisson load, never the bursts' (offline:
// every request at once, whose throughput and latencies measure another
// regime) nor the closed loops' (a fixed concurrency), and a metric
// without MinBandRuns runs there adds nothing; an
// offline row, or a regime without bursts (speculative, disaggregated:
// runs with no load regime), takes the runs of every load. basis says
// which figure set it.
func ErrorBand(s Situation) (band float64, basis string) {
	if s.Engine != "" && len(suite.Bands) > 0 {
		return splitBand(s)
	}
	return regimesBand(s, s.Regimes(), true)
}

// regimesBand is ErrorBand's figure over the given regimes of s; with
// widest, a row none of whose metrics the suite measures takes its
// widest p90.
func regimesBand(s Situation, regimes []string, widest bool) (band float64, basis string) {
	metrics := s.Metrics
	if len(metrics) == 0 {
		metrics = []string{"throughput"}
	}
	load := string(s.Regime)
	underLoad := s.Regime.Poisson()
	for _, m := range metrics {
		for _, g := range regimes {
			st, ok := suite.Regimes[g][m]
			where := fmt.Sprintf("%d %s runs", st.N, g)
			if g != load {
				in, inOK := suite.ByLoad[g][load][m]
				if !ok {
					continue // a structural regime without the metric adds nothing
				}
				switch {
				case inOK && in.N >= MinBandRuns:
					st, where = in, fmt.Sprintf("%d %s runs at %s load", in.N, g, load)
				case underLoad && suite.ByLoad[g][string(RegimeOffline)][m].N > 0:
					st, ok = suite.ByLoad[g][poissonLoad][m]
					if !ok || st.N < MinBandRuns {
						continue // too few runs under load: the bursts' figure says nothing of this row
					}
					where = fmt.Sprintf("%d %s runs under load (%d at %s load, fewer than %d)", st.N, g, in.N, load, MinBandRuns)
				default:
					where = fmt.Sprintf("%d %s runs of every load (%d at %s load, fewer than %d)", st.N, g, in.N, load, MinBandRuns)
				}
			} else if !ok {
				if underLoad {
					st, ok = suite.ByLoad["all"][poissonLoad][m]
					if !ok || st.N < MinBandRuns {
						continue
					}
					where = fmt.Sprintf("%d runs under load (none %s)", st.N, g)
				} else if st, ok = suite.Regimes["all"][m]; ok {
					where = fmt.Sprintf("%d runs of every regime (none %s)", st.N, g)
				} else {
					continue
				}
			}
			if st.P90 > band {
				band = st.P90
				basis = fmt.Sprintf("fidelity suite: p90 %s error %.0f%% over %s (docs/fidelity.md)", m, 100*st.P90, where)
			}
		}
	}
	if basis == "" && widest {
		// The suite measures none of the metrics here: its widest p90 (of
		// the runs under load for a row under load).
		widest, what := suite.Regimes["all"], "runs"
		if underLoad {
			widest, what = suite.ByLoad["all"][poissonLoad], "runs under load"
		}
		for _, m := range slices.Sorted(maps.Keys(widest)) {
			if st := widest[m]; st.P90 > band {
				band = st.P90
				basis = fmt.Sprintf("fidelity suite: p90 %s error %.0f%% over %d %s, the widest (docs/fidelity.md)", m, 100*st.P90, st.N, what)
			}
		}
	}
	return band, basis
}

// bandGroups are the band groups a row in situation s may take, narrowest
// first: its load, engine and context; its load and engine; then, for a
// row under load, the same over every Poisson load (light, moderate,
// saturation) and over every such run; an offline row ends at its load.
// Runs at a fixed concurrency (closed-loop clients) are a load of their
// own: a what-if row's open-loop Poisson arrivals never take them, and a
// closed loop's row takes them alone.
func bandGroups(s Situation) []string {
	ctx := "short"
	if s.LongContext {
		ctx = "long-context"
	}
	load := string(s.Regime)
	out := []string{load + "/" + s.Engine + "/" + ctx, load + "/" + s.Engine}
	if !s.Regime.Poisson() {
		return append(out, load)
	}
	return append(out, poissonLoad+"/"+s.Engine+"/"+ctx, poissonLoad+"/"+s.Engine, poissonLoad)
}

// describeGroup names a band group for a basis: "29 vllm runs at
// moderate load".
func describeGroup(g string, n int) string {
	parts := strings.Split(g, "/")
	what := ""
	if len(parts) > 1 {
		what = parts[1] + " "
	}
	if len(parts) > 2 {
		what += parts[2] + " "
	}
	load := parts[0] + " load"
	if parts[0] == poissonLoad {
		load = "Poisson load (light, moderate, saturation)"
	}
	return fmt.Sprintf("%d %sruns at %s", n, what, load)
}

// splitBand is ErrorBand for a row whose engine is known: for each metric,
// the p90 of the narrowest band group (bandGroups) with MinBandRuns runs
// of it, and beside it the structural regimes that change the error on
// their own (moe, speculative, disaggregated) as ErrorBand takes them;
// the widest of these. TP size is not among the splits: at moderate load
// the suite's tp>1 vLLM runs err as its vLLM runs do (docs/fidelity.md,
// "Error bands").
func splitBand(s Situation) (band float64, basis string) {
	metrics := s.Metrics
	if len(metrics) == 0 {
		metrics = []string{"throughput"}
	}
	groups := bandGroups(s)
	for _, m := range metrics {
		for _, g := range groups {
			st, ok := suite.Bands[g][m]
			if !ok || st.N < MinBandRuns {
				continue
			}
			if basis == "" || st.P90 > band {
				band = st.P90
				basis = fmt.Sprintf("fidelity suite: p90 %s error %.0f%% over %s (docs/fidelity.md)", m, 100*st.P90, describeGroup(g, st.N))
			}
			break
		}
	}
	var extra []string
	for _, g := range s.Regimes()[1:] {
		if g == "moe" || g == "speculative" || g == "disaggregated" {
			extra = append(extra, g)
		}
	}
	if len(extra) > 0 {
		if b, why := regimesBand(Situation{Regime: s.Regime, Metrics: metrics}, extra, false); b > band {
			band, basis = b, why
		}
	}
	return band, basis
}

// CalibratedBand is the error band of a prediction made with profile p:
// the largest error left after p's fit on any metric the verdict rests on
// (the profile's ttft_*, tpot_*/itl_*, e2el_* errors for s.Metrics), at
// least 5% (the fit is in-sample: other configurations than the measured
// ones carry more). A metric of the verdict that the fit did not measure
// takes the stock band's figure for it. Throughput is not such a metric:
// the fit's load points are throughputs, and their latencies are what it
// fits.
func CalibratedBand(p Profile, s Situation) (band float64, basis string) {
	band, basis = 0.05, "calibrated: at least 5%"
	for _, m := range s.Metrics {
		if m == "throughput" {
			continue
		}
		fitted := false
		for _, e := range p.Errors {
			if MetricOfLimit(e.Metric) != m {
				continue
			}
			fitted = true
			if e.MaxAfter > band {
				band = e.MaxAfter
				basis = fmt.Sprintf("calibrated: the largest %s error left by the profile's fit (%s)", e.Metric, p.What())
			}
		}
		if !fitted {
			one := s
			one.Metrics = []string{m}
			if b, why := ErrorBand(one); b > band {
				band, basis = b, "calibrated, but its fit measured no "+m+": "+why
			}
		}
	}
	return band, basis
}

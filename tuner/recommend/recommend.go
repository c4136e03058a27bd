package recommend

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
)

// Candidate is one configuration with its repeated measurements: the search
// trial that found it and its confirmation runs.
type Candidate struct {
	Trial    int            // the search trial
	Settings space.Settings //
	Point    Point          // the recommended point: the search trial's best level for the preference
	Metric   string         // the preference's metric (e.g. output_throughput_per_gpu)
	Values   []float64      // the metric at the best SLO-meeting level of each run
	Mean     float64
	CI       [2]float64 // 95% interval of the mean (Student's t); [Mean, Mean] with one run
	// Levels are the point of every run that gave its value, for every
	// figure's interval (Figure, MetricCI).
	Levels []Point
}

// Runs is how many measurements the candidate has.
func (c Candidate) Runs() int { return len(c.Values) }

// Recommendation is the configuration to serve, and the runner-up.
type Recommendation struct {
	Best     Candidate
	RunnerUp *Candidate
	// Separated reports whether the best is better than the runner-up at
	// 95% (the interval of the difference of their means excludes 0).
	Separated bool
}

// RecommendStudy picks the configuration to serve for pref from a study's
// stored trials. Every measurement counts: a configuration's value is the
// mean, over its search trial and its confirmation runs, of pref's metric
// at the best level that meets the SLOs, with a 95% interval. When
// confirmation runs exist, only configurations measured more than once
// compete (a single lucky measurement does not win); a configuration any
// of whose runs missed the SLOs does not compete either. The recommended
// point is the search trial's best level on the Pareto front (Recommend).
// PreferObjective ranks by the study's tuner.objective (Terms.Objective).
func RecommendStudy(trials []store.Trial, terms Terms, pref Preference) (Recommendation, error) {
	pref = pref.For(terms.Objective)
	rank := pref.objectives()
	price := terms.Price
	if rank[0].Metric == "cost_per_mtok" && price <= 0 {
		rank = PreferThroughput.objectives()
		pref = PreferThroughput
	}
	primary := rank[0]
	runs := map[int][]store.Trial{} // search trial -> its confirmation runs
	for _, t := range trials {
		if t.Confirms != nil && t.Status == measure.StatusOK && t.Unreadable == "" {
			runs[*t.Confirms] = append(runs[*t.Confirms], t)
		}
	}
	var cands []Candidate
	var why noFeasible
	for _, t := range trials {
		if t.Confirms != nil || t.Status != measure.StatusOK || t.Unreadable != "" {
			continue
		}
		// A configuration the current space excludes (a --force-spec
		// narrowed it) is not to be served: the study no longer asks
		// about it.
		if !terms.Space.Holds(t.Settings) {
			why.outside++
			continue
		}
		pts := PointsOf(t.Number, t.Settings, price, t.LoadPoints)
		best, err := Recommend(pts, terms.Objectives, terms.SLO, pref)
		if err != nil {
			why.count(pts, terms.SLO)
			continue
		}
		c, ok := runsOf(t, runs[t.Number], best, primary, price, terms.SLO)
		if !ok {
			why.unstable++
			continue
		}
		cands = append(cands, c)
	}
	confirmed := false
	for _, c := range cands {
		confirmed = confirmed || c.Runs() > 1
	}
	if confirmed {
		kept := cands[:0]
		for _, c := range cands {
			if c.Runs() > 1 {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	if len(cands) == 0 {
		return Recommendation{}, why.err(terms.SLO)
	}
	rankCandidates(cands, rank)
	rec := Recommendation{Best: cands[0]}
	if len(cands) > 1 {
		ru := cands[1]
		rec.RunnerUp = &ru
		// Separated at 95%: Welch's interval of the difference excludes
		// 0 (with one run on either side nothing is known of the noise).
		_, ci, ok := measure.Welch(cands[0].Values, ru.Values)
		rec.Separated = ok && (ci[0] > 0 || ci[1] < 0)
	}
	return rec, nil
}

// runsOf is the candidate of search trial t, whose best level is best:
// pref's primary metric at the best level of t and of each of its
// confirmation runs, with their mean and 95% interval. ok is false when a
// run has no level that meets the SLOs.
func runsOf(t store.Trial, confirms []store.Trial, best Point, primary Objective, price float64, slo SLO) (Candidate, bool) {
	c := Candidate{Trial: t.Number, Settings: t.Settings, Point: best, Metric: primary.Metric}
	for _, run := range append([]store.Trial{t}, confirms...) {
		rp := PointsOf(run.Number, run.Settings, price, run.LoadPoints)
		at, v, ok := BestPoint(rp, primary, slo)
		if !ok {
			return Candidate{}, false
		}
		// Every figure of the candidate comes from the levels its value
		// did: one run, one level (a run whose best level is another
		// than the search trial's counted that other level in the
		// ranking and in no figure, or the other way round).
		c.Values = append(c.Values, v)
		c.Levels = append(c.Levels, rp[at])
	}
	c.Mean, c.CI = measure.MeanCI(c.Values)
	return c, true
}

// rankCandidates sorts cands best first by rank's primary objective's
// mean; ties (goodput ties when every request met the limits) go to the
// ranking's tie-breakers, then the trial number.
func rankCandidates(cands []Candidate, rank []Objective) {
	primary := rank[0]
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Mean != cands[j].Mean {
			return primary.Better(cands[i].Mean, cands[j].Mean)
		}
		for _, o := range rank[1:] {
			a, _, okA := cands[i].MetricCI(o.Metric)
			b, _, okB := cands[j].MetricCI(o.Metric)
			if okA && okB && a != b {
				return o.Better(a, b)
			}
		}
		return cands[i].Trial < cands[j].Trial
	})
}

// noFeasible tallies why no configuration qualified, for the one line
// that says so (a level whose requests half failed must not read as a
// latency miss).
type noFeasible struct {
	levels, failed, latency, empty int
	maxShare                       float64
	unstable, outside              int
}

func (n *noFeasible) count(pts []Point, slo SLO) {
	for _, p := range pts {
		n.levels++
		s := p.Summary
		switch {
		case s.Completed == 0:
			n.empty++
		case s.Failed > 0 && FailedShare(s) > slo.MaxErrorRate():
			n.failed++
			n.maxShare = max(n.maxShare, FailedShare(s))
		default:
			n.latency++
		}
	}
}

func (n *noFeasible) err(slo SLO) error {
	var parts []string
	if n.failed > 0 {
		allows := "none: set slo.error_rate to accept some"
		if b := slo.MaxErrorRate(); b > 0 {
			allows = percent(b) + " (slo.error_rate)"
		}
		parts = append(parts, fmt.Sprintf("%d of %d levels had failed requests (up to %s of a level's; the SLO allows %s)",
			n.failed, n.levels, percent(n.maxShare), allows))
	}
	if n.empty > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d levels completed no request", n.empty, n.levels))
	}
	if n.latency > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d levels missed a latency limit (%s)", n.latency, n.levels, slo.Latency()))
	}
	if n.unstable > 0 {
		parts = append(parts, fmt.Sprintf("%d configuration(s) missed the SLOs in a confirmation run", n.unstable))
	}
	if n.outside > 0 {
		parts = append(parts, fmt.Sprintf("%d trial(s) lie outside the current space", n.outside))
	}
	if len(parts) == 0 {
		return ErrNoFeasible
	}
	return fmt.Errorf("%w: %s", ErrNoFeasible, strings.Join(parts, "; "))
}

// Figures are the metrics a recommendation shows with their intervals over
// its runs, in this order, wherever it is shown (recommend's text and JSON,
// the report, the other shape's difference): the default objectives
// (output_throughput_per_gpu, tokens_per_user), goodput, the p99 of each
// latency an SLO limits most often (TTFT, TPOT, E2E) and the cost.
func Figures() []string {
	return []string{"output_throughput_per_gpu", "goodput_per_gpu", "tokens_per_user", "ttft_p99", "tpot_p99", "e2el_p99", "cost_per_mtok"}
}

// Figure writes the candidate's metric as recommend and the report show
// it: "688.6 tok/s/GPU [-306.2, 1683]", the interval over its runs (none
// with one run); ok is false when no run has it.
func (c Candidate) Figure(metric string) (value, ci string, ok bool) {
	mean, iv, ok := c.MetricCI(metric)
	if !ok {
		return "", "", false
	}
	value = Format(metric, mean)
	if c.Runs() > 1 {
		ci = FormatCI(metric, iv)
	}
	return value, ci, true
}

// runsApart is how far apart, relatively, a candidate's runs may lie
// before they disagree beyond their noise: a repeated run moves the
// throughput by about Noise, and four of that is the range of a
// handful of such runs.
const runsApart = 4 * Noise

// Disagreement says, when the candidate's runs lie further apart than
// their noise explains (a bimodal configuration: one run 3.66, another
// 2.45), which values, for recommend and the report to show; "" when they
// agree or with one run.
func (c Candidate) Disagreement() string {
	if len(c.Values) < 2 {
		return ""
	}
	lo, hi := slices.Min(c.Values), slices.Max(c.Values)
	if math.Abs(hi-lo) <= runsApart*math.Max(math.Abs(lo), math.Abs(hi)) {
		return ""
	}
	vals := make([]string, len(c.Values))
	for i, v := range c.Values {
		vals[i] = fmt.Sprintf("%.4g", v)
	}
	return fmt.Sprintf("its %d runs disagree beyond their noise (%s: %s, %.0f%% apart, more than the %.0f%% repeated runs differ by): the configuration may be bimodal; its interval is wide for that reason",
		len(c.Values), c.Metric, strings.Join(vals, ", "), 100*math.Abs(hi-lo)/math.Max(math.Abs(lo), math.Abs(hi)), 100*runsApart)
}

// FormatCI writes a 95% interval of metric: "[2801, 2920]", "[$0.112, $0.118]".
func FormatCI(metric string, ci [2]float64) string {
	if metric == "cost_per_mtok" {
		return fmt.Sprintf("[%s, %s]", measure.Dollars(ci[0]), measure.Dollars(ci[1]))
	}
	return fmt.Sprintf("[%.4g, %.4g]", ci[0], ci[1])
}

// MetricCI is the mean and 95% interval of metric over the candidate's
// runs (each at the level that gave its value); ok is false when no run
// has it.
func (c Candidate) MetricCI(metric string) (mean float64, ci [2]float64, ok bool) {
	var xs []float64
	for _, p := range c.Levels {
		if v, has := p.Metric(metric); has && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return 0, ci, false
	}
	mean, ci = measure.MeanCI(xs)
	return mean, ci, true
}

// OtherShape is the recommendation among the trials of the other shape
// than best's (aggregated beside a disaggregated best, and the reverse):
// the alternative a disaggregated study shows beside its recommendation;
// nil when the study measured none of that shape that meets the SLOs.
func OtherShape(trials []store.Trial, t Terms, pref Preference, best Candidate) *Recommendation {
	want := !best.Point.Settings.Disaggregated()
	var other []store.Trial
	for _, tr := range trials {
		if tr.Settings.Disaggregated() == want {
			other = append(other, tr)
		}
	}
	rec, err := RecommendStudy(other, t, pref)
	if err != nil {
		return nil
	}
	return &rec
}

// Difference is, for each metric both candidates have, how far c's mean
// is from other's, in percent of other's.
func (c Candidate) Difference(other Candidate, metrics []string) map[string]float64 {
	out := map[string]float64{}
	for _, name := range metrics {
		b, _, okB := c.MetricCI(name)
		a, _, okA := other.MetricCI(name)
		if okA && okB && a != 0 {
			out[name] = 100 * (b - a) / a
		}
	}
	return out
}

// SLORisks says, for each latency limit of slo whose 95% interval over
// the candidate's runs reaches past the limit while the mean meets it,
// that the configuration may miss it in service: "ttft_p99's 95% interval
// [670, 1610] ms crosses the SLO's 1500 ms". None with one run (no
// interval) or when every interval lies within its limit.
func (c Candidate) SLORisks(slo SLO) []string {
	if c.Runs() < 2 {
		return nil
	}
	var out []string
	for _, l := range slo.Latency() {
		mean, ci, ok := c.MetricCI(l.Metric)
		if !ok || mean > l.Max || ci[1] <= l.Max {
			continue
		}
		out = append(out, fmt.Sprintf("%s's 95%% interval %s ms crosses the SLO's %g ms: the mean meets it, but the configuration may miss it in service; confirm it with more runs (tuner.confirm) or serve a point with room",
			l.Metric, FormatCI(l.Metric, ci), l.Max))
	}
	return out
}

package report

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/diagnose"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// StudyReport is what a study report is made from: the stored study, its spec
// and trials, and what is known besides.
type StudyReport struct {
	Stored store.Study
	Spec   *spec.Spec
	Trials []store.Trial
	Source string    // where it was read from (the database path), for the reader
	Tool   string    // the servetune writing the report
	Now    time.Time // when the report is written
	// GPU is each trial's GPU telemetry by trial number, for the trials
	// that have any (NVML on the machine that ran them), summarised as a
	// level's is (gpu.Usage: power the sum of the GPUs' means, energy the
	// sum over GPUs).
	GPU map[int]*measure.GPUUsage
	// Forecast is the sampler's forecast of the space stored with the
	// study (the guided sampler's: store.Forecast), none for samplers
	// that forecast nothing: what the parameter charts say of values no
	// trial measured.
	Forecast []store.Forecast
	// Findings are diagnoses of the measurements with their evidence,
	// shown right after the recommendation when there are any: Load adds
	// the diagnose rules' on the recommended configuration's levels and
	// every level whose client fell behind; other diagnoses are appended
	// here (docs/architecture.md, "Where to add").
	Findings []TrialFinding
}

// TrialFinding is a diagnosis of one trial's measurements: a
// diagnose.Finding (its rule, severity, level, summary, advice and
// evidence) and the trial it is about.
type TrialFinding struct {
	Trial int // -1: the whole study
	diagnose.Finding
}

// findingView is a finding as the report prints it.
type findingView struct {
	Trial                   int
	Level                   string
	Warn                    bool // anything above diagnose.Info
	Title, Evidence, Advice string
}

// viewOf writes f for a reader: its summary as the title, its evidence
// on one line and its advice as a sentence.
func viewOf(f TrialFinding) findingView {
	var ev []string
	for _, e := range f.Evidence {
		ev = append(ev, e.String())
	}
	title := sentence(f.Summary)
	return findingView{Trial: f.Trial, Level: f.Level, Warn: f.Severity != diagnose.Info,
		Title: strings.TrimSuffix(title, "."), Evidence: strings.Join(ev, ", "), Advice: sentence(f.Advice)}
}

// ErrNoStudy is returned by Load for a name the database lacks.
var ErrNoStudy = errors.New("no such study")

// Load reads study name from db with everything a report shows.
func Load(ctx context.Context, db *store.Store, name string) (*StudyReport, error) {
	st, err := db.GetStudy(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNoStudy, name)
	}
	if err != nil {
		return nil, err
	}
	study, err := spec.ParseSpec([]byte(st.Spec), name+".yaml (stored)")
	if err != nil {
		return nil, fmt.Errorf("stored spec of %s: %w", name, err)
	}
	trials, err := db.Trials(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	fcs, err := db.Forecasts(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	s := &StudyReport{Stored: st, Spec: study, Trials: trials, Forecast: fcs, Now: time.Now(), GPU: map[int]*measure.GPUUsage{}}
	s.Findings = append(diagnoseRecommended(study, trials), clientFindings(trials)...)
	for _, t := range trials {
		samples, err := db.GPUSamples(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		if u := gpu.Usage(samples, 0); u != nil {
			s.GPU[t.Number] = u
		}
	}
	return s, nil
}

// diagnoseRecommended explains the recommended configuration's levels
// (package diagnose): what bound each one, with its evidence and the
// engine's flag to change.
func diagnoseRecommended(study *spec.Spec, trials []store.Trial) []TrialFinding {
	rec, err := recommend.RecommendStudy(trials, study.Terms(), recommend.PreferObjective)
	if err != nil {
		return nil
	}
	var out []TrialFinding
	for _, t := range trials {
		if t.Number != rec.Best.Trial {
			continue
		}
		for _, f := range diagnose.Levels(study.Engine, t.Settings, t.LoadPoints) {
			out = append(out, TrialFinding{Trial: t.Number, Finding: f})
		}
	}
	return out
}

// clientFindings names every level whose benchmark client fell behind
// (measure.Client): its figures are partly the client's.
func clientFindings(trials []store.Trial) []TrialFinding {
	var out []TrialFinding
	for _, t := range trials {
		for _, lp := range t.LoadPoints {
			c := lp.Summary.Client
			if c == nil || !c.Suspect {
				continue
			}
			out = append(out, TrialFinding{Trial: t.Number, Finding: diagnose.Finding{
				Rule: "client_suspect", Severity: diagnose.Warning, Level: lp.Label,
				Summary: "suspect level: the benchmark client fell behind",
				Advice:  c.Why + ": its latencies and throughput are partly the client's; measure it again on a machine the client has to itself",
				Evidence: []diagnose.Evidence{{Name: "send_lateness_p50", Value: c.SendLatenessP50, Unit: "ms"},
					{Name: "send_lateness_p99", Value: c.SendLatenessP99, Unit: "ms"},
					{Name: "loop_lag_p99", Value: c.LoopLagP99, Unit: "ms"}, {Name: "client_cpu", Value: c.CPU, Unit: "cores"}},
			}})
		}
	}
	return out
}

// sentence starts s with a capital letter and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	if !strings.HasSuffix(s, ".") {
		r = append(r, '.')
	}
	return string(r)
}

// view is everything the study templates print, computed once.
type view struct {
	Name, Status, Model, Engine string
	Generated, Tool             string
	Counts                      string
	Rec                         *recView
	NoRec                       string
	Findings                    []findingView
	SLO                         string
	Conv                        *convView // conversation workloads only

	Pareto, Cost, TTFT, TPOT, History, Effects charted
	ParamCharts                                []paramChart
	FrontHead                                  []string
	Front                                      []frontRow
	EffectRows                                 []effectRow
	EffectMethod                               string
	FailClasses                                []failClass
	Failed                                     []failedTrial
	ReqFailures                                []reqFailure
	Interrupted                                []int
	Running                                    []int
	Reruns                                     []rerun
	GPU                                        []gpuRow
	Facts                                      []fact
	SpecText                                   string
	Trials                                     []trialRow
}

// charted is a chart's SVG (HTML) and its caption.
type charted struct {
	SVG     template.HTML
	Caption string
}

// paramChart is a parameter's chart and its values without a point, a
// caption line each saying why (valueMark).
type paramChart struct {
	SVG   template.HTML
	Notes []string
}

type recView struct {
	Trial, Runs       int
	Level             string
	Commands          []command
	Figures           []figure
	Settings          string
	Why               string
	RunnerUp          *runnerUp
	MeasuredPerMetric string
	// Alternative is the other shape's best in a study that searched
	// aggregated and disaggregated deployments.
	Alternative *alternative
}

type alternative struct {
	Shape, Of       string // its shape, and the recommendation's
	Trial, GPUs     int
	Level, Settings string
	Commands        []command
	Figures         []altFigure
}

// altFigure is one of the alternative's figures and how far the
// recommendation's mean is from it.
type altFigure struct{ Name, Value, Diff string }

type command struct{ Label, Line string }

type figure struct{ Name, Value, CI string }

type runnerUp struct {
	Trial      int
	Figure, CI string
	Verdict    string
	Differs    string // the settings in which it differs from the best
}

type frontRow struct {
	Trial    int
	Level    string
	Values   []string
	Settings string
	Chosen   bool
	// Same are other trials measured with exactly these figures at this
	// level (settings that did not matter at this load).
	Same string
}

type effectRow struct {
	Param  string
	Eta2   string
	Groups int
	N      int
}

type failClass struct {
	Class  string
	Count  int
	Trials string
}

type failedTrial struct {
	Trial    int
	Class    string
	Settings string
	Message  string
	LogTail  string
	Confirms string
}

type reqFailure struct {
	Trial   int
	Level   string
	Class   string
	Count   int
	Message string
}

type rerun struct{ Trial, Times int }

type gpuRow struct {
	Trial, GPUs, Samples     int
	Power, Util, Mem, Energy string
}

type fact struct{ Key, Value string }

type trialRow struct {
	Number    int
	Kind      string
	Status    string
	Objective string
	GPUs      string
	Duration  string
	Settings  string
}

// metricTitle is a metric's name for a reader (the metric table's
// Title; the name itself for one the table lacks).
func metricTitle(m string) string {
	if mt, ok := measure.LookupMetric(m); ok {
		return mt.Title
	}
	return m
}

// SettingsLine writes settings as k=v in name order.
func SettingsLine(s space.Settings) string { return s.Line() }

// differs lists the settings of b that differ from a.
func differs(a, b space.Settings) string {
	d := space.Settings{}
	for k, v := range b {
		if fmt.Sprint(a[k]) != fmt.Sprint(v) {
			d[k] = v
		}
	}
	if len(d) == 0 {
		return "the same settings"
	}
	return SettingsLine(d)
}

func (s *StudyReport) build() *view {
	study := s.Spec
	v := &view{Name: s.Stored.Name, Status: s.Stored.Status, Model: study.Model, Engine: string(study.Engine),
		Generated: s.Now.UTC().Format("2006-01-02 15:04 MST"), Tool: s.Tool, SLO: study.SLO.String()}
	for _, f := range s.Findings {
		v.Findings = append(v.Findings, viewOf(f))
	}
	v.Counts = s.counts()
	s.recommendation(v)
	s.conversation(v)
	pts := recommend.StoredPoints(s.Trials, study.Hardware.PricePerGPUHour)
	s.frontTable(v, pts)
	s.charts(v, pts)
	s.failures(v)
	s.facts(v)
	s.trialRows(v)
	return v
}

func (s *StudyReport) counts() string {
	var search, confirm, ok, failed, other int
	for _, t := range s.Trials {
		if t.Confirms != nil {
			confirm++
		} else {
			search++
		}
		switch t.Status {
		case measure.StatusOK:
			ok++
		case measure.StatusFailed:
			failed++
		default:
			other++
		}
	}
	c := fmt.Sprintf("%d trials (%d search, %d confirmation runs): %d ok, %d failed", len(s.Trials), search, confirm, ok, failed)
	if other > 0 {
		c += fmt.Sprintf(", %d interrupted or running", other)
	}
	if st := s.Stored.Stop; st.Stopped() {
		// An early stop is the study's outcome, not a missing part of it.
		c += "; " + st.String()
	}
	return c
}

func (s *StudyReport) recommendation(v *view) {
	study := s.Spec
	rec, err := recommend.RecommendStudy(s.Trials, study.Terms(), recommend.PreferObjective)
	if err != nil {
		v.NoRec = fmt.Sprintf("No recommendation: %v (SLO %s). See the failures and the Pareto chart below for how close the trials came.", err, study.SLO)
		return
	}
	best := rec.Best
	p := best.Point
	r := &recView{Trial: p.Trial, Level: p.Label, Runs: best.Runs(), Settings: SettingsLine(p.Settings)}
	r.Commands = serveCommands(study, p)
	for _, m := range recommend.Figures() {
		value, ci, ok := best.Figure(m)
		if !ok {
			continue
		}
		r.Figures = append(r.Figures, figure{Name: metricTitle(m), Value: value, CI: ci})
	}
	runs := "one run"
	if best.Runs() > 1 {
		runs = fmt.Sprintf("%d runs (the search trial and its confirmation runs)", best.Runs())
	}
	dir := "highest"
	if m, ok := measure.LookupMetric(best.Metric); ok && m.Better == measure.Lower {
		dir = "lowest"
	}
	r.Why = fmt.Sprintf("The %s %s, ranked by %s, among the configurations whose every run met the SLO, over %s, at %s.",
		dir, metricTitle(best.Metric), recommend.PreferObjective.For(study.Tuner.Objective).Describe(study.Tuner.Objective), runs, p.Label)
	for _, risk := range best.SLORisks(study.SLO) {
		r.Why += " Caution: " + risk + "."
	}
	if d := best.Disagreement(); d != "" {
		r.Why += " Note: " + d + "."
	}
	if ru := rec.RunnerUp; ru != nil {
		// recommend writes the same figure (Candidate.Figure).
		u := &runnerUp{Trial: ru.Trial, Differs: differs(best.Settings, ru.Settings)}
		u.Figure, u.CI, _ = ru.Figure(best.Metric)
		if d := ru.Disagreement(); d != "" {
			u.CI += " (" + d + ")"
		}
		u.Verdict = "cannot be told apart from the recommendation at 95%: either will do"
		if rec.Separated {
			u.Verdict = "the recommendation is better at 95%"
		}
		r.RunnerUp = u
	}
	if study.Disaggregation != nil {
		r.Alternative = alternativeOf(study, s.Trials, best)
	}
	v.Rec = r
}

// serveCommands are the commands that serve p: the engine's (and docker's
// when the study ran containers), or a disaggregated point's parts as
// one script (engines in the background, the router in front), as
// recommend prints them.
func serveCommands(study *spec.Spec, p recommend.Point) []command {
	if parts := study.PartCommands(p); parts != nil {
		label := fmt.Sprintf("disaggregated on one host: %d engines, each on its GPUs, and the router in front", len(parts)-1)
		return []command{{label, strings.Join(spec.Script(parts), "\n")}}
	}
	rel := engine.Release(study.Engine, study.Image())
	label := fmt.Sprintf("%s %s", study.Engine, rel)
	cmds := []command{{label, engine.ShellJoin(study.ServeArgvFor(p, string(study.Engine), rel))}}
	if study.Image() != "" || study.Launcher.Kind == "docker" {
		cmds = append(cmds, command{"docker, " + label, engine.ShellJoin(study.ServeArgvFor(p, "docker", rel))})
	}
	return cmds
}

// alternativeOf is the best measured configuration of the other shape
// than best's, with the measured difference (recommend.OtherShape); nil
// when the study measured none that meets the SLO.
func alternativeOf(study *spec.Spec, trials []store.Trial, best recommend.Candidate) *alternative {
	alt := recommend.OtherShape(trials, study.Terms(), recommend.PreferObjective, best)
	if alt == nil {
		return nil
	}
	a := alt.Best
	out := &alternative{Shape: a.Point.Settings.Shape(), Of: best.Point.Settings.Shape(), Trial: a.Trial,
		Level: a.Point.Label, GPUs: a.Point.GPUs, Settings: SettingsLine(a.Settings), Commands: serveCommands(study, a.Point)}
	diff := best.Difference(a, recommend.Figures())
	for _, m := range recommend.Figures() {
		value, ci, ok := a.Figure(m)
		if !ok {
			continue
		}
		d := ""
		if x, ok := diff[m]; ok {
			d = fmt.Sprintf("%+.1f%%", x)
		}
		out.Figures = append(out.Figures, altFigure{Name: metricTitle(m), Value: strings.TrimSpace(value + " " + ci), Diff: d})
	}
	return out
}

// metFront is the Pareto front over the study's objectives of the points
// of pts that meet the SLOs.
func (s *StudyReport) metFront(pts []recommend.Point) []recommend.Point {
	var met []recommend.Point
	for _, p := range pts {
		if s.Spec.SLO.Met(p) {
			met = append(met, p)
		}
	}
	return recommend.Front(met, s.Spec.Objectives)
}

// frontTable lists the Pareto front over the study's objectives among the
// points that meet the SLOs, marking the recommended point.
func (s *StudyReport) frontTable(v *view, pts []recommend.Point) {
	study := s.Spec
	front := s.metFront(pts)
	metrics := []string{}
	seen := map[string]bool{}
	for _, o := range study.Objectives {
		if !seen[o.Metric] {
			metrics = append(metrics, o.Metric)
			seen[o.Metric] = true
		}
	}
	for _, m := range []string{"ttft_p99", "tpot_p99"} {
		if !seen[m] {
			metrics = append(metrics, m)
		}
	}
	v.FrontHead = make([]string, len(metrics))
	for i, m := range metrics {
		v.FrontHead[i] = shortTitle(m)
	}
	if len(metrics) == 0 {
		return
	}
	sort.SliceStable(front, func(i, j int) bool {
		a, _ := front[i].Metric(metrics[0])
		b, _ := front[j].Metric(metrics[0])
		return a > b
	})
	index := map[string]int{} // level and figures -> row
	for _, p := range front {
		row := frontRow{Trial: p.Trial, Level: p.Label, Settings: SettingsLine(p.Settings)}
		if v.Rec != nil && v.Rec.Trial == p.Trial && v.Rec.Level == p.Label {
			row.Chosen = true
		}
		if p.Summary.Suspect() {
			row.Level += " (suspect: client fell behind)"
		}
		for _, m := range metrics {
			x, ok := p.Metric(m)
			if !ok {
				row.Values = append(row.Values, "–")
				continue
			}
			row.Values = append(row.Values, fmt.Sprintf("%.4g", x))
		}
		key := p.Label + "|" + strings.Join(row.Values, "|")
		if i, ok := index[key]; ok {
			r := &v.Front[i]
			other := p.Trial
			if row.Chosen { // the recommended trial heads its row
				other = r.Trial
				r.Trial, r.Settings, r.Chosen = row.Trial, row.Settings, true
			}
			if r.Same != "" {
				r.Same += ", "
			}
			r.Same += fmt.Sprint(other)
			continue
		}
		index[key] = len(v.Front)
		v.Front = append(v.Front, row)
	}
}

// shortTitle is a metric's column heading with its unit.
func shortTitle(m string) string {
	if mt, ok := measure.LookupMetric(m); ok {
		return mt.Heading
	}
	return fmt.Sprintf("%s (%s)", m, recommend.Unit(m))
}

func (s *StudyReport) failures(v *view) {
	counts := map[engine.Failure][]int{}
	for _, t := range s.Trials {
		switch t.Status {
		case measure.StatusFailed:
			counts[t.Failure] = append(counts[t.Failure], t.Number)
			ft := failedTrial{Trial: t.Number, Class: string(t.Failure), Settings: SettingsLine(t.Settings),
				Message: t.FailureMsg, LogTail: t.LogTail}
			if t.Confirms != nil {
				ft.Confirms = fmt.Sprintf("confirmation run of trial %d", *t.Confirms)
			}
			v.Failed = append(v.Failed, ft)
		case measure.StatusInterrupted:
			v.Interrupted = append(v.Interrupted, t.Number)
		case measure.StatusRunning:
			v.Running = append(v.Running, t.Number)
		}
		if t.Reruns > 0 {
			v.Reruns = append(v.Reruns, rerun{t.Number, t.Reruns})
		}
		for _, lp := range t.LoadPoints {
			for _, c := range measure.ErrorClasses {
				if n := lp.Summary.Errors[string(c)]; n > 0 {
					v.ReqFailures = append(v.ReqFailures, reqFailure{Trial: t.Number, Level: lp.Label, Class: string(c),
						Count: n, Message: lp.Summary.ErrorMessages[string(c)]})
				}
			}
		}
	}
	for _, f := range engine.Failures {
		if ns := counts[f]; len(ns) > 0 {
			v.FailClasses = append(v.FailClasses, failClass{Class: string(f), Count: len(ns), Trials: intList(ns)})
		}
	}
	var nums []int
	for n := range s.GPU {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		u := s.GPU[n]
		// Zero is a reading NVML did not give (gpu.Sample).
		v.GPU = append(v.GPU, gpuRow{Trial: n, GPUs: u.GPUs, Samples: u.Samples, Power: orDash("%.0f W", u.MeanPowerW),
			Util: orDash("%.0f%%", u.MeanUtilPct), Mem: orDash("%.1f GiB", float64(u.PeakMemUsedBytes)/(1<<30)),
			Energy: orDash("%.0f J", u.EnergyJ)})
	}
}

func orDash(format string, x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "–"
	}
	return fmt.Sprintf(format, x)
}

func intList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

func (s *StudyReport) facts(v *view) {
	study, st := s.Spec, s.Stored
	add := func(k, val string) { v.Facts = append(v.Facts, fact{k, val}) }
	add("study", fmt.Sprintf("%s (%s)", st.Name, st.Status))
	when := st.Started.Local().Format("2006-01-02 15:04:05 MST")
	if !st.Finished.IsZero() {
		when += fmt.Sprintf(" to %s (%s)", st.Finished.Local().Format("15:04:05"), spec.ShortDuration(st.Finished.Sub(st.Started)))
	}
	add("run", when)
	add("model", study.Model)
	image := study.Image()
	if image == "" {
		image = "none (" + study.Launcher.Kind + " launcher)"
	}
	add("engine", fmt.Sprintf("%s, launcher %s, image %s", study.Engine, study.Launcher.Kind, image))
	hw := study.Hardware.GPU
	if hw == "" {
		hw = "not given"
	}
	if len(study.Launcher.GPUs) > 0 {
		hw += fmt.Sprintf(", GPUs %v", study.Launcher.GPUs)
	}
	add("hardware", hw)
	price := "none (no cost figures)"
	if study.Hardware.PricePerGPUHour > 0 {
		src := study.Hardware.PriceSource
		if src == "spec" {
			src = "from the spec, as of " + st.Started.Format("2006-01-02")
		}
		price = fmt.Sprintf("$%.2f per GPU-hour (%s)", study.Hardware.PricePerGPUHour, src)
	}
	add("price", price)
	objs := make([]string, len(study.Objectives))
	for i, o := range study.Objectives {
		objs[i] = o.String()
	}
	add("search", fmt.Sprintf("sampler %s, %d trials, seed %d, objective %s, confirmation %d×%d",
		study.Tuner.Sampler, study.Tuner.Trials, study.Tuner.Seed, study.Tuner.Objective, study.Tuner.Confirm.Top, study.Tuner.Confirm.Runs))
	add("Pareto objectives", strings.Join(objs, ", "))
	add("SLO", study.SLO.String())
	w := study.Workload
	var levels []string
	for _, l := range w.Levels {
		lab, _, _ := l.Label()
		levels = append(levels, lab)
	}
	load := strings.Join(levels, ", ")
	if w.Capacity {
		load = fmt.Sprintf("capacity search up to concurrency %d", w.MaxConcurrency)
	}
	if d := w.Dataset; d.Kind == "conversation" && d.Turns != nil {
		think := "none"
		if d.Think != nil {
			think = d.Think.String()
		}
		add("workload", fmt.Sprintf("conversation dataset, %d sessions per level of %s turns (messages %s tokens, answers %s tokens, think time %s), levels: %s",
			d.Sessions, d.Turns, d.Input, d.Output, think, load))
	} else {
		add("workload", fmt.Sprintf("%s dataset, %d requests per level after %d warm-up, levels: %s", w.Dataset.Kind, w.RequestsPerLevel, w.Warmup, load))
	}
	tool := st.Tool
	if tool == "" {
		tool = "not recorded (stored before servetune kept it)"
	}
	add("run by", tool)
	rep := s.Tool
	if s.Source != "" {
		rep += ", from " + s.Source
	}
	add("report by", rep+" at "+v.Generated)
	// The study keeps its spec's text, not the path it was read from: the
	// file to run is the text below, saved.
	file := st.Name + ".yaml"
	add("reproduce", fmt.Sprintf("save the study spec below as %s (fill in any redacted secret), then run: %s (same seed, same sampler)",
		file, engine.ShellJoin([]string{"servetune", "tune", file, "--fresh"})))
	v.SpecText = st.Spec
}

func (s *StudyReport) trialRows(v *view) {
	obj := s.Spec.Tuner.Objective
	for _, t := range s.Trials {
		r := trialRow{Number: t.Number, Kind: "search", Status: string(t.Status), Objective: "–", GPUs: fmt.Sprint(t.GPUs), Settings: SettingsLine(t.Settings)}
		if t.Confirms != nil {
			r.Kind = fmt.Sprintf("confirms %d", *t.Confirms)
		}
		if t.Failure != "" {
			r.Status += "/" + string(t.Failure)
		}
		if t.Objective != nil {
			r.Objective = recommend.Format(obj.Metric, *t.Objective)
		}
		if !t.Finished.IsZero() {
			r.Duration = spec.ShortDuration(t.Finished.Sub(t.Started))
		}
		v.Trials = append(v.Trials, r)
	}
}

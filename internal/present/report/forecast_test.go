package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/servetune/servetune/internal/browser"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/testspec"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	_ "github.com/servetune/servetune/tuner/guided" // the guided sampler, which forecasts
	"github.com/servetune/servetune/tuner/memory"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// runEarlyStop runs testspec.EarlyStop to its early stop in a SQLite file and
// loads its report.
func runEarlyStop(t *testing.T) (*StudyReport, *store.Store) {
	t.Helper()
	ctx := context.Background()
	study, err := spec.ParseSpec([]byte(testspec.EarlyStop), "early.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	out, err := (&tuner.Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stop.Stopped() {
		t.Fatalf("the study ran all %d trials: no early stop to report", out.Trials)
	}
	s, err := Load(ctx, db, "early")
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// TestReportMarksForecastRuledOut: a guided study stopped early stores
// its forecast, and the report marks every value of the parameter that no
// trial measured as ruled out by the forecast, with the forecast's figure
// for it (the best stored forecast of the value) and the best measured,
// in the parameter's chart (a triangle at the figure) and its caption,
// and in the Markdown; a measured value is not marked.
func TestReportMarksForecastRuledOut(t *testing.T) {
	s, _ := runEarlyStop(t)
	if len(s.Forecast) != 6 {
		t.Fatalf("%d forecasts stored with the study, want the space's 6", len(s.Forecast))
	}
	obj := s.Spec.Tuner.Objective
	measured := map[string]bool{}
	best := 0.0
	for _, tr := range s.Trials {
		if tr.Objective != nil {
			measured[fmt.Sprint(tr.Settings["max_running_requests"])] = true
			best = max(best, *tr.Objective)
		}
	}
	figure := map[string]float64{}
	for _, f := range s.Forecast {
		k := fmt.Sprint(f.Settings["max_running_requests"])
		if f.Met && f.PStart >= 0.5 {
			figure[k] = max(figure[k], f.Value)
		}
	}
	var html, md bytes.Buffer
	if err := s.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	page := html.String()
	caption := regexp.MustCompile(`<figcaption class="unmeasured">(.*?)</figcaption>`).FindStringSubmatch(page)
	if caption == nil {
		t.Fatal("the parameter chart has no caption for the values it did not measure")
	}
	marked := 0
	for _, v := range []string{"8", "16", "32", "64", "128", "256"} {
		line := "max_running_requests=" + v + ": "
		if measured[v] {
			if strings.Contains(caption[1], line) {
				t.Errorf("the measured value %s is marked: %s", v, caption[1])
			}
			continue
		}
		marked++
		if figure[v] == 0 {
			t.Fatalf("no forecast figure stored for the unmeasured value %s: %+v", v, s.Forecast)
		}
		want := line + "ruled out by the forecast: predicted " + recommend.Format(obj.Metric, figure[v]) + ", best measured " + recommend.Format(obj.Metric, best)
		if !strings.Contains(caption[1], want) {
			t.Errorf("caption lacks %q:\n%s", want, caption[1])
		}
		if !strings.Contains(md.String(), mdText(want)) {
			t.Errorf("Markdown lacks %q", mdText(want))
		}
	}
	if marked == 0 {
		t.Fatal("every value was measured: nothing for the forecast to rule out")
	}
	// The chart draws the figures, under a legend entry of their own.
	if !strings.Contains(page, "forecast, not measured") {
		t.Error("the parameter chart has no forecast legend")
	}
}

// TestReportForecastWording: what a value without a point says, case by
// case, from a stored study: the forecast's figure (within the noise of
// the best measured, said so), a value forecast to miss the SLO, not to
// start, rejected by the space's rules, one measured without a value,
// one nobody forecast; "ruled out" only once the study stopped early.
func TestReportForecastWording(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := strings.Replace(strings.Replace(smallSpec, "max_running_requests: [32, 64]", "max_running_requests: [8, 16, 32, 64, 128, 256, 512]", 1),
		"sampler: grid, trials: 4", "sampler: guided, trials: 20, objective: max output_throughput_per_gpu", 1)
	run, _, err := db.Begin(ctx, store.Study{Name: "small", Spec: src, Seed: 3}, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	set := func(mrr int) engine.Settings {
		return engine.Settings{"max_running_requests": mrr, "gpu_memory_fraction": 0.9}
	}
	obj := 2000.0 // level(0)'s output throughput, on one GPU
	must(run.StartTrial(ctx, 0, set(64), []int{0}))
	must(run.FinishTrial(ctx, store.TrialResult{Number: 0, Status: measure.StatusOK, Objective: &obj, LoadPoints: []measure.Level{level(0)}}))
	must(run.StartTrial(ctx, 1, set(512), []int{0}))
	must(run.FinishTrial(ctx, store.TrialResult{Number: 1, Status: measure.StatusFailed, Failure: engine.FailOOM, FailureMsg: "CUDA out of memory"}))
	must(run.SetForecast(ctx, []store.Forecast{
		{Settings: set(64), Value: 2000, Met: true, PStart: 1},
		{Settings: set(32), Value: 1500, Met: true, PStart: 1},
		{Settings: set(32), Value: 1700, Met: true, PStart: 0.9}, // the value's best
		{Settings: set(128), Value: 1980, Met: true, PStart: 1},  // within the noise
		{Settings: set(8), PStart: 1},                            // runs, meets no SLO
		{Settings: set(16), Value: 2500, Met: true, PStart: 0.1}, // would meet it; will not start
		{Settings: set(256), Failure: string(engine.FailInfeasible)},
		{Settings: set(512), Value: 2100, Met: true, PStart: 1}, // measured: its trial says more
	}))
	notes := func() []string {
		s, err := Load(ctx, db, "small")
		if err != nil {
			t.Fatal(err)
		}
		return s.build().ParamCharts[0].Notes
	}
	got := strings.Join(notes(), "\n")
	for _, want := range []string{
		"max_running_requests=8: not measured; forecast: misses the SLO at every load level",
		"max_running_requests=16: not measured; forecast: would meet the SLO but is predicted not to start (memory)",
		"max_running_requests=32: not measured; forecast: predicted 1700 tok/s/GPU, best measured 2000 tok/s/GPU",
		"max_running_requests=128: not measured; forecast: predicted 1980 tok/s/GPU, within the 2% noise of a measurement of the best measured 2000 tok/s/GPU",
		"max_running_requests=256: not measured; forecast: the space's rules reject every configuration with it",
		"max_running_requests=512: measured in 1 trial(s), none with a value: each failed or met the SLO at no load level",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notes lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "max_running_requests=64") {
		t.Errorf("the measured value 64 is marked:\n%s", got)
	}
	if len(notes()) != 6 {
		t.Errorf("%d notes, want one for each of the 6 values without a point:\n%s", len(notes()), got)
	}
	must(run.SetStop(ctx, store.Stop{At: 2, Of: 20, Why: "the forecast promises nothing better"}))
	if got := strings.Join(notes(), "\n"); !strings.Contains(got, "max_running_requests=32: ruled out by the forecast: predicted 1700 tok/s/GPU") {
		t.Errorf("after the early stop the value is not ruled out by the forecast:\n%s", got)
	}
	// A study whose sampler forecast nothing: the values are not
	// measured, on one line, and no forecast is named.
	must(run.SetForecast(ctx, nil))
	if got := strings.Join(notes(), "\n"); !strings.Contains(got, "max_running_requests=8, 16, 32, 128, 256: not measured") || strings.Contains(got, "forecast") {
		t.Errorf("without a forecast:\n%s", got)
	}
}

// TestForecastMarkInBrowser renders the early-stopped study's report in
// headless Chromium: the parameter chart's caption shows each ruled-out
// value with its forecast on the page, and nothing errs. With
// SERVETUNE_SCREENSHOTS=DIR it saves the chart as DIR/forecast-marks.png.
func TestForecastMarkInBrowser(t *testing.T) {
	page := browser.New(t, 1000, 1200)
	s, _ := runEarlyStop(t)
	var html bytes.Buffer
	if err := s.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(file, html.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(page.Ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const c = document.querySelector("figcaption.unmeasured");
		return c && c.offsetHeight > 0 ? c.innerText : "";
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "ruled out by the forecast: predicted ") {
		t.Errorf("the page shows no ruled-out value with its forecast: %q", shown)
	}
	if msgs := page.Console(); len(msgs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(msgs, "\n"))
	}
	if dir := os.Getenv("SERVETUNE_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`figure:has(figcaption.unmeasured)`)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "forecast-marks.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

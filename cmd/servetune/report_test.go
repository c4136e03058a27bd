package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/servetune/servetune/internal/browser"
	"github.com/servetune/servetune/internal/present/report"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
)

// quickstartDB runs the quick-start study (virtual time, seconds) into a
// new database and returns its path.
func quickstartDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "qs.db")
	if code, _, errs := runCLI(t, "tune", filepath.Join("..", "..", "examples", "quickstart.yaml"), "--db", db); code != exitOK {
		t.Fatalf("tune quickstart: exit %d: %s", code, errs)
	}
	return db
}

// recommendedCommand is the serve command `recommend` prints for the
// study, as the report must show it.
func recommendedCommand(t *testing.T, db, name string) string {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := report.Load(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recommend.RecommendStudy(st.Trials, st.Spec.Terms(), recommend.PreferThroughput)
	if err != nil {
		t.Fatal(err)
	}
	return engine.ShellJoin(st.Spec.ServeArgv(rec.Best.Point, string(st.Spec.Engine)))
}

// TestReportInBrowser renders the quick-start study's report in headless
// Chromium: no console error, no request beyond the file itself, at least
// four charts, and the recommended command on the page. With
// SERVETUNE_SCREENSHOTS=DIR it also saves DIR/report.png (docs/).
func TestReportInBrowser(t *testing.T) {
	page := browser.New(t, 1000, 1250)
	db := quickstartDB(t)
	out := filepath.Join(t.TempDir(), "report.html")
	if code, _, errs := runCLI(t, "report", "quickstart", "--db", db, "-o", out); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	want := recommendedCommand(t, db, "quickstart")
	url := "file://" + out
	ctx, cancel := context.WithTimeout(page.Ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg").length`))
	if err != nil {
		t.Fatal(err)
	}
	if charts < 4 {
		t.Errorf("%d <svg> charts, want at least 4", charts)
	}
	cmds, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("pre.cmd")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 || cmds[0] != want {
		t.Errorf("recommended command on the page %q, want %q", cmds, want)
	}
	// The load event: every resource the page asks for has been asked for,
	// and its scripts have run.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if msgs := page.Console(); len(msgs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(msgs, "\n"))
	}
	for _, u := range page.Requests() {
		if u != url && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report requested %s", u)
		}
	}
	if len(page.Requests()) == 0 {
		t.Error("no request seen at all: the network log is not working")
	}
	if dir := os.Getenv("SERVETUNE_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "report.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReportCommand covers the command's formats and its input errors.
func TestReportCommand(t *testing.T) {
	db := quickstartDB(t)
	want := recommendedCommand(t, db, "quickstart")
	code, md, errs := runCLI(t, "report", "quickstart", "--db", db, "--format", "md")
	if code != exitOK {
		t.Fatalf("report --format md: exit %d: %s", code, errs)
	}
	for _, s := range []string{"## servetune study report: quickstart", "```sh\n" + want + "\n```", "### Pareto front", "### What was run"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q", s)
		}
	}
	code, html, _ := runCLI(t, "report", "quickstart", "--db", db)
	if code != exitOK {
		t.Fatalf("report: exit %d", code)
	}
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(html, bad) {
			t.Errorf("the HTML report holds %q: it must load nothing", bad)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"report", "nope", "--db", db}, exitUsage, `no study "nope"`},
		{[]string{"report", "quickstart", "--db", db, "--format", "pdf"}, exitUsage, `--format "pdf"`},
		{[]string{"report", "quickstart", "--db", filepath.Join(t.TempDir(), "missing.db")}, exitUsage, "no study database"},
		{[]string{"report", "quickstart", "--db", db, "-o", filepath.Join(t.TempDir(), "no", "such", "dir", "r.html")}, exitUsage, "r.html: directory"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d %q, want %d with %q", c.args, code, errs, c.code, c.msg)
		}
	}
}

// TestBenchHTML: `sim run --html` (the bench outputs) and `bench compare
// --html` write self-contained pages with their charts.
func TestBenchHTML(t *testing.T) {
	dir := t.TempDir()
	sim := func(name string, extra ...string) {
		args := append([]string{"sim", "run", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM",
			"--input-len", "512", "--output-len", "64", "--num-requests", "100", "--json", filepath.Join(dir, name+".json"),
			"--html", filepath.Join(dir, name+".html")}, extra...)
		if code, _, errs := runCLI(t, args...); code != exitOK {
			t.Fatalf("sim run: exit %d: %s", code, errs)
		}
	}
	sim("sweep", "--sweep", "concurrency=1,8")
	sim("a", "--max-concurrency", "8")
	sim("b", "--max-concurrency", "8", "--max-num-seqs", "4")
	cmp := filepath.Join(dir, "cmp.html")
	if code, _, errs := runCLI(t, "bench", "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), "--html", cmp); code != exitOK {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		file  string
		svgs  int
		words []string
	}{
		{"sweep.html", 6, []string{"TTFT distribution", "Throughput by level", "c=8"}},
		{"cmp.html", 4, []string{"Change from base to new", "median TTFT", "significant"}},
	} {
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		if n := strings.Count(page, "<svg"); n < c.svgs {
			t.Errorf("%s: %d charts, want %d", c.file, n, c.svgs)
		}
		for _, w := range append(c.words, "Content-Security-Policy") {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q", c.file, w)
			}
		}
		if strings.Contains(page, "<script") {
			t.Errorf("%s holds a script", c.file)
		}
	}
}

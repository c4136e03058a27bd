package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// virtualSpec is a short study on the simulated engine in virtual time.
const virtualSpec = `name: vstudy
model: meta-llama/Llama-3.1-8B-Instruct
engine: vllm
launcher: {kind: virtual, gpus: [0, 1]}
hardware: {gpu: H100-SXM, price_per_gpu_hour: 2.95}
space:
  max_running_requests: [8, 32, 128]
  gpu_memory_fraction: [0.85, 0.9]
workload:
  dataset: {kind: random, input: 256, output: 32}
  load: {concurrency: [4, 32]}
  requests_per_level: REQS
  warmup: 0
slo: {ttft_p99_ms: 800, tpot_p99_ms: 40}
tuner: {sampler: grid, trials: TRIALS, seed: 1}
`

func vspec(reqs, trials int) string {
	return strings.NewReplacer("REQS", fmt.Sprint(reqs), "TRIALS", fmt.Sprint(trials)).Replace(virtualSpec)
}

// runIn runs the CLI in-process and returns exit code, stdout and stderr.
func runIn(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

type studiesDoc []struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Trials int    `json:"trials"`
}

type studiesFile struct {
	Studies studiesDoc `json:"studies"`
}

func studiesJSON(t *testing.T, db string) studiesDoc {
	t.Helper()
	code, out, errs := runIn("studies", "--db", db, "--json", "-")
	if code != exitOK {
		t.Fatalf("studies: exit %d: %s", code, errs)
	}
	var doc studiesFile
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("studies --json: %v\n%s", err, out)
	}
	return doc.Studies
}

// TestTuneOwnerRefusesSecond: while one process tunes a study, a second
// one on the same database (plain, --resume or --fresh) is refused at once
// with a line naming the owner, and the first finishes untouched.
func TestTuneOwnerRefusesSecond(t *testing.T) {
	bin := buildServetune(t)
	spec := writeSpec(t, vspec(3000, 40))
	db := filepath.Join(t.TempDir(), "s.db")
	first := exec.Command(bin, "tune", spec, "--db", db)
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() { // the first trial line: the run holds the study
		first.Wait()
		t.Fatalf("the first run printed nothing: %s", firstErr.String())
	}
	go io.Copy(io.Discard, stdout)
	for _, extra := range [][]string{nil, {"--resume"}, {"--fresh"}} {
		start := time.Now()
		second := exec.Command(bin, append([]string{"tune", spec, "--db", db}, extra...)...)
		var errb bytes.Buffer
		second.Stderr = &errb
		err := second.Run()
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(errb.String(), "is being tuned by pid") ||
			strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
			t.Errorf("second run %v: %v, stderr %q; want exit 2 and one line naming the owner", extra, err, errb.String())
		}
		if took > time.Second {
			t.Errorf("second run %v took %v to be refused, want under 1 s", extra, took)
		}
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the first run: %v\n%s", err, firstErr.String())
	}
	if doc := studiesJSON(t, db); len(doc) != 1 || doc[0].Status != "finished" || doc[0].Trials < 6 {
		t.Errorf("studies after both: %+v", doc)
	}
}

// TestTuneResumeChangedSpec: the stored spec is the study's identity. A
// resume with another model is refused whatever the flags; a changed space
// needs --force-spec, which then replaces the stored spec (recommend reads
// the new one); more trials need no leave. A refused resume leaves the
// study as it was.
func TestTuneResumeChangedSpec(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	src := vspec(40, 3)
	if code, _, errs := runIn("tune", writeSpec(t, src), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	before := studiesJSON(t, db)
	model := strings.Replace(src, "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", 1)
	for _, extra := range [][]string{{"--resume"}, {"--resume", "--force-spec"}} {
		code, _, errs := runIn(append([]string{"tune", writeSpec(t, model), "--db", db}, extra...)...)
		if code != exitUsage || !strings.Contains(errs, "model changed") || !strings.Contains(errs, "incomparable") {
			t.Errorf("resume with another model %v: exit %d, %q", extra, code, errs)
		}
	}
	wider := strings.Replace(src, "max_running_requests: [8, 32, 128]", "max_running_requests: [8, 32, 128, 256]", 1)
	code, _, errs := runIn("tune", writeSpec(t, wider), "--db", db, "--resume")
	if code != exitUsage || !strings.Contains(errs, "space.max_running_requests changed") || !strings.Contains(errs, "--force-spec") {
		t.Errorf("resume with a wider space: exit %d, %q", code, errs)
	}
	if doc := studiesJSON(t, db); len(doc) != 1 || doc[0] != before[0] {
		t.Fatalf("a refused resume changed the study: %+v, was %+v", doc, before)
	}
	more := strings.Replace(wider, "trials: 3,", "trials: 5,", 1)
	code, _, errs = runIn("tune", writeSpec(t, more), "--db", db, "--resume", "--force-spec")
	if code != exitOK || !strings.Contains(errs, "resumed with the changed spec (space.max_running_requests, tuner.trials)") {
		t.Fatalf("forced resume: exit %d, %q", code, errs)
	}
	if doc := studiesJSON(t, db); doc[0].Status != "finished" || doc[0].Trials < before[0].Trials+2 {
		t.Errorf("after the forced resume: %+v", doc)
	}
	// The stored spec is the new one.
	db2, err := openDB(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db2.GetStudy(context.Background(), "vstudy")
	db2.Close()
	if err != nil || !strings.Contains(st.Spec, "256") || !strings.Contains(st.Spec, "trials: 5") {
		t.Errorf("stored spec after the forced resume: %v\n%s", err, st.Spec)
	}
}

// TestTuneNothingMeasured: a study none of whose trials measured anything
// exits 1 with a count per failure class and the server's own words; a
// study that cannot run at all is refused before anything is stored.
func TestTuneNothingMeasured(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"object":"error","message":"CUDA error: an illegal memory access was encountered","type":"InternalServerError","code":500}`)
	}))
	defer srv.Close()
	src := strings.Replace(vspec(8, 2), "launcher: {kind: virtual, gpus: [0, 1]}", "launcher: {kind: endpoint, base_url: "+srv.URL+"}", 1)
	src = strings.Replace(src, "max_running_requests: [8, 32, 128]", "max_running_requests: 8", 1)
	src = strings.Replace(src, "gpu_memory_fraction: [0.85, 0.9]", "gpu_memory_fraction: 0.9", 1)
	db := filepath.Join(t.TempDir(), "s.db")
	code, out, errs := runIn("tune", writeSpec(t, src), "--db", db)
	if code != exitFailed || !strings.Contains(errs, "no trial succeeded: 1 requests_failed") ||
		!strings.Contains(errs, "CUDA error: an illegal memory access") {
		t.Errorf("all requests failing: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if !strings.Contains(out, "failed/requests_failed") {
		t.Errorf("the trial line does not say requests_failed: %s", out)
	}

	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown model", "meta-llama/Llama-3.1-8B-Instruct", "acme/no-such-model-7B", "the simulated engine cannot model acme/no-such-model-7B"},
		{"unknown GPU", "gpu: H100-SXM", "gpu: Z900", "hardware.gpu"},
		{"nothing fits", "gpu_memory_fraction: [0.85, 0.9]", "gpu_memory_fraction: [0.05, 0.1]", "none of the 6 configurations tried fits"},
		// Stored, then every trial failed on the file (bench refused it).
		{"missing trace", "dataset: {kind: random, input: 256, output: 32}", "dataset: {kind: trace, path: nope.jsonl, format: mooncake}", "workload.dataset.path: open "},
		{"missing sharegpt", "dataset: {kind: random, input: 256, output: 32}", "dataset: {kind: sharegpt, path: nope.json}", "nope.json: no such file or directory"},
		{"malformed trace", "dataset: {kind: random, input: 256, output: 32}", "dataset: {kind: trace, path: /dev/zero, format: azure}", "the cap on one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			start := time.Now()
			code, _, errs := runIn("tune", writeSpec(t, strings.Replace(vspec(8, 2), tc.old, tc.new, 1)), "--db", db)
			if code != exitUsage || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 with %q", code, errs, tc.want)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("refused after %v", took)
			}
			if _, err := os.Stat(db); err == nil {
				if doc := studiesJSON(t, db); len(doc) != 0 {
					t.Errorf("a refused study was stored: %+v", doc)
				}
			}
		})
	}
}

// TestTuneDefaultsAndFiles: make run's database is the read commands'
// default; it is private to the user; a --resume that names a database
// without the study is refused instead of starting a new one.
func TestTuneDefaultsAndFiles(t *testing.T) {
	t.Setenv("SERVETUNE_DB", "")
	dir := t.TempDir()
	t.Chdir(dir)
	spec := writeSpec(t, vspec(20, 2))
	if code, _, errs := runIn("tune", spec); code != exitOK {
		t.Fatalf("tune with the default database: exit %d: %s", code, errs)
	}
	code, out, errs := runIn("studies")
	if code != exitOK || !strings.Contains(out, "vstudy") {
		t.Errorf("studies with the default database: exit %d: %s%s", code, out, errs)
	}
	st, err := os.Stat(filepath.Join(dir, ".servetune", "servetune.db"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("database file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	code, _, errs = runIn("tune", spec, "--db", filepath.Join(dir, "typo.db"), "--resume")
	if code != exitUsage || !strings.Contains(errs, "nothing to resume") {
		t.Errorf("--resume on another database: exit %d, %q", code, errs)
	}
}

// TestTuneLocalModel: a model known only by its config.json is named by
// its directory, as the engines take it; the serve command names that
// directory and carries no flag the engine lacks.
func TestTuneLocalModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "my-model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../internal/serving/catalog/testdata/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")
	src := strings.Replace(vspec(40, 2), "meta-llama/Llama-3.1-8B-Instruct", model, 1)
	code, out, errs := runIn("tune", writeSpec(t, src), "--db", db)
	if code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	last := lastLine(out)
	if !strings.HasPrefix(last, "vllm serve "+model+" ") || strings.Contains(last, "config") || strings.Contains(last, "SERVETUNE") {
		t.Errorf("serve command %q", last)
	}
	// The config is stored with the study: recommend works without the file.
	if err := os.RemoveAll(model); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("recommend", "vstudy", "--db", db); code != exitOK || lastLine(out) != last {
		t.Errorf("recommend after the model's files went: exit %d\n%s%s", code, out, errs)
	}
	// So does calibrate: it replays the trials on the stored config.json.
	if code, _, errs := runIn("calibrate", "vstudy", "--db", db, "-o", filepath.Join(dir, "p.json"), "--max-evals", "5"); code != exitOK {
		t.Errorf("calibrate after the model's files went: exit %d: %s", code, errs)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestParetoOneDefinition: pareto lists only points that meet the SLOs
// (--all adds the others, marked), with units; recommend's pick is on it.
func TestParetoOneDefinition(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	// A TTFT limit that max_running_requests 8 at concurrency 32 misses
	// (its queue), so the front leaves points out.
	spec := strings.Replace(vspec(200, 6), "ttft_p99_ms: 800", "ttft_p99_ms: 400", 1)
	if code, _, errs := runIn("tune", writeSpec(t, spec), "--db", db); code != exitOK {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	var doc struct {
		Front []struct {
			Trial  int    `json:"trial"`
			Level  string `json:"level"`
			SLOMet bool   `json:"meets_slo"`
		} `json:"front"`
	}
	code, out, errs := runIn("pareto", "vstudy", "--db", db, "--json", "-")
	if code != exitOK {
		t.Fatalf("pareto: exit %d: %s", code, errs)
	}
	err := json.Unmarshal([]byte(out), &doc)
	front := doc.Front
	if err != nil || len(front) == 0 {
		t.Fatalf("pareto --json: %v\n%s", err, out)
	}
	for _, p := range front {
		if !p.SLOMet {
			t.Errorf("pareto lists trial %d at %s, which misses the SLOs", p.Trial, p.Level)
		}
	}
	_, all, _ := runIn("pareto", "vstudy", "--db", db, "--all")
	if !strings.Contains(all, "miss") || !strings.Contains(all, "(tok/s/GPU)") {
		t.Errorf("pareto --all:\n%s", all)
	}
	_, rec, _ := runIn("recommend", "vstudy", "--db", db)
	found := false
	for _, p := range front {
		found = found || strings.Contains(rec, fmt.Sprintf("trial %d at %s,", p.Trial, p.Level))
	}
	if !found {
		t.Errorf("recommend picks a point that is not on the front %+v:\n%s", front, rec)
	}
}

// TestQuickstartReproducible: `make run`'s study gives the same trials,
// figures and recommendation on an idle machine and on one with two busy
// loops (virtual time, trials told to the sampler in order).
func TestQuickstartReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick start twice")
	}
	// What is timed on the real clock: a trial's wall time, the elapsed
	// time and the ETA of the progress line.
	elapsed := regexp.MustCompile(` ok (\d+ms|\d+(\.\d+)?s)|, [^,\]]+ elapsed(, ETA [^\]]+|, done)`)
	var dbs []string
	once := func(busy bool) string {
		stop := make(chan struct{})
		if busy {
			for range 2 {
				go func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
					}
				}()
			}
		}
		defer close(stop)
		db := filepath.Join(t.TempDir(), "q.db")
		dbs = append(dbs, db)
		code, out, errs := runIn("tune", "../../examples/quickstart.yaml", "--db", db)
		if code != exitOK {
			t.Fatalf("quick start: exit %d: %s", code, errs)
		}
		return elapsed.ReplaceAllString(out, " ok")
	}
	idle, busy := once(false), once(true)
	if idle != busy {
		t.Errorf("the quick start differs on a busy machine:\nidle:\n%s\nbusy:\n%s", idle, busy)
	}
	if !strings.Contains(idle, "vllm serve meta-llama/Llama-3.1-8B-Instruct") {
		t.Errorf("no serve command:\n%s", idle)
	}
	// Every measured level of the quick start carries what the (virtual)
	// engine reported during it.
	code, out, errs := runIn("trials", "quickstart", "--json", "-", "--db", dbs[0])
	if code != exitOK {
		t.Fatalf("trials --json: exit %d: %s", code, errs)
	}
	var doc struct {
		Trials []struct {
			Number int
			Status string
			Levels []struct {
				Level         string
				EngineMetrics map[string]any `json:"engine_metrics"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	levels := 0
	for _, tr := range doc.Trials {
		for _, lv := range tr.Levels {
			levels++
			for _, k := range []string{"kv_cache_usage_peak", "preemptions", "num_requests_waiting_peak", "num_requests_running_peak"} {
				if _, ok := lv.EngineMetrics[k]; !ok {
					t.Errorf("trial %d %s: engine_metrics lacks %s: %v", tr.Number, lv.Level, k, lv.EngineMetrics)
				}
			}
			if lv.EngineMetrics["source"] != "simulator" || lv.EngineMetrics["num_requests_running_peak"].(float64) < 1 {
				t.Errorf("trial %d %s: engine_metrics %v", tr.Number, lv.Level, lv.EngineMetrics)
			}
		}
	}
	if levels == 0 {
		t.Errorf("no measured level in %s", out)
	}
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "servetune.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// records returns n deterministic per-request records.
func records(rng *rand.Rand, n int) []measure.Record {
	out := make([]measure.Record, n)
	for i := range out {
		send := time.Duration(i) * time.Millisecond
		first := send + time.Duration(20+rng.IntN(80))*time.Millisecond
		last := first + time.Duration(100+rng.IntN(900))*time.Millisecond
		out[i] = measure.Record{Index: i, Sched: send - time.Microsecond, Send: send, First: first, Last: last,
			End: last + time.Millisecond, PromptTokens: 100 + rng.IntN(900), OutputTokens: 1 + rng.IntN(512), Status: 200}
		if i%97 == 5 {
			out[i].Error, out[i].Status = measure.ErrHTTP5xx, 503
		}
	}
	return out
}

func summary(completed int, thr float64) measure.Summary {
	return measure.Summary{
		Duration: 12.5, Completed: completed, Failed: 1,
		Errors:           map[string]int{"http_5xx": 1},
		OutputThroughput: thr, RequestThroughput: thr / 200, RequestGoodput: thr / 250, MaxConcurrency: 8,
		TTFT: measure.Stats{N: completed, Median: 41.5, P99: 180.25, MedianCI: [2]float64{40, 43}},
		TPOT: measure.Stats{N: completed, Median: 11, P99: 19.5},
		ITL:  measure.Stats{N: completed * 10, P99: math.NaN()}, // no samples: stored as NULL
		Meta: map[string]any{"model": "m", "seed": 7.0},
	}
}

// gpuT0 is the first GPU sample's instant in result.
var gpuT0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// sameGPU reports whether samples read back are want as stored: the same
// instants and readings, the energy counter the same up to an offset.
func sameGPU(got, want []gpu.Sample) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.Time.Equal(w.Time) || g.EnergyMilliJ-got[0].EnergyMilliJ != w.EnergyMilliJ-want[0].EnergyMilliJ {
			return false
		}
		g.Time, g.EnergyMilliJ, w.EnergyMilliJ, w.MemTotal, w.UtilMem = w.Time, 0, 0, 0, 0
		if g != w {
			return false
		}
	}
	return true
}

// result builds a finished trial with two load levels of perLevel requests.
func result(studyID int64, number, perLevel int) TrialResult {
	rng := rand.New(rand.NewPCG(uint64(number), 1))
	obj := 1234.5 + float64(number)
	return TrialResult{
		StudyID: studyID, Number: number, Status: measure.StatusOK, Objective: &obj,
		LogTail: "INFO: Uvicorn running",
		LoadPoints: []measure.Level{
			measure.NewLevel(measure.Load{MaxConcurrency: 8}, summary(perLevel-1, 1000), records(rng, perLevel)),
			measure.NewLevel(measure.Load{MaxConcurrency: 32}, summary(perLevel-1, 3000), records(rng, perLevel)),
		},
		GPU: []gpu.Sample{
			{Time: gpuT0, GPU: 0, PowerW: 350.5, MemUsed: 70 << 30, UtilGPU: 97, SMClockMHz: 1980, EnergyMilliJ: 9_000_000},
			{Time: gpuT0.Add(time.Second), GPU: 0, PowerW: 690, MemUsed: 71 << 30, UtilGPU: 100, SMClockMHz: 1755, EnergyMilliJ: 9_520_250},
		},
	}
}

func TestOpenSettings(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if len(migrations) != SchemaVersion {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(migrations))
	}
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"user_version", fmt.Sprint(SchemaVersion)},
		{"busy_timeout", fmt.Sprint(busyTimeout.Milliseconds())},
	}
	for _, tt := range tests {
		t.Run(tt.pragma, func(t *testing.T) {
			var got string
			if err := s.db.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("%s = %s, want %s", tt.pragma, got, tt.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty path: %v", err)
	}
	dir := t.TempDir()
	if _, err := Open(ctx, filepath.Join(dir, "no", "such", "dir", "x.db")); err == nil {
		t.Error("missing directory: no error")
	}
	notDB := filepath.Join(dir, "text.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, notDB); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("not a database: %v, want ErrNotDatabase", err)
	}
	if _, err := OpenReadOnly(ctx, notDB); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("not a database, read-only: %v, want ErrNotDatabase", err)
	}
}

func TestOpenPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range []string{"relative.db", "with space.db", "odd?name#1%.db", filepath.Join(dir, "abs.db")} {
		t.Run(name, func(t *testing.T) {
			s, err := Open(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if _, err := os.Stat(name); err != nil {
				t.Errorf("database not at %q: %v", name, err)
			}
		})
	}
}

func TestMigrateOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := open(ctx, path, migrations[:1]) // a file as version 1 wrote it
	if err != nil {
		t.Fatal(err)
	}
	// Rows as version 1 wrote them: a study, a trial and a rate load point
	// without the load column (schema 3), whose load is rebuilt on read.
	for _, q := range []string{
		`INSERT INTO studies (id, name, spec, seed, started, status) VALUES (1, 'kept', 'name: kept', 3, '2026-01-01T00:00:00.000000000Z', 'finished')`,
		`INSERT INTO trials (id, study_id, number, settings, gpus, status, started) VALUES (1, 1, 0, '{}', '[]', 'ok', '2026-01-01T00:00:00.000000000Z')`,
		`INSERT INTO load_points (trial_id, level, kind, value, summary, completed, failed) VALUES (1, 'rate=4', 'rate', 4, '{"max_concurrency": 16}', 1, 0)`,
	} {
		if _, err := old.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version, indexes int
	s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'trials_by_status'").Scan(&indexes)
	if version != SchemaVersion || indexes != 1 {
		t.Errorf("after migration: version %d, trials_by_status indexes %d", version, indexes)
	}
	if st, err := s.GetStudy(ctx, "kept"); err != nil || st.Seed != 3 {
		t.Errorf("study after migration: %+v, %v", st, err)
	}
	trials, err := s.Trials(ctx, 1)
	if err != nil || len(trials) != 1 || len(trials[0].LoadPoints) != 1 {
		t.Fatalf("trials after migration: %+v, %v", trials, err)
	}
	if n, err := s.TrialCount(ctx, 1); err != nil || n != len(trials) {
		t.Errorf("trial count %d, %v; %d trials read", n, err, len(trials))
	}
	if l := trials[0].LoadPoints[0].Load; l != (measure.Load{Rate: 4, MaxConcurrency: 16}) {
		t.Errorf("legacy load rebuilt as %+v", l)
	}
	// Opening again is a no-op.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// TestReadOlderFile: the read commands' OpenReadOnly reads a file of an
// older schema from an upgraded temporary copy: the file itself keeps its
// version (an older servetune may be writing it), and the copy is gone
// after Close.
func TestReadOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := open(ctx, path, migrations[:5])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO studies (id, name, spec, seed, started, status) VALUES (1, 'kept', 'name: kept', 3, '2026-01-01T00:00:00.000000000Z', 'finished')`,
		`INSERT INTO trials (id, study_id, number, settings, gpus, status, started) VALUES (1, 1, 0, '{"max_running_requests": 8}', '[0]', 'ok', '2026-01-01T00:00:00.000000000Z')`,
	} {
		if _, err := old.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	s, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly of a schema 5 file: %v", err)
	}
	st, err := s.GetStudy(ctx, "kept")
	trials, terr := s.Trials(ctx, st.ID)
	if err != nil || terr != nil || len(trials) != 1 || trials[0].Settings["max_running_requests"] != float64(8) {
		t.Errorf("read back: %+v %v; %+v %v", st, err, trials, terr)
	}
	if err := s.FinishStudy(ctx, st.ID, StudyFailed); !errors.Is(err, ErrReadOnly) {
		t.Errorf("a write to the copy: %v, want ErrReadOnly", err)
	}
	cp := s.copy
	s.Close()
	if _, err := os.Stat(cp); !os.IsNotExist(err) {
		t.Errorf("the upgraded copy %s is left: %v", cp, err)
	}
	raw, err := open(ctx, path, migrations[:5])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var version int
	raw.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	if version != 5 {
		t.Errorf("the file was changed to version %d", version)
	}
}

func TestRefuseNewerFile(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("got %v, want ErrNewerSchema", err)
	}
	want := fmt.Sprintf("store: open %s: database was written by a newer servetune: schema version %d, this build knows up to %d; upgrade servetune", path, SchemaVersion+5, SchemaVersion)
	if err.Error() != want {
		t.Errorf("\n got %s\nwant %s", err, want)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	started := time.Date(2026, 12, 2, 13, 0, 0, 123456789, time.UTC)
	st, err := s.CreateStudy(ctx, Study{Name: "llama", Spec: "name: llama\n", Seed: math.MaxUint64 - 1, Started: started, Tool: "servetune v1.2"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetStudy(ctx, "llama"); err != nil || got.Tool != "servetune v1.2" {
		t.Errorf("tool read back as %q, %v", got.Tool, err)
	}
	if st.ID == 0 || st.Status != StudyRunning {
		t.Fatalf("created %+v", st)
	}
	got, err := s.GetStudy(ctx, "llama")
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("GetStudy = %+v, %v; want %+v", got, err, st)
	}
	if _, err := s.CreateStudy(ctx, Study{Name: "llama"}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate name: %v", err)
	}
	if _, err := s.GetStudy(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing study: %v", err)
	}

	if n, _ := s.NextTrialNumber(ctx, st.ID); n != 0 {
		t.Errorf("first trial number %d", n)
	}
	settings := engine.Settings{"tensor_parallel": 2, "gpu_memory_fraction": 0.9, "quantization": "fp8", "prefix_caching": true}
	if err := s.StartTrial(ctx, st.ID, 0, settings, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartTrial(ctx, st.ID, 0, settings, []int{0, 1}); !errors.Is(err, ErrExists) {
		t.Errorf("second start: %v", err)
	}
	res := result(st.ID, 0, 257) // two full batches and single rows
	if err := s.FinishTrial(ctx, res); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTrial(ctx, res); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second finish: %v", err)
	}
	if n, _ := s.NextTrialNumber(ctx, st.ID); n != 1 {
		t.Errorf("next trial number %d", n)
	}

	trials, err := s.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 1 {
		t.Fatalf("%d trials", len(trials))
	}
	tr := trials[0]
	if tr.Number != 0 || tr.Status != measure.StatusOK || tr.Failure != "" || *tr.Objective != 1234.5 || !reflect.DeepEqual(tr.GPUs, []int{0, 1}) {
		t.Errorf("trial %+v", tr)
	}
	if tp, _ := tr.Settings.Int("tensor_parallel"); tp != 2 {
		t.Errorf("settings %v", tr.Settings)
	}
	if f, _ := tr.Settings.Float("gpu_memory_fraction"); f != 0.9 {
		t.Errorf("settings %v", tr.Settings)
	}
	if tr.Started.IsZero() || tr.Finished.Before(tr.Started) {
		t.Errorf("times %v %v", tr.Started, tr.Finished)
	}
	if len(tr.LoadPoints) != 2 || tr.LoadPoints[0].Label != "concurrency=8" || tr.LoadPoints[1].Value != 32 {
		t.Fatalf("load points %+v", tr.LoadPoints)
	}
	lp := tr.LoadPoints[1].Summary
	want := res.LoadPoints[1].Summary
	if lp.OutputThroughput != want.OutputThroughput || lp.TTFT.P99 != 180.25 || lp.TTFT.MedianCI != want.TTFT.MedianCI || lp.Errors["http_5xx"] != 1 {
		t.Errorf("summary %+v", lp)
	}
	var p99itl sql.NullFloat64
	s.db.QueryRowContext(ctx, "SELECT p99_itl_ms FROM load_points LIMIT 1").Scan(&p99itl)
	if p99itl.Valid {
		t.Errorf("NaN p99_itl_ms stored as %v, want NULL", p99itl.Float64)
	}

	reqs, err := s.Requests(ctx, tr.ID, "concurrency=32")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reqs, res.LoadPoints[1].Records) {
		t.Errorf("requests differ: got %d, first %+v want %+v", len(reqs), reqs[0], res.LoadPoints[1].Records[0])
	}
	samples, err := s.GPUSamples(ctx, tr.ID)
	if err != nil || !sameGPU(samples, res.GPU) {
		t.Errorf("gpu samples %+v, %v", samples, err)
	}
	// A metric the GPU does not report is NULL in the file and zero, as
	// NVML leaves it (gpu.Sample), on reading.
	if err := s.StartTrial(ctx, st.ID, 1, settings, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTrial(ctx, TrialResult{StudyID: st.ID, Number: 1, Status: measure.StatusOK,
		GPU: []gpu.Sample{{GPU: 0, PowerW: math.NaN(), UtilGPU: 50}}}); err != nil {
		t.Fatal(err)
	}
	if tr1, err := s.Trial(ctx, st.ID, 1); err != nil {
		t.Fatal(err)
	} else if g, err := s.GPUSamples(ctx, tr1.ID); err != nil || len(g) != 1 || g[0].PowerW != 0 || g[0].EnergyMilliJ != 0 || g[0].TempC != 0 || g[0].UtilGPU != 50 {
		t.Errorf("NaN sample read back as %+v, %v", g, err)
	}
	if one, err := s.Trial(ctx, st.ID, 0); err != nil || one.ID != tr.ID {
		t.Errorf("Trial = %+v, %v", one, err)
	}
	if _, err := s.Trial(ctx, st.ID, 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("Trial 9: %v", err)
	}

	if err := s.FinishStudy(ctx, st.ID, StudyFinished); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListStudies(ctx)
	if err != nil || len(list) != 1 || list[0].Status != StudyFinished || list[0].Finished.IsZero() {
		t.Errorf("ListStudies = %+v, %v", list, err)
	}
	if err := s.FinishStudy(ctx, st.ID, "done"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad status: %v", err)
	}
	if err := s.FinishStudy(ctx, 999, StudyFinished); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing study: %v", err)
	}
}

func TestForeignKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	err := s.StartTrial(ctx, 42, 0, engine.Settings{}, nil)
	if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
		t.Fatalf("trial of a missing study: %v", err)
	}
	st, _ := s.CreateStudy(ctx, Study{Name: "fk"})
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTrial(ctx, result(st.ID, 0, 3)); err != nil {
		t.Fatal(err)
	}
	// Deleting a study removes its trials and every row below them.
	if _, err := s.db.ExecContext(ctx, "DELETE FROM studies WHERE id = ?", st.ID); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"trials", "load_points", "requests", "gpu_samples"} {
		if n := count(t, s, table); n != 0 {
			t.Errorf("%s keeps %d rows", table, n)
		}
	}
}

func TestFinishTrialValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, _ := s.CreateStudy(ctx, Study{Name: "v"})
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*TrialResult)
		want error
	}{
		{"running is not an outcome", func(r *TrialResult) { r.Status = measure.StatusRunning }, ErrInvalid},
		{"unknown status", func(r *TrialResult) { r.Status = "great" }, ErrInvalid},
		{"unknown failure", func(r *TrialResult) { r.Status, r.Failure = measure.StatusFailed, "segfault" }, ErrInvalid},
		{"load point without level", func(r *TrialResult) { r.LoadPoints[0].Label = "" }, ErrInvalid},
		// time_scale 1e308 overflowed a throughput: the write failed half-way,
		// leaving the trial interrupted and the study failed.
		{"+Inf figure", func(r *TrialResult) { r.LoadPoints[0].Summary.OutputThroughput = math.Inf(1) }, ErrInvalid},
		{"trial never started", func(r *TrialResult) { r.Number = 4 }, ErrNotRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := result(st.ID, 0, 3)
			tt.edit(&r)
			if err := s.FinishTrial(ctx, r); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	for i, class := range []engine.Failure{engine.FailCrash, engine.FailNotReady, engine.FailLaunchError, engine.FailBenchError, engine.FailInfeasible} {
		if err := s.StartTrial(ctx, st.ID, i+1, engine.Settings{}, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTrial(ctx, TrialResult{StudyID: st.ID, Number: i + 1, Status: measure.StatusFailed, Failure: class}); err != nil {
			t.Errorf("failure class %s: %v", class, err)
		}
	}
	failed := TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusFailed, Failure: engine.FailOOM,
		FailureMsg: "No available memory for the cache blocks.", LogTail: "torch.OutOfMemoryError"}
	if err := s.FinishTrial(ctx, failed); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Trial(ctx, st.ID, 0)
	if err != nil || tr.Failure != engine.FailOOM || tr.Objective != nil || tr.FailureMsg != failed.FailureMsg {
		t.Errorf("failed trial %+v, %v", tr, err)
	}
}

// count returns the number of rows of a table.
func count(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFinishTrialIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, _ := s.CreateStudy(ctx, Study{Name: "tx"})
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{"tensor_parallel": 1}, []int{0}); err != nil {
		t.Fatal(err)
	}
	// The second load point repeats the first one's level: its insert, the
	// last of the transaction, fails after the requests and samples went in.
	r := result(st.ID, 0, 500)
	r.LoadPoints[1].Label = r.LoadPoints[0].Label
	err := s.FinishTrial(ctx, r)
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed") {
		t.Fatalf("got %v, want a unique constraint error", err)
	}
	for _, table := range []string{"requests", "gpu_samples", "load_points"} {
		if n := count(t, s, table); n != 0 {
			t.Errorf("%s has %d rows after the rollback", table, n)
		}
	}
	tr, err := s.Trial(ctx, st.ID, 0)
	if err != nil || tr.Status != measure.StatusRunning || !tr.Finished.IsZero() {
		t.Errorf("trial after rollback %+v, %v", tr, err)
	}
	// A cancelled context rolls back as well.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.FinishTrial(cctx, result(st.ID, 0, 500)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if n := count(t, s, "requests"); n != 0 {
		t.Errorf("requests after cancel: %d", n)
	}
	// The retry commits everything.
	if err := s.FinishTrial(ctx, result(st.ID, 0, 500)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "requests"); n != 1000 {
		t.Errorf("requests = %d, want 1000", n)
	}
}

func TestInterruptAndRerun(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, _ := s.CreateStudy(ctx, Study{Name: "resume"})
	other, _ := s.CreateStudy(ctx, Study{Name: "other"})
	for n := range 4 {
		if err := s.StartTrial(ctx, st.ID, n, engine.Settings{"block_size": 16}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartTrial(ctx, other.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTrial(ctx, result(st.ID, 1, 2)); err != nil {
		t.Fatal(err)
	}
	got, err := s.InterruptRunning(ctx, st.ID)
	if err != nil || !reflect.DeepEqual(got, []int{0, 2, 3}) {
		t.Fatalf("InterruptRunning = %v, %v", got, err)
	}
	if again, _ := s.InterruptRunning(ctx, st.ID); len(again) != 0 {
		t.Errorf("second InterruptRunning = %v", again)
	}
	if tr, _ := s.Trial(ctx, other.ID, 0); tr.Status != measure.StatusRunning {
		t.Errorf("other study's trial is %s", tr.Status)
	}
	// An interrupted trial is re-run in place; a finished one is not.
	if err := s.StartTrial(ctx, st.ID, 2, engine.Settings{"block_size": 32}, []int{3}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartTrial(ctx, st.ID, 1, engine.Settings{}, nil); !errors.Is(err, ErrExists) {
		t.Errorf("restart of a finished trial: %v", err)
	}
	tr, _ := s.Trial(ctx, st.ID, 2)
	if bs, _ := tr.Settings.Int("block_size"); tr.Status != measure.StatusRunning || bs != 32 || !tr.Finished.IsZero() || tr.Reruns != 1 {
		t.Errorf("re-run trial %+v", tr)
	}
	if tr, _ := s.Trial(ctx, st.ID, 1); tr.Reruns != 0 {
		t.Errorf("trial run once counts %d re-runs", tr.Reruns)
	}
	if _, err := s.ResumeStudy(ctx, "resume"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResumeStudy(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("resume missing: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	// A second handle on the same file is a second connection pool: its
	// writes contend for SQLite's lock, not only for the Store's mutex.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st, _ := s.CreateStudy(ctx, Study{Name: "parallel"})
	const perWriter = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*perWriter)
	for w, store := range []*Store{s, s2} {
		wg.Go(func() {
			for i := range perWriter {
				n := w*perWriter + i
				if err := store.StartTrial(ctx, st.ID, n, engine.Settings{"tensor_parallel": 1}, []int{w}); err != nil {
					errs <- err
					return
				}
				if err := store.FinishTrial(ctx, result(st.ID, n, 200)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	trials, err := s.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 2*perWriter {
		t.Fatalf("%d trials", len(trials))
	}
	for _, tr := range trials {
		if tr.Status != measure.StatusOK || len(tr.LoadPoints) != 2 {
			t.Errorf("trial %d: %s with %d load points", tr.Number, tr.Status, len(tr.LoadPoints))
		}
	}
	if n := count(t, s, "requests"); n != 2*perWriter*400 {
		t.Errorf("requests = %d", n)
	}
}

func TestReadWhileAnotherProcessWrites(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	st, _ := s.CreateStudy(ctx, Study{Name: "busy"})
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	writer, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	tx, err := writer.db.BeginTx(ctx, nil) // holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE trials SET log_tail = 'x'"); err != nil {
		t.Fatal(err)
	}
	// Readers see the last commit at once instead of waiting for the lock.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	begin := time.Now()
	trials, err := s.Trials(rctx, st.ID)
	if err != nil || len(trials) != 1 || trials[0].LogTail != "" {
		t.Fatalf("Trials during a write = %+v, %v", trials, err)
	}
	if _, err := s.ListStudies(rctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Requests(rctx, trials[0].ID, "concurrency=8"); err != nil {
		t.Fatal(err)
	}
	t.Logf("reads took %v while another connection held the write lock", time.Since(begin))
}

func TestNoSecretsWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"hf_AbCdEfGhIjKlMnOpQrStUv", "sk-proj-0123456789abcdefXYZ", "s3cr3tPa55"}
	st, err := s.CreateStudy(ctx, Study{Name: "leaky", Spec: "launcher:\n  env: {HF_TOKEN: hf_AbCdEfGhIjKlMnOpQrStUv}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	r := result(st.ID, 0, 2)
	r.Status, r.Failure = measure.StatusFailed, engine.FailCrash
	r.FailureMsg = "401 from upstream: Authorization: Bearer sk-proj-0123456789abcdefXYZ"
	r.LogTail = "engine args: api_key=s3cr3tPa55 model=x\nloading with token hf_AbCdEfGhIjKlMnOpQrStUv\n"
	r.LoadPoints[0].Summary.Meta = map[string]any{"api_key": "s3cr3tPa55", "endpoint": "http://127.0.0.1:8000", "note": "hf_AbCdEfGhIjKlMnOpQrStUv"}
	if err := s.FinishTrial(ctx, r); err != nil {
		t.Fatal(err)
	}
	tr, _ := s.Trial(ctx, st.ID, 0)
	if !strings.Contains(tr.LogTail, "api_key="+redact.Redacted) || !strings.Contains(tr.FailureMsg, "Bearer "+redact.Redacted) {
		t.Errorf("redaction: %q / %q", tr.LogTail, tr.FailureMsg)
	}
	if meta := tr.LoadPoints[0].Summary.Meta; meta["endpoint"] != "http://127.0.0.1:8000" || meta["api_key"] != nil {
		t.Errorf("meta %v", meta)
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "s.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range secrets {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds %q", filepath.Base(f), secret)
			}
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"HF_TOKEN=hf_abcdefghijklmnopqrstu", "HF_TOKEN=" + redact.Redacted},
		{"using hf_abcdefghijklmnopqrstu now", "using " + redact.Redacted + " now"},
		{"Authorization: Bearer abc.def-ghi", "Authorization: Bearer " + redact.Redacted},
		{`{"api_key": "xyz123"}`, `{"api_key": "` + redact.Redacted + `"}`},
		{"password: hunter2", "password: " + redact.Redacted},
		{"api_key: ${OPENAI_API_KEY}", "api_key: ${OPENAI_API_KEY}"},
		{"hf_token: $HF_TOKEN", "hf_token: $HF_TOKEN"},
		{"OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv", "OPENAI_API_KEY=" + redact.Redacted},
		{"max_batched_tokens: 8192", "max_batched_tokens: 8192"},
		{"total_tokens=512 prompt_tokens: 12", "total_tokens=512 prompt_tokens: 12"},
		{"CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA out of memory. Tried to allocate 2.00 GiB"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// BenchmarkFinishTrial10k stores one trial with 10,000 request records (two
// levels of 5,000) in one transaction.
func BenchmarkFinishTrial10k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	st, err := s.CreateStudy(ctx, Study{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		r := result(st.ID, n, 5000)
		if err := s.StartTrial(ctx, st.ID, n, engine.Settings{"tensor_parallel": 1}, []int{0}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.FinishTrial(ctx, r); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/request")
}

// A trial stopped by an interrupt keeps the levels it measured, marked
// interrupted; its re-run starts clean and stores its own levels.
func TestInterruptedTrialKeepsLevelsUntilRerun(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, _ := s.CreateStudy(ctx, Study{Name: "keep"})
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	part := result(st.ID, 0, 3)
	part.Status, part.Objective = measure.StatusInterrupted, nil
	if err := s.FinishTrial(ctx, part); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Trial(ctx, st.ID, 0)
	if err != nil || tr.Status != measure.StatusInterrupted || len(tr.LoadPoints) != len(part.LoadPoints) {
		t.Fatalf("interrupted trial: %+v, %v", tr, err)
	}
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, nil); err != nil {
		t.Fatal(err)
	}
	if tr, _ := s.Trial(ctx, st.ID, 0); len(tr.LoadPoints) != 0 {
		t.Errorf("re-run kept %d load points of the interrupted run", len(tr.LoadPoints))
	}
	if recs, _ := s.Requests(ctx, tr.ID, part.LoadPoints[0].Label); len(recs) != 0 {
		t.Errorf("re-run kept %d requests of the interrupted run", len(recs))
	}
	if err := s.FinishTrial(ctx, result(st.ID, 0, 3)); err != nil {
		t.Fatalf("finish the re-run with the same levels: %v", err)
	}
	if tr, _ := s.Trial(ctx, st.ID, 0); tr.Status != measure.StatusOK || len(tr.LoadPoints) != len(part.LoadPoints) {
		t.Errorf("re-run trial: %+v", tr)
	}
}

// TestMemoryStore: a study runs in a store in memory, trials and load
// points (with the whole load, burstiness included) read back.
func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, stored, err := s.Begin(ctx, Study{Name: "m", Spec: "x", Seed: 1}, BeginOptions{})
	if err != nil || len(stored) != 0 {
		t.Fatalf("Begin: %v, %d trials", err, len(stored))
	}
	if err := run.StartTrial(ctx, 0, engine.Settings{"tensor_parallel": 1}, []int{0}); err != nil {
		t.Fatal(err)
	}
	load := measure.Load{Rate: 4, Burstiness: 0.5, MaxConcurrency: 16}
	res := TrialResult{Number: 0, Status: measure.StatusOK, LoadPoints: []measure.Level{measure.NewLevel(load, summary(9, 100), nil)}}
	if err := run.FinishTrial(ctx, res); err != nil {
		t.Fatal(err)
	}
	if err := run.End(ctx, StudyFinished); err != nil {
		t.Fatal(err)
	}
	trials, err := run.Trials(ctx)
	if err != nil || len(trials) != 1 || len(trials[0].LoadPoints) != 1 {
		t.Fatalf("trials %+v, %v", trials, err)
	}
	if got := trials[0].LoadPoints[0]; got.Load != load || got.Label != "rate=4,concurrency=16" {
		t.Errorf("load point %+v, want load %+v", got, load)
	}
	if _, _, err := s.Begin(ctx, Study{Name: "m2", Spec: "x"}, BeginOptions{Resume: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("resume of a missing study: %v, want ErrNotFound", err)
	}
}

// TestPendingLaunchTimes: a trial's queue and launch times are stored
// apart, unknown ones stay nil, and a re-run of an interrupted trial
// forgets the old ones.
func TestPendingLaunchTimes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, err := s.CreateStudy(ctx, Study{Name: "queued", Spec: "name: queued\n"})
	if err != nil {
		t.Fatal(err)
	}
	pending, launch := 2500*time.Millisecond, 1200*time.Millisecond
	for n, r := range []TrialResult{
		{Number: 0, Status: measure.StatusOK, Pending: &pending, Launch: &launch},
		{Number: 1, Status: measure.StatusOK, Launch: &launch},
		{Number: 2, Status: measure.StatusInterrupted, Pending: &pending},
	} {
		if err := s.StartTrial(ctx, st.ID, n, engine.Settings{}, nil); err != nil {
			t.Fatal(err)
		}
		r.StudyID = st.ID
		if err := s.FinishTrial(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartTrial(ctx, st.ID, 2, engine.Settings{}, nil); err != nil { // the re-run
		t.Fatal(err)
	}
	trials, err := s.Trials(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	d := func(p *time.Duration) string {
		if p == nil {
			return "nil"
		}
		return p.String()
	}
	got := fmt.Sprintf("%s/%s %s/%s %s/%s", d(trials[0].Pending), d(trials[0].Launch), d(trials[1].Pending), d(trials[1].Launch), d(trials[2].Pending), d(trials[2].Launch))
	if want := "2.5s/1.2s nil/1.2s nil/nil"; got != want {
		t.Errorf("pending/launch %s, want %s", got, want)
	}
}

// TestEngineMetricsGPUAndQualityRoundTrip: what the engine reported during
// a level, the level's GPU usage, the samples' temperature and the trial's
// quality verdict are read back as they were stored, and a study's
// quality baseline too.
func TestEngineMetricsGPUAndQualityRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	st, err := s.CreateStudy(ctx, Study{Name: "q", Spec: "name: q\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{"quantization": "fp8"}, []int{0}); err != nil {
		t.Fatal(err)
	}
	res := result(st.ID, 0, 10)
	hit := 0.25
	em := &measure.EngineMetrics{Engine: "vllm", Source: "scrape", Samples: 12, IntervalS: 0.5,
		NumRequestsRunningPeak: 8, NumRequestsRunningMean: 7.5, NumRequestsWaitingPeak: 40, NumRequestsWaitingMean: 31.2,
		WaitingShare: 0.9, NumRequestsRunningWhenWaiting: 8, KVCacheUsagePeak: 0.021, KVCacheUsageMean: 0.017,
		Preemptions: 3, PrefixCacheHitRate: &hit, PromptTokens: 1e5, GenerationTokens: 1e4,
		TTFT:      &measure.ServerLatency{Count: 100, MeanMs: 812.5, P50Ms: 700, P90Ms: 1500, P99Ms: 2400},
		QueueTime: &measure.ServerLatency{Count: 100, MeanMs: 650, P50Ms: 600, P90Ms: 1200, P99Ms: 2000},
		Missing:   []string{"server_itl"}}
	gu := &measure.GPUUsage{GPUs: 1, Samples: 20, EnergyJ: 5400, OutputTokensPerJoule: 3.7, MeanPowerW: 540, PeakPowerW: 690,
		MeanUtilPct: 93, PeakMemUsedBytes: 71 << 30, MeanSMClockMHz: 1900, PeakTempC: 71}
	res.LoadPoints[1].Summary.Engine, res.LoadPoints[1].Summary.GPU = em, gu
	res.GPU[1].TempC = 71
	q := &measure.Quality{Scored: true, Pass: false, Items: 400, AccuracyPct: 88.5, BaselineAccuracyPct: 99.25, DropPct: 10.75,
		MaxDropPct: 1, AgreementPct: 87, Errors: 2, ByKindPct: map[string]float64{"arithmetic": 80, "copy": 100}}
	res.Status, res.Failure, res.FailureMsg, res.Objective, res.Quality = measure.StatusFailed, engine.FailQuality, q.String(), nil, q
	if err := s.FinishTrial(ctx, res); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Trial(ctx, st.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.LoadPoints[1].Summary; !reflect.DeepEqual(got.Engine, em) || !reflect.DeepEqual(got.GPU, gu) {
		t.Errorf("engine metrics %+v\ngpu %+v", got.Engine, got.GPU)
	}
	if tr.LoadPoints[0].Summary.Engine != nil {
		t.Errorf("a level without engine metrics read back with %+v", tr.LoadPoints[0].Summary.Engine)
	}
	if !reflect.DeepEqual(tr.Quality, q) || tr.Failure != engine.FailQuality || tr.Status != measure.StatusFailed {
		t.Errorf("quality %+v, %s/%s", tr.Quality, tr.Status, tr.Failure)
	}
	samples, err := s.GPUSamples(ctx, tr.ID)
	if err != nil || samples[1].TempC != 71 {
		t.Errorf("samples %+v, %v", samples, err)
	}
	run, _, err := s.Begin(ctx, Study{Name: "q"}, BeginOptions{Resume: true, Check: func(Study) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.SetQualityBaseline(ctx, `{"accuracy_pct":99.25}`); err != nil {
		t.Fatal(err)
	}
	run.End(ctx, StudyFinished)
	if got, _ := s.GetStudy(ctx, "q"); got.QualityBaseline != `{"accuracy_pct":99.25}` {
		t.Errorf("quality baseline %q", got.QualityBaseline)
	}
}

// TestGPUEnergyUnknown: a sample whose energy counter was not read (NVML
// leaves it zero) stores unknown energy and reads back zero again, and
// never turns into the difference of an unsigned wrap-around or into the
// counter since the driver loaded; the others read back as a counter
// whose differences are the energy.
func TestGPUEnergyUnknown(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	st, err := s.CreateStudy(ctx, Study{Name: "g", Spec: "x", Status: StudyRunning})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartTrial(ctx, st.ID, 0, engine.Settings{}, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := s.FinishTrial(ctx, TrialResult{StudyID: st.ID, Number: 0, Status: measure.StatusOK, GPU: []gpu.Sample{
		{Time: t0, GPU: 0, PowerW: 100},                                           // energy not read
		{Time: t0.Add(time.Second), GPU: 0, PowerW: 200, EnergyMilliJ: 5_000_000}, // first reading
		{Time: t0.Add(2 * time.Second), GPU: 0, PowerW: 300, EnergyMilliJ: 5_300_000},
		{Time: t0.Add(3 * time.Second), GPU: 0, PowerW: 300}, // read failed
		{Time: t0, GPU: 1, PowerW: 100, EnergyMilliJ: 1_000},
		{Time: t0.Add(time.Second), GPU: 1, PowerW: 100}, // read failed
	}}); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Trial(ctx, st.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GPUSamples(ctx, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	var e []string
	for _, g := range got {
		e = append(e, fmt.Sprint(g.EnergyMilliJ))
	}
	if s := strings.Join(e, " "); s != "0 1 300001 0 1 0" {
		t.Errorf("energy counters %s, want 0 1 300001 0 1 0", s)
	}
	if j := gpu.EnergyJoules(got); j != 300 {
		t.Errorf("energy %v J, want 300", j)
	}
}

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
	"github.com/servetune/servetune/internal/load/gpu"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/redact"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Store is an open servetune database. Its methods are safe for concurrent
// use; writes from one process are serialized, and other processes wait up
// to the busy timeout for the write lock.
type Store struct {
	db       *sql.DB
	mu       sync.Mutex // serializes write transactions of this process
	readOnly bool       // OpenReadOnly: every write is ErrReadOnly
	// copy is the temporary, upgraded copy an older file is read from
	// (OpenReadOnly), removed by Close; "" otherwise.
	copy string
}

// Errors callers test with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrNewerSchema  = errors.New("database was written by a newer servetune")
	ErrOldSchema    = errors.New("database was written by an older servetune")
	ErrReadOnly     = errors.New("database opened read-only")
	ErrInvalid      = errors.New("invalid value")
	ErrNotRunning   = errors.New("trial is not running")
	ErrNotDatabase  = errors.New("file is not a servetune database")
	errSchemaBroken = errors.New("database schema is inconsistent")
)

// busyTimeout is how long a write waits for another process's write lock.
const busyTimeout = 10 * time.Second

// timeFormat stores instants as fixed-width UTC text: readable in the sqlite3
// shell and ordered as strings.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

// Memory is the path of a database that lives in this process's memory
// only: for studies nobody reads back (virtual what-if searches, dry runs).
const Memory = ":memory:"

// Open opens or creates the database at path (Memory for one in memory)
// and migrates it to SchemaVersion. A database from a newer servetune is
// refused with ErrNewerSchema rather than half-understood.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, migrations)
}

func open(ctx context.Context, path string, steps []string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("store: %w: empty database path", ErrInvalid)
	}
	if path != Memory {
		// A new file is the user's alone; SQLite gives its -wal and -shm
		// files the database file's mode.
		if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		}
	}
	// _txlock=immediate takes the write lock at BEGIN, so two writers never
	// deadlock upgrading read locks; the busy timeout makes the second wait.
	// synchronous=NORMAL in WAL mode loses nothing committed when the process
	// is killed; a power cut may drop the last commits but never corrupts.
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_foreign_keys=on&_busy_timeout=%d&_txlock=immediate&_synchronous=NORMAL",
		(&url.URL{Path: path}).EscapedPath(), busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if path == Memory {
		// Each connection of SQLite's memory database is a database of its
		// own: one connection keeps one database.
		db.SetMaxOpenConns(1)
	}
	s := &Store{db: db}
	if err := s.migrate(ctx, steps); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, notDatabase(err))
	}
	return s, nil
}

// OpenReadOnly opens an existing database for reading only, for the
// commands that only read (studies, trials, pareto, recommend, report): it
// creates nothing, migrates nothing and works on a read-only mount or in a
// directory it may not write. A database of an older schema is refused
// from an upgraded copy (the file itself is never changed: an older
// servetune may still be writing it).
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	u := (&url.URL{Path: path}).EscapedPath()
	var lastErr error
	// mode=ro first: it sees what a live writer commits. Where SQLite cannot
	// even create the WAL index it needs for that (a read-only directory or
	// mount), immutable=1 reads the file as it is, taking no lock.
	for _, q := range []string{"mode=ro", "mode=ro&immutable=1"} {
		dsn := fmt.Sprintf("file:%s?%s&_foreign_keys=on&_busy_timeout=%d", u, q, busyTimeout.Milliseconds())
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
		var version int
		if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
			db.Close()
			lastErr = err
			continue
		}
		switch {
		case version > SchemaVersion:
			db.Close()
			return nil, fmt.Errorf("store: open %s: %w: schema version %d, this build knows up to %d; upgrade servetune", path, ErrNewerSchema, version, SchemaVersion)
		case version < SchemaVersion:
			s, err := upgradedCopy(ctx, db)
			db.Close()
			if err != nil {
				return nil, fmt.Errorf("store: open %s: %w: schema version %d, this build reads %d, and a copy to upgrade could not be made (%v); servetune tune --resume upgrades the file itself", path, ErrOldSchema, version, SchemaVersion, err)
			}
			return s, nil
		}
		return &Store{db: db, readOnly: true}, nil
	}
	return nil, fmt.Errorf("store: open %s read-only: %w", path, notDatabase(lastErr))
}

// notDatabase marks SQLite's "file is not a database" (SQLITE_NOTADB's
// message; matched as text so that a build without cgo, whose driver is a
// stub, still compiles) with ErrNotDatabase, which callers read as bad
// input (a wrong --db), not a failure.
func notDatabase(err error) error {
	if err != nil && strings.Contains(err.Error(), "file is not a database") {
		return fmt.Errorf("%w (%w)", ErrNotDatabase, err)
	}
	return err
}

// upgradedCopy copies the database src reads (a consistent snapshot, VACUUM
// INTO) to a temporary file, migrates the copy and opens it read-only;
// Close removes it. It costs the file's size in the temporary directory.
func upgradedCopy(ctx context.Context, src *sql.DB) (*Store, error) {
	f, err := os.CreateTemp("", "servetune-upgrade-*.db")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	f.Close()
	remove := func() {
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
			os.Remove(p)
		}
	}
	if _, err := src.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		remove()
		return nil, err
	}
	s, err := Open(ctx, tmp)
	if err != nil {
		remove()
		return nil, err
	}
	s.readOnly, s.copy = true, tmp
	return s, nil
}

// migrate applies the pending steps, each with its version bump in one transaction.
func (s *Store) migrate(ctx context.Context, steps []string) error {
	var version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > len(steps) {
		return fmt.Errorf("%w: schema version %d, this build knows up to %d; upgrade servetune", ErrNewerSchema, version, len(steps))
	}
	for v := version; v < len(steps); v++ {
		err := s.write(ctx, func(tx *sql.Tx) error {
			// Re-read under the write lock: another process may have migrated.
			var cur int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
				return err
			}
			if cur != v {
				return nil
			}
			if _, err := tx.ExecContext(ctx, steps[v]); err != nil {
				return fmt.Errorf("migration %d: %w", v+1, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// write runs fn in one write transaction, committed when fn returns nil.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error {
	if s == nil || s.db == nil {
		return nil
	}
	err := s.db.Close()
	if s.copy != "" {
		for _, p := range []string{s.copy, s.copy + "-wal", s.copy + "-shm"} {
			os.Remove(p)
		}
	}
	return err
}

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(v sql.NullString) (time.Time, error) {
	if !v.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeFormat, v.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: time %q", errSchemaBroken, v.String)
	}
	return t, nil
}

// nullFloat stores NaN and infinities (a metric with no samples) as NULL.
func nullFloat(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}

// CreateStudy stores a new study and returns it with its ID, start time
// (now when zero) and status running. A taken name gives ErrExists: resume
// with ResumeStudy instead. Token-like strings in the spec are redacted.
func (s *Store) CreateStudy(ctx context.Context, st Study) (Study, error) {
	if st.Name == "" {
		return Study{}, fmt.Errorf("store: create study: %w: empty name", ErrInvalid)
	}
	if st.Started.IsZero() {
		st.Started = time.Now()
	}
	st.Started = st.Started.UTC().Truncate(time.Nanosecond)
	st.Spec = RedactSpec(st.Spec)
	st.Status = StudyRunning
	st.Finished = time.Time{}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO studies (name, spec, seed, started, status, model_config, tool) VALUES (?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (name) DO NOTHING`,
			st.Name, st.Spec, int64(st.Seed), formatTime(st.Started), st.Status, st.ModelConfig, st.Tool)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("study %q %w (use --resume to continue it)", st.Name, ErrExists)
		}
		st.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return Study{}, fmt.Errorf("store: create study: %w", err)
	}
	return st, nil
}

const studyColumns = `id, name, spec, seed, started, finished, status, model_config, tool, quality_baseline, stop_reason, stop_at, stop_of`

func scanStudy(row interface{ Scan(...any) error }) (Study, error) {
	var st Study
	var seed int64
	var started, finished sql.NullString
	if err := row.Scan(&st.ID, &st.Name, &st.Spec, &seed, &started, &finished, &st.Status, &st.ModelConfig, &st.Tool, &st.QualityBaseline, &st.Stop.Why, &st.Stop.At, &st.Stop.Of); err != nil {
		return Study{}, err
	}
	st.Seed = uint64(seed)
	var err error
	if st.Started, err = parseTime(started); err != nil {
		return Study{}, err
	}
	if st.Finished, err = parseTime(finished); err != nil {
		return Study{}, err
	}
	return st, nil
}

// GetStudy returns the study with the given name, or ErrNotFound.
func (s *Store) GetStudy(ctx context.Context, name string) (Study, error) {
	st, err := scanStudy(s.db.QueryRowContext(ctx, `SELECT `+studyColumns+` FROM studies WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Study{}, fmt.Errorf("store: study %q %w", name, ErrNotFound)
	}
	if err != nil {
		return Study{}, fmt.Errorf("store: get study %q: %w", name, err)
	}
	return st, nil
}

// ListStudies returns every study, oldest first.
func (s *Store) ListStudies(ctx context.Context) ([]Study, error) {
	var out []Study
	err := collect(ctx, s.db, "list studies", func(rows *sql.Rows) error {
		st, err := scanStudy(rows)
		out = append(out, st)
		return err
	}, `SELECT `+studyColumns+` FROM studies ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collect runs query on q and hands each row to each, which keeps what
// the row holds or passes it over; an error from the query, a row or the
// read is "store: what: ...".
func collect(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, what string, each func(*sql.Rows) error, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// ResumeStudy marks the named study running again and returns it; callers
// then InterruptRunning its leftover trials and carry on.
func (s *Store) ResumeStudy(ctx context.Context, name string) (Study, error) {
	if err := s.updateStudy(ctx, "resume study", strconv.Quote(name),
		`UPDATE studies SET status = ?, finished = NULL WHERE name = ?`, StudyRunning, name); err != nil {
		return Study{}, err
	}
	return s.GetStudy(ctx, name)
}

// FinishStudy marks a study ended now with status StudyFinished, StudyFailed
// or StudyInterrupted.
func (s *Store) FinishStudy(ctx context.Context, studyID int64, status string) error {
	if !slices.Contains([]string{StudyFinished, StudyFailed, StudyInterrupted}, status) {
		return fmt.Errorf("store: finish study: %w: status %q", ErrInvalid, status)
	}
	return s.updateStudy(ctx, "finish study", strconv.FormatInt(studyID, 10),
		`UPDATE studies SET status = ?, finished = ? WHERE id = ?`, status, formatTime(time.Now()), studyID)
}

// updateStudy runs query, an UPDATE of the one study named study (in an
// ErrNotFound error when there is none), as operation op.
func (s *Store) updateStudy(ctx context.Context, op, study, query string, args ...any) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("study %s %w", study, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

// StartTrial commits a running trial row at once, so a study killed during
// the trial leaves evidence that --resume turns into an interrupted trial.
// Starting a number that exists is an ErrExists error, except that an
// interrupted trial may be started again (it is re-run in place).
func (s *Store) StartTrial(ctx context.Context, studyID int64, number int, settings engine.Settings, gpus []int) error {
	return s.startTrial(ctx, nil, studyID, number, nil, settings, gpus)
}

// guard is checked at the start of a write transaction (a run's lease).
type guard func(ctx context.Context, tx *sql.Tx) error

func (s *Store) startTrial(ctx context.Context, check guard, studyID int64, number int, confirms *int, settings engine.Settings, gpus []int) error {
	if number < 0 {
		return fmt.Errorf("store: start trial: %w: number %d", ErrInvalid, number)
	}
	set, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("store: start trial %d: settings: %w", number, err)
	}
	if gpus == nil {
		gpus = []int{}
	}
	g, err := json.Marshal(gpus)
	if err != nil {
		return fmt.Errorf("store: start trial %d: gpus: %w", number, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if check != nil {
			if err := check(ctx, tx); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO trials (study_id, number, settings, gpus, status, started, confirms) VALUES (?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (study_id, number) DO UPDATE SET
			   settings = excluded.settings, gpus = excluded.gpus, status = excluded.status, confirms = excluded.confirms,
			   started = excluded.started, finished = NULL, failure = '', failure_msg = '', log_tail = '', objective = NULL,
			   pending_ns = NULL, launch_ns = NULL, reruns = trials.reruns + 1, quality = ''
			 WHERE trials.status = 'interrupted'`,
			studyID, number, string(set), string(g), measure.StatusRunning, formatTime(time.Now()), confirms)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("trial %d of study %d %w", number, studyID, ErrExists)
		}
		// A re-run replaces whatever the interrupted run had stored.
		for _, table := range []string{"load_points", "requests", "gpu_samples"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+
				` WHERE trial_id = (SELECT id FROM trials WHERE study_id = ? AND number = ?)`, studyID, number); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: start trial: %w", err)
	}
	return nil
}

// validResult checks the fields a CHECK constraint would reject, so the
// message names the problem.
func validResult(r TrialResult) error {
	if !slices.Contains([]measure.Status{measure.StatusOK, measure.StatusFailed, measure.StatusInterrupted}, r.Status) {
		return fmt.Errorf("%w: trial status %q (want ok, failed or interrupted)", ErrInvalid, r.Status)
	}
	if !r.Failure.Valid() {
		return fmt.Errorf("%w: failure class %q", ErrInvalid, r.Failure)
	}
	for _, lp := range r.LoadPoints {
		if lp.Label == "" || lp.Kind == "" {
			return fmt.Errorf("%w: load point needs a level and a kind", ErrInvalid)
		}
		// JSON has no +Inf or NaN: a figure that overflowed would fail
		// the write half-way; refused whole, before it, naming the level.
		if _, err := json.Marshal(lp.Summary); err != nil {
			return fmt.Errorf("%w: load point %s holds a figure that is not a finite number (%v)", ErrInvalid, lp.Label, err)
		}
		if _, err := json.Marshal(lp.Load); err != nil {
			return fmt.Errorf("%w: load point %s: its load is not a finite number (%v)", ErrInvalid, lp.Label, err)
		}
	}
	return nil
}

// FinishTrial stores a trial's outcome in one transaction: the trial row,
// its load points, per-request records and GPU samples all land, or none
// do. The trial must have been started (ErrNotRunning otherwise). Token-like
// strings in the failure message and log tail are redacted.
func (s *Store) FinishTrial(ctx context.Context, r TrialResult) error {
	return s.finishTrial(ctx, nil, r)
}

func (s *Store) finishTrial(ctx context.Context, g guard, r TrialResult) error {
	if err := validResult(r); err != nil {
		return fmt.Errorf("store: finish trial %d: %w", r.Number, err)
	}
	if r.Finished.IsZero() {
		r.Finished = time.Now()
	}
	var objective any
	if r.Objective != nil {
		objective = nullFloat(*r.Objective)
	}
	quality := ""
	if r.Quality != nil {
		b, err := json.Marshal(r.Quality)
		if err != nil {
			return fmt.Errorf("store: finish trial %d: quality: %w", r.Number, err)
		}
		quality = string(b)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if g != nil {
			if err := g(ctx, tx); err != nil {
				return err
			}
		}
		var trialID int64
		var started sql.NullString
		err := tx.QueryRowContext(ctx,
			`UPDATE trials SET status = ?, failure = ?, failure_msg = ?, log_tail = ?, objective = ?, finished = ?,
			   pending_ns = ?, launch_ns = ?, quality = ?
			 WHERE study_id = ? AND number = ? AND status = 'running' RETURNING id, started`,
			r.Status, r.Failure, Redact(r.FailureMsg), Redact(r.LogTail), objective, formatTime(r.Finished),
			nullDuration(r.Pending), nullDuration(r.Launch), quality,
			r.StudyID, r.Number).Scan(&trialID, &started)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("trial %d of study %d: %w", r.Number, r.StudyID, ErrNotRunning)
		}
		if err != nil {
			return err
		}
		if err := insertRequests(ctx, tx, trialID, r.LoadPoints); err != nil {
			return err
		}
		t0, err := parseTime(started)
		if err != nil {
			return err
		}
		if err := insertGPUSamples(ctx, tx, trialID, t0, r.GPU); err != nil {
			return err
		}
		return insertLoadPoints(ctx, tx, trialID, r.LoadPoints)
	})
	if err != nil {
		return fmt.Errorf("store: finish trial %d: %w", r.Number, err)
	}
	return nil
}

// requestBatch is how many request rows one INSERT carries: a multi-row
// statement amortizes database/sql's per-call cost (a third fewer
// allocations than one row per call), and 100 rows × 13 columns stays far
// below SQLite's parameter limit.
const requestBatch = 100

const requestColumns = 13

func insertRequests(ctx context.Context, tx *sql.Tx, trialID int64, levels []measure.Level) error {
	byLevel := map[string][]measure.Record{}
	for _, lv := range levels {
		if len(lv.Records) > 0 {
			byLevel[lv.Label] = lv.Records
		}
	}
	if len(byLevel) == 0 {
		return nil
	}
	const head = `INSERT INTO requests (trial_id, level, idx, warmup, sched_ns, send_ns, first_ns, last_ns, end_ns,
		prompt_tokens, output_tokens, error, http_status) VALUES `
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", requestColumns), ", ") + ")"
	prepare := func(rows int) (*sql.Stmt, error) {
		return tx.PrepareContext(ctx, head+strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "))
	}
	var batch, single *sql.Stmt
	defer func() {
		if batch != nil {
			batch.Close()
		}
		if single != nil {
			single.Close()
		}
	}()
	args := make([]any, 0, requestBatch*requestColumns)
	// Sorted levels keep row order, and so Requests' order, deterministic.
	labels := make([]string, 0, len(byLevel))
	for l := range byLevel {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, level := range labels {
		recs := byLevel[level]
		for len(recs) > 0 {
			n := min(len(recs), requestBatch)
			var stmt **sql.Stmt
			if n == requestBatch {
				stmt = &batch
			} else {
				n, stmt = 1, &single
			}
			if *stmt == nil {
				var err error
				if *stmt, err = prepare(n); err != nil {
					return err
				}
			}
			args = args[:0]
			for _, rec := range recs[:n] {
				args = append(args, trialID, level, rec.Index, rec.Warmup,
					int64(rec.Sched), int64(rec.Send), int64(rec.First), int64(rec.Last), int64(rec.End),
					rec.PromptTokens, rec.OutputTokens, string(rec.Error), rec.Status)
			}
			if _, err := (*stmt).ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("requests %d..%d at %s: %w", recs[0].Index, recs[n-1].Index, level, err)
			}
			recs = recs[n:]
		}
	}
	return nil
}

// insertGPUSamples stores samples as offsets from the trial's start t0,
// energy as joules since the GPU's first counter reading (NULL where
// NVML gave none: a zero counter, or one that went back), and a zero
// temperature as NULL (a reading NVML did not give).
func insertGPUSamples(ctx context.Context, tx *sql.Tx, trialID int64, t0 time.Time, samples []gpu.Sample) error {
	if len(samples) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO gpu_samples
		(trial_id, t_ns, gpu, power_w, mem_used_bytes, util_pct, sm_clock_mhz, energy_j, temp_c) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	first := map[int]uint64{} // each GPU's first energy counter reading
	for _, g := range samples {
		energy := math.NaN()
		if g.EnergyMilliJ != 0 {
			if _, ok := first[g.GPU]; !ok {
				first[g.GPU] = g.EnergyMilliJ
			}
			if g.EnergyMilliJ >= first[g.GPU] {
				energy = float64(g.EnergyMilliJ-first[g.GPU]) / 1000
			}
		}
		temp := math.NaN()
		if g.TempC != 0 {
			temp = float64(g.TempC)
		}
		if _, err := stmt.ExecContext(ctx, trialID, int64(g.Time.Sub(t0)), g.GPU, nullFloat(g.PowerW), int64(g.MemUsed),
			nullFloat(g.UtilGPU), int64(g.SMClockMHz), nullFloat(energy), nullFloat(temp)); err != nil {
			return fmt.Errorf("gpu sample: %w", err)
		}
	}
	return nil
}

func insertLoadPoints(ctx context.Context, tx *sql.Tx, trialID int64, points []measure.Level) error {
	for _, lp := range points {
		sum := lp.Summary
		sum.Meta = redact.Meta(sum.Meta)
		js, err := json.Marshal(sum)
		if err != nil {
			return fmt.Errorf("load point %s: %w", lp.Label, err)
		}
		load, err := json.Marshal(lp.Load)
		if err != nil {
			return fmt.Errorf("load point %s: %w", lp.Label, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO load_points
			(trial_id, level, kind, value, load, summary, completed, failed, request_throughput, output_throughput,
			 request_goodput, median_ttft_ms, p99_ttft_ms, median_tpot_ms, p99_tpot_ms, p99_itl_ms, p99_e2el_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			trialID, lp.Label, lp.Kind, lp.Value, string(load), string(js), sum.Completed, sum.Failed,
			nullFloat(sum.RequestThroughput), nullFloat(sum.OutputThroughput), nullFloat(sum.RequestGoodput),
			nullFloat(sum.TTFT.Median), nullFloat(sum.TTFT.P99), nullFloat(sum.TPOT.Median), nullFloat(sum.TPOT.P99),
			nullFloat(sum.ITL.P99), nullFloat(sum.E2EL.P99))
		if err != nil {
			return fmt.Errorf("load point %s: %w", lp.Label, err)
		}
	}
	return nil
}

// InterruptRunning marks the study's running trials interrupted (their
// process died with the study) and returns their numbers in order.
func (s *Store) InterruptRunning(ctx context.Context, studyID int64) ([]int, error) {
	var numbers []int
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`UPDATE trials SET status = 'interrupted', finished = ? WHERE study_id = ? AND status = 'running' RETURNING number`,
			formatTime(time.Now()), studyID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
			numbers = append(numbers, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: interrupt running trials: %w", err)
	}
	slices.Sort(numbers)
	return numbers, nil
}

const trialColumns = `id, study_id, number, settings, gpus, status, failure, failure_msg, log_tail, objective, started, finished, confirms, pending_ns, launch_ns, reruns, quality`

// scanTrial reads one trial row. A value in it that does not parse (a
// hand-edited or damaged row) marks that trial Unreadable rather than
// failing the read of every trial of every study.
func scanTrial(row interface{ Scan(...any) error }) (Trial, error) {
	var t Trial
	var settings, gpus string
	var objective sql.NullFloat64
	var started, finished sql.NullString
	var confirms, pending, launch sql.NullInt64
	var quality string
	if err := row.Scan(&t.ID, &t.StudyID, &t.Number, &settings, &gpus, &t.Status, &t.Failure,
		&t.FailureMsg, &t.LogTail, &objective, &started, &finished, &confirms, &pending, &launch, &t.Reruns, &quality); err != nil {
		return Trial{}, err
	}
	t.Pending, t.Launch = durationOf(pending), durationOf(launch)
	if confirms.Valid {
		c := int(confirms.Int64)
		t.Confirms = &c
	}
	if objective.Valid {
		t.Objective = &objective.Float64
	}
	var bad []string
	if quality != "" {
		t.Quality = &measure.Quality{}
		if err := json.Unmarshal([]byte(quality), t.Quality); err != nil {
			t.Quality = nil
			bad = append(bad, fmt.Sprintf("quality: %v", err))
		}
	}
	if err := json.Unmarshal([]byte(settings), &t.Settings); err != nil {
		t.Settings = nil
		bad = append(bad, fmt.Sprintf("settings: %v", err))
	}
	if err := json.Unmarshal([]byte(gpus), &t.GPUs); err != nil {
		t.GPUs = nil
		bad = append(bad, fmt.Sprintf("gpus: %v", err))
	}
	var err error
	if t.Started, err = parseTime(started); err != nil {
		bad = append(bad, fmt.Sprintf("started: %v", err))
	}
	if t.Finished, err = parseTime(finished); err != nil {
		bad = append(bad, fmt.Sprintf("finished: %v", err))
	}
	t.Unreadable = strings.Join(bad, "; ")
	return t, nil
}

// Trials returns the study's trials by number, each with its load points in
// the order they were stored.
func (s *Store) Trials(ctx context.Context, studyID int64) ([]Trial, error) {
	// One read transaction gives trials and load points from one snapshot.
	// It is a deferred BEGIN on a dedicated connection: BeginTx would take
	// the write lock (_txlock=immediate) and stall a tuning process.
	tx, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: trials: %w", err)
	}
	defer tx.Close()
	if _, err := tx.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return nil, fmt.Errorf("store: trials: %w", err)
	}
	defer tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	var out []Trial
	byID := map[int64]int{}
	err = collect(ctx, tx, "trials", func(rows *sql.Rows) error {
		t, err := scanTrial(rows)
		byID[t.ID] = len(out)
		out = append(out, t)
		return err
	}, `SELECT `+trialColumns+` FROM trials WHERE study_id = ? ORDER BY number`, studyID)
	if err != nil {
		return nil, err
	}
	err = collect(ctx, tx, "load points", func(rows *sql.Rows) error {
		var id int64
		var lp measure.Level
		var load, summary string
		if err := rows.Scan(&id, &lp.Label, &lp.Kind, &lp.Value, &load, &summary); err != nil {
			return err
		}
		i, ok := byID[id]
		if !ok {
			return nil
		}
		// A point that does not parse makes its trial unreadable, not the
		// study: a trial with a level missing must not rank on the rest.
		err := json.Unmarshal([]byte(summary), &lp.Summary)
		if err == nil {
			lp.Load, err = readLoad(load, lp)
		}
		if err != nil {
			out[i].Unreadable = strings.TrimPrefix(out[i].Unreadable+"; ", "; ") + fmt.Sprintf("load point %s: %v", lp.Label, err)
			return nil
		}
		out[i].LoadPoints = append(out[i].LoadPoints, lp)
		return nil
	}, `SELECT lp.trial_id, lp.level, lp.kind, lp.value, lp.load, lp.summary
		FROM load_points lp JOIN trials t ON t.id = lp.trial_id WHERE t.study_id = ? ORDER BY lp.rowid`, studyID)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readLoad decodes a load point's load; points stored before the load
// column existed (schema 2) get it back from their kind, value and summary,
// without burstiness (it was not kept).
func readLoad(js string, lp measure.Level) (measure.Load, error) {
	var l measure.Load
	if js != "" {
		err := json.Unmarshal([]byte(js), &l)
		return l, err
	}
	if lp.Kind == "rate" {
		return measure.Load{Rate: lp.Value, MaxConcurrency: lp.Summary.MaxConcurrency}, nil
	}
	return measure.Load{MaxConcurrency: int(lp.Value)}, nil
}

// TrialCount is the number of the study's trials (len of Trials, without
// reading them).
func (s *Store) TrialCount(ctx context.Context, studyID int64) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM trials WHERE study_id = ?`, studyID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: trial count: %w", err)
	}
	return n, nil
}

// Trial returns one trial of a study by number, with its load points.
func (s *Store) Trial(ctx context.Context, studyID int64, number int) (Trial, error) {
	trials, err := s.Trials(ctx, studyID)
	if err != nil {
		return Trial{}, err
	}
	for _, t := range trials {
		if t.Number == number {
			return t, nil
		}
	}
	return Trial{}, fmt.Errorf("store: trial %d of study %d %w", number, studyID, ErrNotFound)
}

// Requests returns the per-request records of one trial at one load level
// in the order they were stored. Chunks and error messages are not stored.
func (s *Store) Requests(ctx context.Context, trialID int64, level string) ([]measure.Record, error) {
	var out []measure.Record
	err := collect(ctx, s.db, "requests", func(rows *sql.Rows) error {
		var r measure.Record
		var sched, send, first, last, end int64
		var class string
		if err := rows.Scan(&r.Index, &r.Warmup, &sched, &send, &first, &last, &end,
			&r.PromptTokens, &r.OutputTokens, &class, &r.Status); err != nil {
			return err
		}
		r.Sched, r.Send, r.First, r.Last, r.End = time.Duration(sched), time.Duration(send),
			time.Duration(first), time.Duration(last), time.Duration(end)
		r.Error = measure.ErrorClass(class)
		out = append(out, r)
		return nil
	}, `SELECT idx, warmup, sched_ns, send_ns, first_ns, last_ns, end_ns,
		prompt_tokens, output_tokens, error, http_status FROM requests WHERE trial_id = ? AND level = ? ORDER BY rowid`,
		trialID, level)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GPUSamples returns a trial's GPU samples ordered by GPU and time, as
// NVML gave them (gpu.Sample: a zero field is one it did not give). Times
// are the trial's start plus the stored offset; an energy counter reads
// 1 mJ more than the energy since the GPU's first reading, so that the
// first is not taken for a missing one (only differences of the counter
// mean anything).
func (s *Store) GPUSamples(ctx context.Context, trialID int64) ([]gpu.Sample, error) {
	var out []gpu.Sample
	err := collect(ctx, s.db, "gpu samples", func(rows *sql.Rows) error {
		var g gpu.Sample
		var t, mem, clock int64
		var power, util, energy, temp sql.NullFloat64
		var started sql.NullString
		if err := rows.Scan(&t, &g.GPU, &power, &mem, &util, &clock, &energy, &temp, &started); err != nil {
			return err
		}
		t0, err := parseTime(started)
		if err != nil {
			return err
		}
		g.Time = t0.Add(time.Duration(t))
		g.MemUsed, g.SMClockMHz = uint64(max(mem, 0)), uint32(max(clock, 0))
		g.PowerW, g.UtilGPU = power.Float64, util.Float64
		if energy.Valid && energy.Float64 >= 0 {
			g.EnergyMilliJ = uint64(math.Round(1000*energy.Float64)) + 1
		}
		if temp.Valid && temp.Float64 > 0 {
			g.TempC = uint32(math.Round(temp.Float64))
		}
		out = append(out, g)
		return nil
	}, `SELECT g.t_ns, g.gpu, g.power_w, g.mem_used_bytes, g.util_pct, g.sm_clock_mhz,
		g.energy_j, g.temp_c, t.started FROM gpu_samples g JOIN trials t ON t.id = g.trial_id
		WHERE g.trial_id = ? ORDER BY g.gpu, g.t_ns`, trialID)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Forecasts returns the sampler's forecast stored with the study
// (Lease.SetForecast), in the order it was stored; none for a study whose
// sampler forecasts nothing.
func (s *Store) Forecasts(ctx context.Context, studyID int64) ([]Forecast, error) {
	var out []Forecast
	err := collect(ctx, s.db, "forecasts", func(rows *sql.Rows) error {
		var f Forecast
		var settings string
		if err := rows.Scan(&settings, &f.Value, &f.Met, &f.PStart, &f.Failure); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(settings), &f.Settings); err != nil {
			return nil // a damaged row says nothing about the others
		}
		out = append(out, f)
		return nil
	}, `SELECT settings, value, met, p_start, failure FROM forecasts WHERE study_id = ? ORDER BY idx`, studyID)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NextTrialNumber returns one more than the highest trial number of the
// study; the first trial is number 0.
func (s *Store) NextTrialNumber(ctx context.Context, studyID int64) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(number), -1) + 1 FROM trials WHERE study_id = ?`, studyID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: next trial number: %w", err)
	}
	return n, nil
}

// nullDuration stores a duration in nanoseconds, NULL for nil.
func nullDuration(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return int64(*d)
}

// durationOf reads what nullDuration stored.
func durationOf(n sql.NullInt64) *time.Duration {
	if !n.Valid {
		return nil
	}
	d := time.Duration(n.Int64)
	return &d
}

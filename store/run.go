package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/periodic"
	"github.com/servetune/servetune/internal/proc"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Lease timing: a run renews its lease every LeaseHeartbeat; a lease whose
// owner runs on another host is taken over only after LeaseTimeout without
// a renewal (an owner on this host is checked directly: a dead process
// loses its lease at once).
const (
	LeaseHeartbeat = 10 * time.Second
	LeaseTimeout   = 2 * time.Minute
)

// OwnedError is returned by Begin when another live run owns the study.
type OwnedError struct {
	Study     string
	Owner     proc.Owner
	Since     time.Time
	Heartbeat time.Time
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("study %q is being tuned by %s (run %s, since %s, last seen %s); wait for it to finish or stop it first",
		e.Study, e.Owner.Describe(), e.Owner.Run, e.Since.Local().Format(time.DateTime), e.Heartbeat.Local().Format(time.TimeOnly))
}

// ErrLeaseLost is returned by a run's writes once another run took the
// study over (this one was presumed dead).
var ErrLeaseLost = errors.New("the study's lease was taken over by another run")

// BeginOptions says how Begin opens a study.
type BeginOptions struct {
	// Resume continues a stored study; without it a stored name is an
	// ErrExists error.
	Resume bool
	// Owner is the run that takes the study; zero = this process, a new
	// run id (proc.NewRun).
	Owner proc.Owner
	// Check, when set, sees the stored study before a resume changes
	// anything; its error refuses the resume (a spec that changed).
	Check func(stored Study) error
	// UpdateSpec replaces a resumed study's stored spec with the one
	// given (a change Check accepted).
	UpdateSpec bool
}

// Lease is one process's hold on a study while it tunes it: Begin takes it
// (and renews it in the background), trials start and finish through it,
// End gives it up.
type Lease struct {
	s     *Store
	Study Study
	Owner proc.Owner

	stop context.CancelFunc // ends the heartbeat
	done sync.WaitGroup
	once sync.Once
}

// Begin opens study st for a run and takes its lease. A new name is
// created; a stored one is an ErrExists error unless opts.Resume is set,
// when it continues: its running trials (whose process died) are marked
// interrupted. A study another live run owns is an *OwnedError whatever the
// options. It returns the run and the study's trials so far. The run renews
// its lease until End.
func (s *Store) Begin(ctx context.Context, st Study, opts BeginOptions) (*Lease, []Trial, error) {
	owner := opts.Owner
	if owner.Run == "" {
		owner = proc.NewRun()
	}
	old, err := s.GetStudy(ctx, st.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		if opts.Resume {
			return nil, nil, fmt.Errorf("store: study %q %w: nothing to resume (a new study needs no --resume; check --db)", st.Name, ErrNotFound)
		}
		created, err := s.CreateStudy(ctx, st)
		if err != nil {
			return nil, nil, err
		}
		if err := s.takeLease(ctx, created, owner); err != nil {
			return nil, nil, err
		}
		return s.startRun(created, owner), nil, nil
	case err != nil:
		return nil, nil, err
	}
	if err := s.checkLease(ctx, old, owner); err != nil {
		return nil, nil, err
	}
	if !opts.Resume {
		return nil, nil, fmt.Errorf("store: study %q %w", st.Name, ErrExists)
	}
	if opts.Check != nil {
		if err := opts.Check(old); err != nil {
			return nil, nil, err
		}
	}
	if err := s.takeLease(ctx, old, owner); err != nil {
		return nil, nil, err
	}
	run := s.startRun(old, owner)
	fail := func(err error) (*Lease, []Trial, error) {
		run.release(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if opts.UpdateSpec {
		if err := s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE studies SET spec = ? WHERE id = ?`, RedactSpec(st.Spec), old.ID)
			return err
		}); err != nil {
			return fail(fmt.Errorf("store: update spec: %w", err))
		}
		run.Study.Spec = RedactSpec(st.Spec)
	}
	if run.Study, err = s.ResumeStudy(ctx, st.Name); err != nil {
		return fail(err)
	}
	if _, err := s.InterruptRunning(ctx, old.ID); err != nil {
		return fail(err)
	}
	trials, err := s.Trials(ctx, old.ID)
	if err != nil {
		return fail(err)
	}
	return run, trials, nil
}

// lease is a study's owners row.
type lease struct {
	owner     proc.Owner
	started   time.Time
	heartbeat time.Time
}

func readLease(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, studyID int64) (*lease, error) {
	var owner string
	var started, beat sql.NullString
	err := q.QueryRowContext(ctx, `SELECT owner, started, heartbeat FROM owners WHERE study_id = ?`, studyID).Scan(&owner, &started, &beat)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l := &lease{}
	if l.owner, err = proc.Parse(owner); err != nil {
		return nil, fmt.Errorf("%w: %w", errSchemaBroken, err)
	}
	if l.started, err = parseTime(started); err != nil {
		return nil, err
	}
	if l.heartbeat, err = parseTime(beat); err != nil {
		return nil, err
	}
	return l, nil
}

// live reports whether l's owner still holds the study: provably alive on
// this host, or on another host with a recent heartbeat.
func (l *lease) live(now time.Time) bool {
	alive, known := l.owner.Alive()
	if known {
		return alive
	}
	return now.Sub(l.heartbeat) < LeaseTimeout
}

// checkLease refuses a study another live run owns.
func (s *Store) checkLease(ctx context.Context, st Study, owner proc.Owner) error {
	l, err := readLease(ctx, s.db, st.ID)
	if err != nil {
		return fmt.Errorf("store: lease of %q: %w", st.Name, err)
	}
	if l != nil && l.owner.Run != owner.Run && l.live(time.Now()) {
		return &OwnedError{Study: st.Name, Owner: l.owner, Since: l.started, Heartbeat: l.heartbeat}
	}
	return nil
}

// takeLease makes owner the study's owner, in one transaction with the
// check that no other live run holds it.
func (s *Store) takeLease(ctx context.Context, st Study, owner proc.Owner) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		l, err := readLease(ctx, tx, st.ID)
		if err != nil {
			return err
		}
		now := time.Now()
		if l != nil && l.owner.Run != owner.Run && l.live(now) {
			return &OwnedError{Study: st.Name, Owner: l.owner, Since: l.started, Heartbeat: l.heartbeat}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO owners (study_id, owner, started, heartbeat) VALUES (?, ?, ?, ?)
			ON CONFLICT (study_id) DO UPDATE SET owner = excluded.owner, started = excluded.started, heartbeat = excluded.heartbeat`,
			st.ID, owner.String(), formatTime(now), formatTime(now))
		return err
	})
	var oe *OwnedError
	if errors.As(err, &oe) {
		return err
	}
	if err != nil {
		return fmt.Errorf("store: take the lease of %q: %w", st.Name, err)
	}
	return nil
}

// startRun starts the heartbeat of a run that holds its lease.
func (s *Store) startRun(st Study, owner proc.Owner) *Lease {
	ctx, stop := context.WithCancel(context.Background())
	r := &Lease{s: s, Study: st, Owner: owner, stop: stop}
	r.done.Go(func() { periodic.Run(ctx, LeaseHeartbeat, r.renew) })
	return r
}

// renew is the heartbeat: it renews the lease, a write the run's end
// lets finish.
func (r *Lease) renew(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LeaseHeartbeat)
	defer cancel()
	_ = r.s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE owners SET heartbeat = ? WHERE study_id = ? AND owner = ?`,
			formatTime(time.Now()), r.Study.ID, r.Owner.String())
		return err
	})
}

// holds checks, inside a write, that the run still owns the study.
func (r *Lease) holds(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM owners WHERE study_id = ? AND owner = ?`,
		r.Study.ID, r.Owner.String()).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// release stops the heartbeat and gives the lease up.
func (r *Lease) release(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		r.stop()
		r.done.Wait()
		err = r.s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM owners WHERE study_id = ? AND owner = ?`, r.Study.ID, r.Owner.String())
			return err
		})
	})
	return err
}

// StartTrial commits trial number as running (Store.StartTrial), while the
// run holds the study.
func (r *Lease) StartTrial(ctx context.Context, number int, settings engine.Settings, gpus []int) error {
	return r.s.startTrial(ctx, r.holds, r.Study.ID, number, nil, settings, gpus)
}

// StartConfirmation commits trial number as running, a confirmation run of
// trial confirms (Trial.Confirms).
func (r *Lease) StartConfirmation(ctx context.Context, number, confirms int, settings engine.Settings, gpus []int) error {
	return r.s.startTrial(ctx, r.holds, r.Study.ID, number, &confirms, settings, gpus)
}

// FinishTrial stores a trial's outcome in one transaction
// (Store.FinishTrial), while the run holds the study; res.StudyID is the
// run's.
func (r *Lease) FinishTrial(ctx context.Context, res TrialResult) error {
	res.StudyID = r.Study.ID
	return r.s.finishTrial(ctx, r.holds, res)
}

// End closes the run with status StudyFinished, StudyFailed or
// StudyInterrupted: trials still running are marked interrupted, to be
// re-run by a later resume, and the lease is given up.
func (r *Lease) End(ctx context.Context, status string) error {
	if _, err := r.s.InterruptRunning(ctx, r.Study.ID); err != nil {
		r.release(ctx)
		return err
	}
	err := r.s.FinishStudy(ctx, r.Study.ID, status)
	if rerr := r.release(ctx); err == nil {
		err = rerr
	}
	return err
}

// SetQualityBaseline stores the quality gate's measurement of the
// baseline configuration (Study.QualityBaseline), while the run holds the
// study.
func (r *Lease) SetQualityBaseline(ctx context.Context, baseline string) error {
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		if err := r.holds(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE studies SET quality_baseline = ? WHERE id = ?`, Redact(baseline), r.Study.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: quality baseline: %w", err)
	}
	r.Study.QualityBaseline = baseline
	return nil
}

// SetStop stores that the study stopped early (Study.Stop), while the run
// holds it.
func (r *Lease) SetStop(ctx context.Context, stop Stop) error {
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		if err := r.holds(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE studies SET stop_reason = ?, stop_at = ?, stop_of = ? WHERE id = ?`,
			Redact(stop.Why), stop.At, stop.Of, r.Study.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: stop: %w", err)
	}
	r.Study.Stop = stop
	return nil
}

// SetForecast stores the sampler's forecast of the space with the study
// (Store.Forecasts), replacing one stored before (a resumed study
// forecasts again), while the run holds it. It keeps the first
// MaxForecasts: the caller puts first what must survive the bound.
func (r *Lease) SetForecast(ctx context.Context, fcs []Forecast) error {
	fcs = fcs[:min(len(fcs), MaxForecasts)]
	rows := make([]string, len(fcs))
	for i, f := range fcs {
		b, err := json.Marshal(f.Settings)
		if err != nil {
			return fmt.Errorf("store: forecast: settings: %w", err)
		}
		rows[i] = string(b)
	}
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		if err := r.holds(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM forecasts WHERE study_id = ?`, r.Study.ID); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO forecasts (study_id, idx, settings, value, met, p_start, failure) VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, f := range fcs {
			// SQLite keeps a NaN as NULL: a figure that is not one is
			// stored as none.
			value, met := f.Value, f.Met
			if math.IsNaN(value) || math.IsInf(value, 0) {
				value, met = 0, false
			}
			pStart := f.PStart
			if math.IsNaN(pStart) {
				pStart = 0
			}
			if _, err := stmt.ExecContext(ctx, r.Study.ID, i, rows[i], value, met, pStart, f.Failure); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: forecast: %w", err)
	}
	return nil
}

// Trials returns the study's trials (Store.Trials).
func (r *Lease) Trials(ctx context.Context) ([]Trial, error) { return r.s.Trials(ctx, r.Study.ID) }

// TrialCount is the number of the study's trials (Store.TrialCount).
func (r *Lease) TrialCount(ctx context.Context) (int, error) { return r.s.TrialCount(ctx, r.Study.ID) }

// DeleteStudy removes a study and everything stored of it; a study a live
// run owns is an *OwnedError, and an unknown name ErrNotFound.
func (s *Store) DeleteStudy(ctx context.Context, name string) error {
	st, err := s.GetStudy(ctx, name)
	if err != nil {
		return err
	}
	if err := s.checkLease(ctx, st, proc.Owner{}); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM studies WHERE id = ?`, st.ID)
		return err
	})
}

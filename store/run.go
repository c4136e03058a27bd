package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/servetune/servetune/engine"
)

// Run is one run of a study: the process that tunes it now. Begin starts
// it; trials start and finish through it; End closes it.
type Run struct {
	s     *Store
	Study Study
}

// Begin opens study st for a run. A new name is created; a stored one is
// an ErrExists error unless resume is set, when it continues: its running
// trials (whose process died) are marked interrupted. It returns the run
// and the study's trials so far.
func (s *Store) Begin(ctx context.Context, st Study, resume bool) (*Run, []Trial, error) {
	old, err := s.GetStudy(ctx, st.Name)
	switch {
	case err == nil && !resume:
		return nil, nil, fmt.Errorf("store: study %q %w", st.Name, ErrExists)
	case err == nil:
		if old, err = s.ResumeStudy(ctx, st.Name); err != nil {
			return nil, nil, err
		}
		if _, err := s.InterruptRunning(ctx, old.ID); err != nil {
			return nil, nil, err
		}
		trials, err := s.Trials(ctx, old.ID)
		if err != nil {
			return nil, nil, err
		}
		return &Run{s: s, Study: old}, trials, nil
	case errors.Is(err, ErrNotFound):
		created, err := s.CreateStudy(ctx, st)
		if err != nil {
			return nil, nil, err
		}
		return &Run{s: s, Study: created}, nil, nil
	default:
		return nil, nil, err
	}
}

// StartTrial commits trial number as running (Store.StartTrial).
func (r *Run) StartTrial(ctx context.Context, number int, settings engine.Settings, gpus []int) error {
	return r.s.StartTrial(ctx, r.Study.ID, number, settings, gpus)
}

// FinishTrial stores a trial's outcome in one transaction
// (Store.FinishTrial); res.StudyID is the run's.
func (r *Run) FinishTrial(ctx context.Context, res TrialResult) error {
	res.StudyID = r.Study.ID
	return r.s.FinishTrial(ctx, res)
}

// End closes the run with status StudyFinished, StudyFailed or
// StudyInterrupted; trials still running are marked interrupted, to be
// re-run by a later resume.
func (r *Run) End(ctx context.Context, status string) error {
	if _, err := r.s.InterruptRunning(ctx, r.Study.ID); err != nil {
		return err
	}
	return r.s.FinishStudy(ctx, r.Study.ID, status)
}

// Trials returns the study's trials (Store.Trials).
func (r *Run) Trials(ctx context.Context) ([]Trial, error) { return r.s.Trials(ctx, r.Study.ID) }

package store

import (
	"context"
	"database/sql"
	"errors"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"github.com/servetune/servetune/space"
)

// Store is an open servetune database.
type Store struct {
	db *sql.DB
}

// ErrNotFound is returned when a study or trial does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned by CreateStudy when the name is taken.
var ErrExists = errors.New("study already exists")

// Open opens or creates the database at path and migrates it to the current schema.
func Open(ctx context.Context, path string) (*Store, error) {
	return nil, errors.New("store.Open: not implemented")
}

// Close closes the database.
func (s *Store) Close() error {
	if s == nil || s.db == nil {
		return nil
	}
	return s.db.Close()
}

// CreateStudy stores a new study and returns it with its ID and start time.
// It fails with ErrExists when the name is taken.
func (s *Store) CreateStudy(ctx context.Context, st Study) (Study, error) {
	return Study{}, errors.New("not implemented")
}

// GetStudy returns the study with the given name, or ErrNotFound.
func (s *Store) GetStudy(ctx context.Context, name string) (Study, error) {
	return Study{}, errors.New("not implemented")
}

// ListStudies returns every study, oldest first.
func (s *Store) ListStudies(ctx context.Context) ([]Study, error) {
	return nil, errors.New("not implemented")
}

// FinishStudy marks a study ended with the given status.
func (s *Store) FinishStudy(ctx context.Context, studyID int64, status string) error {
	return errors.New("not implemented")
}

// StartTrial commits a running trial row at once, so a killed study leaves evidence.
func (s *Store) StartTrial(ctx context.Context, studyID int64, number int, settings space.Settings, gpus []int) error {
	return errors.New("not implemented")
}

// FinishTrial stores a trial's outcome in one transaction.
func (s *Store) FinishTrial(ctx context.Context, r TrialResult) error {
	return errors.New("not implemented")
}

// InterruptRunning marks the study's running trials interrupted and returns their numbers.
func (s *Store) InterruptRunning(ctx context.Context, studyID int64) ([]int, error) {
	return nil, errors.New("not implemented")
}

// Trials returns the study's trials by number, with their load points.
func (s *Store) Trials(ctx context.Context, studyID int64) ([]Trial, error) {
	return nil, errors.New("not implemented")
}

// Requests returns the per-request records of one trial at one load level.
func (s *Store) Requests(ctx context.Context, trialID int64, level string) ([]RequestRow, error) {
	return nil, errors.New("not implemented")
}

// NextTrialNumber returns one more than the highest trial number of the study.
func (s *Store) NextTrialNumber(ctx context.Context, studyID int64) (int, error) {
	return 0, errors.New("not implemented")
}

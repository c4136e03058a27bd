package bench

import "errors"

// Sentinel errors; wrapped with details and checked with errors.Is.
var (
	ErrBadDist    = errors.New("bad length distribution")
	ErrBadDataset = errors.New("bad dataset")
	ErrBadConfig  = errors.New("bad benchmark config")
	ErrBadSSE     = errors.New("bad SSE stream")
)

package bench

import "errors"

// Sentinel errors; wrapped with details and checked with errors.Is.
var (
	ErrBadDist    = errors.New("bad length distribution")
	ErrBadDataset = errors.New("bad dataset")
	ErrBadThink   = errors.New("bad think time")
	ErrBadConfig  = errors.New("bad benchmark config")
	ErrBadSSE     = errors.New("bad SSE stream")
	// ErrStopped is wrapped by Run's error when a phase stopped sending
	// early: the server refused every connection, or this machine ran out
	// of file descriptors. The result holds what was measured.
	ErrStopped = errors.New("stopped early")
)

// Package store keeps studies, trials, load points, per-request records and
// GPU samples in one SQLite file.
package store

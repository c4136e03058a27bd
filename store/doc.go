// Package store keeps studies, trials, load points, per-request records and
// GPU samples in one SQLite file (github.com/mattn/go-sqlite3).
//
// The file runs in WAL mode with foreign keys on and a busy timeout, so the
// CLI can read a study while another process tunes it. The schema version
// lives in PRAGMA user_version; Open applies the forward-only migrations a
// file lacks and refuses a file from a newer servetune (ErrNewerSchema).
//
// A trial is written twice. StartTrial commits a "running" row as soon as the
// trial begins, so a study killed at any moment leaves evidence;
// FinishTrial then stores the outcome, load points, per-request records and
// GPU samples in ONE transaction, so the file only ever holds whole trials.
// A study's run (Begin) creates the study or, resuming, turns the leftover
// running rows into "interrupted"; StartTrial may then re-run them in
// place. Each load point is stored whole (its measure.Level: the load with
// its burstiness, the summary, the records):
//
//	s, err := store.Open(ctx, ".servetune/servetune.db") // or ":memory:"
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	run, stored, err := s.Begin(ctx, store.Study{Name: "llama8b-h100", Spec: specText, Seed: 1}, false)
//	if err := run.StartTrial(ctx, len(stored), settings, []int{0}); err != nil {
//		return err
//	}
//	// ... run the trial ...
//	err = run.FinishTrial(ctx, store.TrialResult{Number: len(stored), Status: measure.StatusOK,
//		LoadPoints: levels, GPU: samples})
//	err = run.End(ctx, store.StudyFinished)
//
// No secret is ever written: the store takes typed fields only (no
// environment, no headers), drops summary metadata whose key names a
// credential, and redacts token-like strings (Hugging Face and OpenAI tokens,
// bearer headers, key=value pairs naming a key, token, secret or password)
// from the spec, failure messages and log tails (Redact).
//
// A Store is safe for concurrent use by multiple goroutines, such as trials
// running in parallel on disjoint GPUs; writes from one process are
// serialized, and writers in other processes wait for SQLite's lock.
package store

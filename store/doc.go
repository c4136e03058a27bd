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
// On --resume, InterruptRunning turns the leftover running rows into
// "interrupted" and StartTrial may re-run them in place:
//
//	s, err := store.Open(ctx, ".servetune/servetune.db")
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	st, err := s.CreateStudy(ctx, store.Study{Name: "llama8b-h100", Spec: specText, Seed: 1})
//	n, _ := s.NextTrialNumber(ctx, st.ID)
//	if err := s.StartTrial(ctx, st.ID, n, settings, []int{0}); err != nil {
//		return err
//	}
//	// ... run the trial ...
//	err = s.FinishTrial(ctx, store.TrialResult{StudyID: st.ID, Number: n, Status: store.TrialOK,
//		LoadPoints: points, Requests: recordsByLevel, GPU: samples})
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

package store

import (
	"context"
	"fmt"
)

// Changes returns a token that differs whenever something a reader of the
// named study may show changed (name "": of any study): the study's row,
// a trial started, finished or changed status, a load point stored. It
// reads a few aggregates, not the trials, so a dashboard can poll it
// cheaply and re-read the study only when it moves. A study that does not
// exist has the token "none".
func (s *Store) Changes(ctx context.Context, name string) (string, error) {
	const trialAggs = `COUNT(t.id), COUNT(t.finished), COALESCE(MAX(t.started), ''), COALESCE(MAX(t.finished), ''),
		TOTAL(t.status = 'running'), TOTAL(t.status = 'ok'), TOTAL(t.status = 'failed'), TOTAL(t.reruns), TOTAL(LENGTH(t.quality))`
	var (
		q    string
		args []any
	)
	if name == "" {
		q = `SELECT (SELECT COUNT(*) || ',' || TOTAL(id) || ',' || COALESCE(GROUP_CONCAT(status || COALESCE(finished, ''), ','), '') FROM studies),
			` + trialAggs + `, (SELECT COUNT(*) FROM load_points) FROM trials t`
	} else {
		q = `SELECT s.id || ',' || s.status || ',' || COALESCE(s.finished, ''), ` + trialAggs + `,
			(SELECT COUNT(*) FROM load_points lp JOIN trials t2 ON t2.id = lp.trial_id WHERE t2.study_id = s.id)
			FROM studies s LEFT JOIN trials t ON t.study_id = s.id WHERE s.name = ? GROUP BY s.id`
		args = []any{name}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("store: changes: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return "none", rows.Err()
	}
	vals := make([]any, 11)
	for i := range vals {
		vals[i] = new(any)
	}
	if err := rows.Scan(vals...); err != nil {
		return "", fmt.Errorf("store: changes: %w", err)
	}
	var tok []byte
	for _, v := range vals {
		tok = fmt.Appendf(tok, "%v|", *(v.(*any)))
	}
	return string(tok), rows.Err()
}

package postgres

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/store"
)

// A dead letter's error is stored once, as in the SQLite store (see its
// deadtext.go). The attempt that made the job dead has the job's
// last_error as its error, and its record in lq_attempts keeps an empty
// error instead of a second copy: attemptsSQL reads the job's last_error
// for the last record of a dead job whose error is empty. A requeue, the
// one way out of the dead state that keeps the job, writes the text back
// into the record (keepDeadErrorSQL), since the job's next failure will
// replace its last_error. An attempt that failed with an empty message
// reads back empty either way.

// keepDeadErrorSQL writes the last_error of each job of $1 into its last
// attempt record when that record holds none.
const keepDeadErrorSQL = `UPDATE lq_attempts a SET error = coalesce(j.last_error, '')
FROM lq_jobs j
WHERE a.job_id = ANY ($1) AND j.id = a.job_id AND a.error = ''
  AND a.id = (SELECT max(m.id) FROM lq_attempts m WHERE m.job_id = a.job_id)`

// buryRecordError is the error to store in the attempt record of a burial:
// empty when the job's last_error holds the same text.
func buryRecordError(b store.Burial) string {
	if b.LastError != nil && *b.LastError == b.Record.Error {
		return ""
	}
	return b.Record.Error
}

// keepDeadErrors runs keepDeadErrorSQL for the jobs moved by a requeue.
func (s *pgStore) keepDeadErrors(ctx context.Context, tx *sql.Tx, moved []store.Moved) error {
	if len(moved) == 0 {
		return nil
	}
	ids := make([]int64, len(moved))
	for i, m := range moved {
		ids[i] = m.ID
	}
	_, err := tx.ExecContext(ctx, s.q(keepDeadErrorSQL), ids)
	return err
}

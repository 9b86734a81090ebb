package sqlite

import (
	"context"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
)

// A dead letter's error is stored once. The attempt that made the job dead
// has the job's last_error as its error, and its record in lq_attempts
// keeps an empty error instead of a second copy (a few hundred bytes a
// dead letter): attemptsSQL reads the job's last_error for the last record
// of a dead job whose error is empty. A requeue, the one way out of the
// dead state that keeps the job, first writes the text back into the
// record (keepDeadErrorSQL), since the job's next failure will replace its
// last_error. An attempt that failed with an empty message reads back
// empty either way.

// attemptsSQL reads job ?'s attempt history in order.
const attemptsSQL = `SELECT a.attempt, a.started_at, a.finished_at,
    CASE WHEN a.error = '' AND j.state = 3 AND a.id = (SELECT max(m.id) FROM lq_attempts m WHERE m.job_id = a.job_id)
        THEN coalesce(j.last_error, '') ELSE a.error END,
    a.decision, a.delay, coalesce(a.process, 0), coalesce(a.host, ''), coalesce(a.pid, 0)
FROM lq_attempts a JOIN lq_jobs j ON j.id = a.job_id WHERE a.job_id = ? ORDER BY a.id`

// attemptsNoProcsSQL is attemptsSQL for a file without the process
// columns (Store.noProcs).
var attemptsNoProcsSQL = strings.Replace(attemptsSQL, "coalesce(a.process, 0), coalesce(a.host, ''), coalesce(a.pid, 0)", "0, '', 0", 1)

// keepDeadErrorSQL writes the last_error of each job of the JSON id list
// ?1 into its last attempt record when that record holds none.
const keepDeadErrorSQL = `UPDATE lq_attempts SET error = coalesce((SELECT last_error FROM lq_jobs WHERE id = lq_attempts.job_id), '')
WHERE job_id IN (SELECT value FROM json_each(?1)) AND error = ''
  AND id = (SELECT max(m.id) FROM lq_attempts m WHERE m.job_id = lq_attempts.job_id)`

// buryRecordError is the error to store in the attempt record of a burial:
// empty when the job's last_error holds the same text.
func buryRecordError(b store.Burial) string {
	if b.LastError != nil && *b.LastError == b.Record.Error {
		return ""
	}
	return b.Record.Error
}

// keepDeadErrors runs keepDeadErrorSQL for the jobs moved by a requeue.
func keepDeadErrors(ctx context.Context, tx Execer, moved []store.Moved) error {
	if len(moved) == 0 {
		return nil
	}
	ids := appendIDsJSON(nil, len(moved), func(i int) int64 { return moved[i].ID })
	_, err := tx.ExecContext(ctx, keepDeadErrorSQL, string(ids))
	return err
}

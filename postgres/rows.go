package postgres

import (
	"database/sql"
	"strconv"

	"github.com/litequeue/litequeue/internal/store"
)

// Statements' $n parameters, and the job rows (jobColumns) that the
// admin, dashboard and schedule reads scan.

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanJob(r rowScanner) (store.Job, error) {
	var j store.Job
	var state int16
	var key, lastErr, reason, meta sql.NullString
	var attempted, finished sql.NullInt64
	err := r.Scan(&j.ID, &j.Queue, &j.Kind, &state, &j.Attempt, &j.Priority, &key, &j.Payload, &j.CreatedAt,
		&j.RunAt, &j.VisibleAt, &attempted, &finished, &lastErr, &reason, &meta)
	j.State = store.State(state)
	j.Key, j.LastError, j.DeadReason, j.Meta = key.String, lastErr.String, reason.String, meta.String
	j.AttemptedAt, j.FinishedAt = attempted.Int64, finished.Int64
	return j, err
}

// args builds a statement's $n parameters.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

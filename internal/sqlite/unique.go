package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/litequeue/litequeue/internal/store"
)

// uniqueHolderSQL finds the row that blocks a unique job: one seek of the
// partial index lq_jobs_unique (its condition is repeated so that SQLite
// uses it).
const uniqueHolderSQL = `SELECT id, state, kind FROM lq_jobs
WHERE unique_key = ? AND unique_key IS NOT NULL AND ((unique_states >> state) & 1) = 1`

const insertUniqueJobSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key, unique_key, unique_states)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertUnique writes the unique job nj on tx (its idempotency key, if any,
// already checked): a row holding its uniqueness key in one of its states
// makes it a *store.UniqueError, unless nj.Unique.Replace and that row is
// pending, which is then deleted (nj.Unique.Replaced names it).
func insertUnique(ctx context.Context, tx Execer, nj *store.NewJob, key any) (int64, error) {
	u := nj.Unique
	u.Replaced = 0
	var holder int64
	var state store.State
	var kind string
	err := tx.QueryRowContext(ctx, uniqueHolderSQL, u.Key).Scan(&holder, &state, &kind)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, err
	case u.Replace && state == store.Pending:
		if _, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE id = ? AND state = 0`, holder); err != nil {
			return 0, err
		}
		u.Replaced = holder
	default:
		return holder, &store.UniqueError{ID: holder, State: state, Kind: kind}
	}
	res, err := tx.ExecContext(ctx, insertUniqueJobSQL, nj.Queue, nj.Kind, nj.Priority, nj.VisibleAt, nj.VisibleAt,
		nj.CreatedAt, nj.Payload, key, u.Key, int64(u.States))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// uniqueHolderSQL finds the row that blocks a unique job: one seek of the
// partial index lq_jobs_unique (its condition is repeated so that SQLite
// uses it).
const uniqueHolderSQL = `SELECT id, state, kind FROM lq_jobs
WHERE unique_key = ? AND unique_key IS NOT NULL AND ((unique_states >> state) & 1) = 1`

// insertUniqueJobSQL inserts a unique job unless a row holds its key in one
// of that row's states: then the partial unique index makes it insert
// nothing (and return no id). Only lq_jobs_unique can conflict here: the
// idempotency key was checked in the same transaction.
const insertUniqueJobSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key, unique_key, unique_states, meta)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING
	RETURNING id`

// insertUnique writes the unique job nj on tx (its idempotency key, if any,
// already checked): a row holding its uniqueness key in one of its states
// makes it a *store.UniqueError, unless nj.Unique.Replace and that row is
// pending, which is then deleted (nj.Unique.Replaced names it). Without a
// twin, the usual case, it is one statement.
func insertUnique(ctx context.Context, tx Execer, nj *store.NewJob, key any) (int64, error) {
	u := nj.Unique
	u.Replaced = 0
	insert := func() (int64, bool, error) {
		var id int64
		err := tx.QueryRowContext(ctx, insertUniqueJobSQL, nj.Queue, nj.Kind, nj.Priority, nj.VisibleAt, nj.VisibleAt,
			nj.CreatedAt, nj.Payload, key, u.Key, int64(u.States), metaArg(nj)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		return id, true, addCount(ctx, tx, countOf(nj.Queue, store.Pending, nj.VisibleAt), 1)
	}
	id, ok, err := insert()
	if ok || err != nil {
		return id, err
	}
	var holder int64
	var state store.State
	var kind string
	if err := tx.QueryRowContext(ctx, uniqueHolderSQL, u.Key).Scan(&holder, &state, &kind); err != nil {
		return 0, fmt.Errorf("litequeue: unique job: the insert met a twin that the lookup does not find: %w", err)
	}
	if !u.Replace || state != store.Pending {
		return holder, &store.UniqueError{ID: holder, State: state, Kind: kind}
	}
	if _, err := execCounted(ctx, tx, `DELETE FROM lq_jobs WHERE id = ? AND state = 0 RETURNING queue, state, visible_at`,
		gone, holder); err != nil {
		return 0, err
	}
	// A workflow's parent (Workflow.NeedsJob) deleted while live: its
	// dependants are resolved as a cancel would.
	if err := resolveFinished(ctx, tx, []int64{holder}, 2, func(int64) int64 { return nj.CreatedAt }, deletedParent); err != nil {
		return 0, err
	}
	u.Replaced = holder
	id, ok, err = insert()
	if err == nil && !ok {
		err = fmt.Errorf("litequeue: unique job: still blocked after replacing job %d", holder)
	}
	return id, err
}

// uniqueTwin returns the *store.UniqueError of the row that keeps the unique
// job id from becoming pending, or an error saying none was found.
func uniqueTwin(ctx context.Context, tx Execer, id int64) error {
	var holder int64
	var state store.State
	var kind string
	err := tx.QueryRowContext(ctx, `SELECT id, state, kind FROM lq_jobs
		WHERE unique_key = (SELECT unique_key FROM lq_jobs WHERE id = ?1) AND unique_key IS NOT NULL
		  AND ((unique_states >> state) & 1) = 1 AND id != ?1`, id).Scan(&holder, &state, &kind)
	if err != nil {
		return fmt.Errorf("litequeue: the requeue changed no row and no unique twin was found: %w", err)
	}
	return &store.UniqueError{ID: holder, State: state, Kind: kind}
}

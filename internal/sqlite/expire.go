package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// expiryWhere renders e's selection (state, queues), its arguments first.
func expiryWhere(e store.Expiry) (string, []any) {
	names, cond := e.Queues, "queue IN (SELECT value FROM json_each(?))"
	if len(names) == 0 {
		names, cond = e.Except, "queue NOT IN (SELECT value FROM json_each(?))"
	}
	if names == nil {
		names = []string{}
	}
	list, _ := json.Marshal(names)
	return "state = ? AND finished_at IS NOT NULL AND " + cond, []any{int(e.State), string(list)}
}

// Expire implements store.Admin; the attempts go with their rows (ON
// DELETE CASCADE).
func (s *Store) Expire(ctx context.Context, e store.Expiry) (int, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	where, args := expiryWhere(e)
	sel := `SELECT id FROM lq_jobs WHERE ` + where + ` AND finished_at < ? ORDER BY finished_at LIMIT ?`
	query := `DELETE FROM lq_jobs WHERE id IN (` + sel + `) RETURNING queue, state, visible_at`
	args = append(args, e.Before, e.Limit)
	var n int
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		// Their edges as workflows' children first, the same selection in
		// the same write transaction (workflow.go).
		if _, err := tx.ExecContext(ctx, `DELETE FROM lq_deps WHERE child IN (`+sel+`)`, args...); err != nil {
			return err
		}
		var err error
		n, err = execCounted(ctx, tx, query, gone, args...)
		return err
	})
	if err != nil {
		return 0, sqlitefile.ClassifyWriteError(err)
	}
	return n, nil
}

// OldestFinished implements store.Admin.
func (s *Store) OldestFinished(ctx context.Context, e store.Expiry) (int64, bool, error) {
	where, args := expiryWhere(e)
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT min(finished_at) FROM lq_jobs WHERE `+where, args...).Scan(&v)
	if err != nil || !v.Valid {
		return 0, false, err
	}
	return v.Int64, true, nil
}

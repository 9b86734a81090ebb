package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// RunNow implements store.Dashboard.
func (s *Store) RunNow(ctx context.Context, id, now int64) (store.Moved, error) {
	if s.w == nil {
		return store.Moved{}, store.ErrReadOnly
	}
	var m store.Moved
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var state store.State
		var visible int64
		err := tx.QueryRowContext(ctx, `SELECT state, visible_at, queue, kind FROM lq_jobs WHERE id = ?`, id).Scan(&state, &visible, &m.Queue, &m.Kind)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("litequeue: run job %d now: %w", id, store.ErrNotFound)
		case err != nil:
			return err
		case state != store.Pending:
			return fmt.Errorf("litequeue: run job %d now: it is %s, not waiting: %w", id, StateName(state), store.ErrWrongState)
		}
		m.ID = id
		if visible <= now {
			return nil // due already
		}
		if _, err = tx.ExecContext(ctx, `UPDATE lq_jobs SET visible_at = ? WHERE id = ? AND state = 0`, now, id); err != nil {
			return err
		}
		return moveCount(ctx, tx, countOf(m.Queue, store.Pending, visible), countOf(m.Queue, store.Pending, now), 1)
	})
	if err != nil {
		return store.Moved{}, sqlitefile.ClassifyWriteError(err)
	}
	return m, nil
}

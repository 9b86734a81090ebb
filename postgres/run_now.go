package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

const (
	runNowLockSQL = `SELECT state, visible_at, queue, kind FROM lq_jobs WHERE id = $1 FOR UPDATE`
	runNowSQL     = `UPDATE lq_jobs SET visible_at = $1 WHERE id = $2 AND state = 0`
)

// RunNow implements store.Dashboard; the other processes hear of the job
// through the queue's notification channel.
func (s *pgStore) RunNow(ctx context.Context, id, now int64) (store.Moved, error) {
	if err := s.writable(); err != nil {
		return store.Moved{}, err
	}
	var m store.Moved
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var state int16
		var visible int64
		err := tx.QueryRowContext(ctx, s.q(runNowLockSQL), id).Scan(&state, &visible, &m.Queue, &m.Kind)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("litequeue: run job %d now: %w", id, store.ErrNotFound)
		case err != nil:
			return err
		case state != 0:
			return fmt.Errorf("litequeue: run job %d now: it is %s, not waiting: %w", id, stateWord(state), store.ErrWrongState)
		}
		m.ID = id
		if visible <= now {
			return nil // due already
		}
		if _, err := tx.ExecContext(ctx, s.q(runNowSQL), now, id); err != nil {
			return err
		}
		return s.notifyTx(ctx, tx, map[string]bool{m.Queue: true})
	})
	if err != nil {
		return store.Moved{}, err
	}
	return m, nil
}

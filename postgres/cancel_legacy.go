//go:build !litequeue_control

package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// setCancelled records a queue's cancelled rows in its stats; builds whose
// store.QueueStats has no Cancelled count drop it.
func setCancelled(*store.QueueStats, int) {}

// Cancel implements store.Store.
func (s *pgStore) Cancel(ctx context.Context, ids []int64) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		m, err := s.lockRows(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, id := range ids {
			l, ok := m[id]
			switch {
			case !ok:
				return fmt.Errorf("litequeue: cancel job %d: %w", id, store.ErrNotFound)
			case l.state == 1:
				return fmt.Errorf("litequeue: cancel job %d: %w; wait for it to finish, or stop its worker first", id, store.ErrJobRunning)
			case l.state != 0:
				return fmt.Errorf("litequeue: cancel job %d: it is %s: %w", id, stateWord(l.state), store.ErrWrongState)
			}
		}
		return tx.QueryRowContext(ctx, s.q(fmt.Sprintf(deleteWithHistorySQL,
			"DELETE FROM lq_jobs WHERE id = ANY ($1) AND state = 0 RETURNING id")), ids).Scan(&n)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

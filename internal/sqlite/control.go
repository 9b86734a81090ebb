package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// Live control: paused queues (table lq_queues), cancelled jobs (state 4)
// and snoozes.

// Pause implements store.Admin.
func (s *Store) Pause(ctx context.Context, queue string, at int64) (bool, error) {
	if s.w == nil {
		return false, store.ErrReadOnly
	}
	var changed bool
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO lq_queues (queue, paused_at) VALUES (?1, ?2)
			ON CONFLICT (queue) DO UPDATE SET paused_at = ?2 WHERE paused_at IS NULL`, queue, at)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	return changed, sqlitefile.ClassifyWriteError(err)
}

// Resume implements store.Admin.
func (s *Store) Resume(ctx context.Context, queue string) (bool, error) {
	if s.w == nil {
		return false, store.ErrReadOnly
	}
	var changed bool
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		res, err := tx.ExecContext(ctx, `UPDATE lq_queues SET paused_at = NULL WHERE queue = ? AND paused_at IS NOT NULL`, queue)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	return changed, sqlitefile.ClassifyWriteError(err)
}

// Paused implements store.Admin.
func (s *Store) Paused(ctx context.Context) (map[string]int64, error) {
	return sqlkit.QueryPaused(ctx, s.db, `SELECT queue, paused_at FROM lq_queues WHERE paused_at IS NOT NULL`)
}

const (
	cancelPendingSQL = `UPDATE lq_jobs SET state = 4, lease = NULL, finished_at = ?1 WHERE id = ?2 AND state IN (0, 5)`
	cancelRunningSQL = `UPDATE lq_jobs SET state = 4, finished_at = ?1 WHERE id = ?2 AND state = 1`
)

// Cancel implements store.Admin.
func (s *Store) Cancel(ctx context.Context, ids []int64, now int64, hook store.CancelHook) ([]store.CancelledJob, error) {
	if s.w == nil {
		return nil, store.ErrReadOnly
	}
	var out []store.CancelledJob
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		out = out[:0]
		seen := map[int64]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			var c store.CancelledJob
			var state store.State
			var lease sql.NullInt64
			var key sql.NullString
			var visible int64
			err := tx.QueryRowContext(ctx, `SELECT state, queue, kind, lease, payload, attempt, priority, idem_key, created_at, visible_at
				FROM lq_jobs WHERE id = ?`, id).Scan(&state, &c.Queue, &c.Kind, &lease, &c.Payload, &c.Attempt, &c.Priority, &key, &c.CreatedAt, &visible)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("litequeue: cancel job %d: %w", id, store.ErrNotFound)
			case err != nil:
				return err
			case state != store.Pending && state != store.Running && state != store.Waiting:
				return fmt.Errorf("litequeue: cancel job %d: it is %s already: %w", id, StateName(state), store.ErrWrongState)
			}
			c.ID, c.Key = id, key.String
			query := cancelPendingSQL
			if state == store.Running {
				query = cancelRunningSQL
				c.Running, c.Lease = true, lease.Int64
			}
			if _, err := tx.ExecContext(ctx, query, now, id); err != nil {
				return err
			}
			if err := moveCount(ctx, tx, countOf(c.Queue, state, visible), countOf(c.Queue, store.Cancelled, 0), 1); err != nil {
				return err
			}
			out = append(out, c)
		}
		cancelled := make([]int64, len(out))
		for i, c := range out {
			cancelled[i] = c.ID
		}
		if err := resolveCancelled(ctx, tx, cancelled, now); err != nil {
			return err
		}
		return followCancelled(ctx, tx, out, hook)
	})
	if err != nil {
		return nil, sqlitefile.ClassifyWriteError(err)
	}
	return out, nil
}

// followCancelled asks hook (when non-nil) for the follow-up of each job of
// cs and inserts it on tx; one whose key or uniqueness a live job holds is
// not inserted (FollowUpID 0).
func followCancelled(ctx context.Context, tx Execer, cs []store.CancelledJob, hook store.CancelHook) error {
	if hook == nil {
		return nil
	}
	for i := range cs {
		c := &cs[i]
		c.FollowUp, c.FollowUpID = hook(*c), 0
		if c.FollowUp == nil {
			continue
		}
		id, err := insertOne(ctx, tx, c.FollowUp, nil)
		switch {
		case errors.Is(err, store.ErrDuplicate):
		case err != nil:
			return fmt.Errorf("follow-up of cancelled job %d: %w", c.ID, err)
		default:
			c.FollowUpID = id
		}
	}
	return nil
}

// WhichCancelled implements store.Runtime with one statement.
func (s *Store) WhichCancelled(ctx context.Context, leases []store.Lease) ([]int, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids := idsJSON(func() []int64 {
		v := make([]int64, len(leases))
		for i, l := range leases {
			v[i] = l.ID
		}
		return v
	}())
	rows, err := s.db.QueryContext(ctx, `SELECT id, lease FROM lq_jobs
		WHERE id IN (SELECT value FROM json_each(?)) AND state = 4 AND lease IS NOT NULL`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cancelled := map[store.Lease]bool{}
	for rows.Next() {
		var l store.Lease
		if err := rows.Scan(&l.ID, &l.Lease); err != nil {
			return nil, err
		}
		cancelled[l] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []int
	for i, l := range leases {
		if cancelled[l] {
			out = append(out, i)
		}
	}
	return out, nil
}

// PurgeCancelled implements store.Admin.
func (s *Store) PurgeCancelled(ctx context.Context, before int64) (int, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	var n int
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		if _, err := tx.ExecContext(ctx, purgeCancelledEdgesSQL, before); err != nil {
			return err
		}
		n, err = execCounted(ctx, tx, `DELETE FROM lq_jobs WHERE state = 4 AND finished_at < ? RETURNING queue, state, visible_at`, gone, before)
		return err
	})
	return n, sqlitefile.ClassifyWriteError(err)
}

const snoozeSQL = `UPDATE lq_jobs SET state = 0, visible_at = ?1, lease = NULL, attempt = max(attempt - 1, 0), snoozes = snoozes + 1
	WHERE id = ?2 AND lease = ?3 AND state = 1 AND snoozes < ?4 RETURNING queue, state, visible_at`

// Snooze implements store.Runtime.
func (s *Store) Snooze(ctx context.Context, sn store.Snooze) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		n, err := execCounted(ctx, tx, snoozeSQL, fromRunning, sn.Due, sn.ID, sn.Lease.Lease, sn.Max)
		if err != nil {
			return err
		}
		if n == 0 {
			var holds int
			err := tx.QueryRowContext(ctx, `SELECT count(*) FROM lq_jobs WHERE id = ? AND lease = ? AND state = 1`, sn.ID, sn.Lease.Lease).Scan(&holds)
			if err != nil {
				return err
			}
			if holds == 1 {
				return fmt.Errorf("litequeue: snooze job %d: %w (%d)", sn.ID, store.ErrSnoozeLimit, sn.Max)
			}
			return store.ErrLeaseLost
		}
		return insertAttempt(ctx, tx, sn.ID, sn.Record)
	})
	return sqlitefile.ClassifyWriteError(err)
}

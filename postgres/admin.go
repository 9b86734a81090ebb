package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// Jobs implements store.Admin.
func (s *pgStore) Jobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	var a args
	var where []string
	if f.Queue != "" {
		where = append(where, "queue = "+a.add(f.Queue))
	}
	if f.Kind != "" {
		where = append(where, "kind = "+a.add(f.Kind))
	}
	if f.Group != "" {
		where = append(where, "grp = "+a.add(f.Group))
	}
	if len(f.States) > 0 {
		var ors []string
		for _, st := range f.States {
			switch st {
			case store.ListReady:
				ors = append(ors, "(state = 0 AND visible_at <= "+a.add(f.Now)+")")
			case store.ListScheduled:
				ors = append(ors, "(state = 0 AND visible_at > "+a.add(f.Now)+")")
			case store.ListRunning:
				ors = append(ors, "state = 1")
			case store.ListCompleted:
				ors = append(ors, "state = 2")
			case store.ListDead:
				ors = append(ors, "state = 3")
			case store.ListDead + 1: // cancelled
				ors = append(ors, "state = 4")
			case store.ListWaiting:
				ors = append(ors, "state = 5")
			default:
				return nil, fmt.Errorf("litequeue: unknown list state %d", st)
			}
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if c := f.After; c != nil {
		if f.Order == store.NextDue {
			where = append(where, "(visible_at, priority, id) > ("+a.add(c.Due)+", "+a.add(c.Priority)+", "+a.add(c.ID)+")")
		} else {
			where = append(where, "id < "+a.add(c.ID))
		}
	}
	query := "SELECT " + jobColumns + " FROM lq_jobs "
	if len(where) > 0 {
		query += "WHERE " + strings.Join(where, " AND ")
	}
	switch f.Order {
	case store.NextDue:
		query += " ORDER BY visible_at, priority, id"
	default:
		query += " ORDER BY id DESC"
	}
	if f.Limit > 0 {
		query += " LIMIT " + a.add(f.Limit)
	}
	if f.Offset > 0 {
		query += " OFFSET " + a.add(f.Offset)
	}
	out, err := readAll(s, ctx, s.q(query), a, func(rows *sql.Rows, j *store.Job) error {
		var err error
		*j, err = scanJob(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("litequeue: list jobs: %w", err)
	}
	return out, nil
}

// Job implements store.Admin.
func (s *pgStore) Job(ctx context.Context, id int64) (store.Job, []store.Attempt, error) {
	var j store.Job
	var as []store.Attempt
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = scanJob(tx.QueryRowContext(ctx, s.q("SELECT "+jobColumns+" FROM lq_jobs WHERE id = $1"), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("litequeue: job %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var proc sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.q("SELECT process FROM lq_jobs WHERE id = $1"), id).Scan(&proc); err != nil {
			return err
		}
		j.Process = proc.Int64
		as, err = sqlkit.QueryAll(ctx, tx, s.q(attemptsSQL), []any{id}, func(rows *sql.Rows, at *store.Attempt) error {
			return rows.Scan(&at.Attempt, &at.StartedAt, &at.FinishedAt, &at.Error, &at.Decision, &at.Delay,
				&at.Process, &at.Host, &at.PID)
		})
		return err
	})
	if err != nil {
		return store.Job{}, nil, err
	}
	return j, as, nil
}

// locked is one row an admin operation locked.
type locked struct {
	state int16
	queue string
	kind  string
	key   sql.NullString
}

// lockRows locks the rows of ids for an admin operation's transaction.
func (s *pgStore) lockRows(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]locked, error) {
	rows, err := tx.QueryContext(ctx, s.q(lockForAdminSQL), ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[int64]locked{}
	for rows.Next() {
		var id int64
		var l locked
		if err := rows.Scan(&id, &l.state, &l.queue, &l.kind, &l.key); err != nil {
			return nil, err
		}
		m[id] = l
	}
	return m, rows.Err()
}

// Requeue implements store.Admin.
func (s *pgStore) Requeue(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return s.requeueFrom(ctx, ids, now, 3)
}

// RequeueCancelled implements store.Dashboard.
func (s *pgStore) RequeueCancelled(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return s.requeueFrom(ctx, ids, now, 4)
}

// requeueFrom makes the rows of state from pending, as Requeue does for
// dead ones (from 3).
func (s *pgStore) requeueFrom(ctx context.Context, ids []int64, now int64, from int16) ([]store.Moved, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var moved []store.Moved
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		moved = moved[:0]
		m, err := s.lockRows(ctx, tx, ids)
		if err != nil {
			return err
		}
		var keys []string
		keyOwner := map[string]int64{}
		for _, id := range ids {
			l, ok := m[id]
			switch {
			case !ok:
				return fmt.Errorf("litequeue: requeue job %d: %w", id, store.ErrNotFound)
			case l.state != from:
				return fmt.Errorf("litequeue: requeue job %d: it is %s, not %s: %w", id, stateWord(l.state), stateWord(from), store.ErrWrongState)
			}
			if l.key.Valid {
				if other, ok := keyOwner[l.key.String]; ok && other != id {
					return fmt.Errorf("litequeue: requeue job %d: %w", id, &store.DuplicateError{Key: l.key.String, ID: other})
				}
				keyOwner[l.key.String] = id
				keys = append(keys, l.key.String)
			}
		}
		if len(keys) > 0 {
			rows, err := tx.QueryContext(ctx, s.q(liveHoldersSQL), keys)
			if err != nil {
				return err
			}
			holders := map[string]int64{}
			for rows.Next() {
				var k string
				var h int64
				if err := rows.Scan(&k, &h); err != nil {
					rows.Close()
					return err
				}
				holders[k] = h
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, id := range ids {
				if l := m[id]; l.key.Valid {
					if h, ok := holders[l.key.String]; ok {
						return fmt.Errorf("litequeue: requeue job %d: %w", id, &store.DuplicateError{Key: l.key.String, ID: h})
					}
				}
			}
		}
		for _, id := range ids {
			if err := s.uniqueTwin(ctx, tx, id); err != nil {
				return fmt.Errorf("litequeue: requeue job %d: %w", id, err)
			}
		}
		if from == 4 {
			// A workflow's dependant that a failed parent blocks stays
			// cancelled: the requeue is refused.
			var child, parent int64
			err := tx.QueryRowContext(ctx, s.q(requeueBlockedSQL), ids).Scan(&child, &parent)
			if err == nil {
				return &store.ParentFailedError{ID: child, Parent: parent}
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(requeueSQL), now, ids, from); err != nil {
			return err
		}
		if from == 4 {
			// A workflow's dependant waits again for its parents that
			// have not finished.
			if _, err := tx.ExecContext(ctx, s.q(requeueWaitSQL), ids); err != nil {
				return err
			}
		}
		// Workflows' parents: the dependants their deaths (or cancels)
		// cancelled wait again.
		if _, err := tx.ExecContext(ctx, s.q(flowReviveSQL), ids); err != nil {
			return err
		}
		seen := map[int64]bool{}
		queues := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			l := m[id]
			moved = append(moved, store.Moved{ID: id, Queue: l.queue, Kind: l.kind})
			queues[l.queue] = true
		}
		if err := s.keepDeadErrors(ctx, tx, moved); err != nil {
			return err
		}
		return s.notifyTx(ctx, tx, queues)
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
}

// Stats implements store.Admin.
func (s *pgStore) Stats(ctx context.Context, now int64) ([]store.QueueStats, error) {
	out, err := readAll(s, ctx, s.q(statsSQL), []any{now}, func(rows *sql.Rows, st *store.QueueStats) error {
		var oldest, next sql.NullInt64
		var cancelled int
		if err := rows.Scan(&st.Queue, &st.Ready, &st.Scheduled, &st.Running, &st.Completed, &st.Dead, &oldest, &next, &cancelled, &st.Waiting); err != nil {
			return err
		}
		setCancelled(st, cancelled)
		st.OldestReadySince, st.NextDue = oldest.Int64, next.Int64
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("litequeue: stats: %w", err)
	}
	return out, nil
}

func setCancelled(st *store.QueueStats, n int) { st.Cancelled = n }

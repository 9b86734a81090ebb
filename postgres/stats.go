package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/litequeue/litequeue/internal/store"
)

// Stats reads lq_counts and the deltas not yet folded into it (migration
// 0004) for the rows of each queue by state: pending rows by due bucket,
// ready when their bucket ends by now, scheduled when it starts after now.
// Only the rows of the bucket holding now are read, with a walk of
// lq_jobs_kind_due per (priority, kind) of the queue, as are the oldest
// ready and the next scheduled row: the cost grows with the number of
// (priority, kind) pairs, the rows due within the rest of the current
// bucket (at most 2^38 ns, about 4.6 minutes), the running rows and the
// deltas not yet folded (about a hundred write statements' worth), not with
// the ready, scheduled, finished or dead rows.

// dueShift is the span of a due bucket, as migration 0004 counts them.
const dueShift = 38

// statsCountsSQL sums the counts and the deltas, by queue, state and due
// bucket.
const statsCountsSQL = `SELECT queue, state, due, sum(n) FROM (
    SELECT queue, state, due, n FROM lq_counts
    UNION ALL SELECT queue, state, due, n FROM lq_count_deltas ) c
GROUP BY queue, state, due HAVING sum(n) <> 0 ORDER BY queue, state, due`

// statsFirstGroupSQL is the first (priority, kind) of queue $1's live rows:
// one seek of lq_jobs_kind_due.
const statsFirstGroupSQL = `SELECT priority, kind FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
ORDER BY priority, kind LIMIT 1`

// statsNextGroupSQL is the first (priority, kind) after ($2, $3): the next
// kind of priority $2, else the first of the next priority, one seek each.
const statsNextGroupSQL = `(SELECT priority, kind FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
    AND priority = $2 AND kind > $3 ORDER BY priority, kind LIMIT 1)
UNION ALL (SELECT priority, kind FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
    AND priority > $2 ORDER BY priority, kind LIMIT 1)
LIMIT 1`

// statsLaterSQL counts the pending rows of one (queue, priority, kind) range
// due after $4 and by $5 (the end of the due bucket holding $4).
const statsLaterSQL = `SELECT count(*) FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
    AND priority = $2 AND kind = $3 AND visible_at > $4 AND visible_at <= $5 AND state = 0`

// statsNextSQL is the earliest visibility of the range's pending rows due
// after $4, stepping only over running rows (visible_at: their lease's end).
const statsNextSQL = `SELECT visible_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
    AND priority = $2 AND kind = $3 AND visible_at > $4 AND state = 0 ORDER BY visible_at LIMIT 1`

// statsOldestSQL is the earliest visibility of the range's pending rows due
// at $4, stepping only over running rows whose lease lapsed.
const statsOldestSQL = `SELECT visible_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)
    AND priority = $2 AND kind = $3 AND visible_at <= $4 AND state = 0 ORDER BY visible_at LIMIT 1`

// Stats implements store.Admin, in one snapshot.
func (s *pgStore) Stats(ctx context.Context, now int64) ([]store.QueueStats, error) {
	var out []store.QueueStats
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.stats(ctx, tx, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("litequeue: stats: %w", err)
	}
	return out, nil
}

func (s *pgStore) stats(ctx context.Context, tx *sql.Tx, now int64) ([]store.QueueStats, error) {
	rows, err := tx.QueryContext(ctx, s.q(statsCountsSQL))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	nowDue := now >> dueShift
	var out []store.QueueStats
	var current []int // per queue of out: its pending rows in the bucket holding now
	for rows.Next() {
		var queue string
		var st store.State
		var due int64
		var n int
		if err := rows.Scan(&queue, &st, &due, &n); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, store.QueueStats{Queue: queue})
			current = append(current, 0)
		}
		q := &out[len(out)-1]
		switch st {
		case store.Pending:
			switch {
			case due < nowDue:
				q.Ready += n
			case due > nowDue:
				q.Scheduled += n
			default:
				current[len(current)-1] += n
			}
		case store.Running:
			q.Running = n
		case store.Completed:
			q.Completed = n
		case store.Dead:
			q.Dead = n
		case store.Cancelled:
			setCancelled(q, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Ready+out[i].Scheduled+current[i] == 0 {
			continue
		}
		if err := s.splitCurrent(ctx, tx, &out[i], current[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitCurrent adds the current pending rows of q (those of the due bucket
// holding now) to Ready or Scheduled, and sets OldestReadySince and
// NextDue, one (priority, kind) range at a time.
func (s *pgStore) splitCurrent(ctx context.Context, tx *sql.Tx, q *store.QueueStats, current int, now int64) error {
	end := int64(math.MaxInt64)
	if b := now >> dueShift; b < math.MaxInt64>>dueShift {
		end = (b+1)<<dueShift - 1
	}
	q.Ready += current
	var prio int64
	var kind string
	err := tx.QueryRowContext(ctx, s.q(statsFirstGroupSQL), q.Queue).Scan(&prio, &kind)
	for ; err == nil; err = tx.QueryRowContext(ctx, s.q(statsNextGroupSQL), q.Queue, prio, kind).Scan(&prio, &kind) {
		if current > 0 {
			var later int
			if err := tx.QueryRowContext(ctx, s.q(statsLaterSQL), q.Queue, prio, kind, now, end).Scan(&later); err != nil {
				return err
			}
			q.Ready -= later
			q.Scheduled += later
		}
		if err := earliest(ctx, tx, s.q(statsNextSQL), &q.NextDue, q.Queue, prio, kind, now); err != nil {
			return err
		}
		if err := earliest(ctx, tx, s.q(statsOldestSQL), &q.OldestReadySince, q.Queue, prio, kind, now); err != nil {
			return err
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

// earliest lowers *at (0: none yet) to the visibility query answers, if
// any.
func earliest(ctx context.Context, tx *sql.Tx, query string, at *int64, args ...any) error {
	var v int64
	switch err := tx.QueryRowContext(ctx, query, args...).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case *at == 0 || v < *at:
		*at = v
	}
	return nil
}

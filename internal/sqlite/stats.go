package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/litequeue/litequeue/internal/store"
)

// Stats reads lq_counts (counts.go) for the rows of each queue by state and
// splits a queue's pending rows into ready and scheduled at now with a walk
// of lq_jobs_kind_due: its cost grows with the number of (priority, kind)
// pairs of the queue's live rows, with its rows due after now and with its
// running rows, not with its ready, finished or dead rows.

// statsCountsSQL reads every count, by queue.
const statsCountsSQL = `SELECT queue, state, n FROM lq_counts WHERE n <> 0 ORDER BY queue, state`

// statsFirstGroupSQL is the first (priority, kind) of queue ?1's live rows:
// one seek of lq_jobs_kind_due.
const statsFirstGroupSQL = `SELECT priority, kind FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	ORDER BY priority, kind LIMIT 1`

// statsNextGroupSQL is the first (priority, kind) of queue ?1's live rows
// after (?2, ?3): one seek of lq_jobs_kind_due.
const statsNextGroupSQL = `SELECT priority, kind FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND (priority, kind) > (?2, ?3) ORDER BY priority, kind LIMIT 1`

// statsLaterSQL counts the pending rows of one (queue, priority, kind) range
// of lq_jobs_kind_due that are due after ?4, and the earliest of them.
const statsLaterSQL = `SELECT count(*), min(visible_at) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority = ?2 AND kind = ?3 AND visible_at > ?4 AND state = 0`

// statsOldestSQL is the earliest visibility of the range's pending rows due
// at ?4: the range in due order, stepping only over running rows whose lease
// lapsed.
const statsOldestSQL = `SELECT visible_at FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority = ?2 AND kind = ?3 AND visible_at <= ?4 AND state = 0 ORDER BY visible_at LIMIT 1`

// Stats implements store.Admin, in one snapshot. Queues whose counts are
// all 0 are left out, as a queue without rows.
func (s *Store) Stats(ctx context.Context, now int64) ([]store.QueueStats, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, statsCountsSQL)
	if err != nil {
		return nil, err
	}
	var out []store.QueueStats
	for rows.Next() {
		var queue string
		var st store.State
		var n int
		if err := rows.Scan(&queue, &st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, store.QueueStats{Queue: queue})
		}
		q := &out[len(out)-1]
		switch st {
		case store.Pending:
			q.Ready = n // split below
		case store.Running:
			q.Running = n
		case store.Completed:
			q.Completed = n
		case store.Dead:
			q.Dead = n
		case store.Cancelled:
			q.Cancelled = n
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Ready == 0 {
			continue
		}
		if err := splitPending(ctx, tx, &out[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitPending moves q's pending rows due after now from Ready to
// Scheduled and sets OldestReadySince and NextDue, one (priority, kind)
// range at a time.
func splitPending(ctx context.Context, tx *sql.Tx, q *store.QueueStats, now int64) error {
	var prio int64
	var kind string
	err := tx.QueryRowContext(ctx, statsFirstGroupSQL, q.Queue).Scan(&prio, &kind)
	for ; err == nil; err = tx.QueryRowContext(ctx, statsNextGroupSQL, q.Queue, prio, kind).Scan(&prio, &kind) {
		var later int
		var next sql.NullInt64
		if err := tx.QueryRowContext(ctx, statsLaterSQL, q.Queue, prio, kind, now).Scan(&later, &next); err != nil {
			return err
		}
		q.Ready -= later
		q.Scheduled += later
		if next.Valid && (q.NextDue == 0 || next.Int64 < q.NextDue) {
			q.NextDue = next.Int64
		}
		var oldest int64
		switch err := tx.QueryRowContext(ctx, statsOldestSQL, q.Queue, prio, kind, now).Scan(&oldest); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case q.OldestReadySince == 0 || oldest < q.OldestReadySince:
			q.OldestReadySince = oldest
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

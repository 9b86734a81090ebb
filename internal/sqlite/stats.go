package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// Stats reads lq_counts (counts.go) for the rows of each queue by state:
// pending rows by due bucket, ready when their bucket ends by now,
// scheduled when it starts after now. Only the rows of the bucket holding
// now are read, with a walk of lq_jobs_kind_due per (priority, kind) of the
// queue, as are the oldest ready and the next scheduled row: the cost grows
// with the number of (priority, kind) pairs, the rows due within the rest
// of the current bucket (at most 2^38 ns, about 4.6 minutes) and the
// running rows, not with the ready, scheduled, finished or dead rows.

// statsCountsSQL reads every count, by queue.
const statsCountsSQL = `SELECT queue, state, due, n FROM lq_counts WHERE n <> 0 ORDER BY queue, state, due`

// statsFirstGroupSQL is the first (priority, kind) of queue ?1's live rows:
// one seek of lq_jobs_kind_due.
const statsFirstGroupSQL = `SELECT priority, kind FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	ORDER BY priority, kind LIMIT 1`

// statsNextGroupSQL is the first (priority, kind) of queue ?1's live rows
// after (?2, ?3): the next kind of priority ?2, else the first of the next
// priority, each one seek of lq_jobs_kind_due (a row value (priority, kind)
// > (?2, ?3) would step over every row of (?2, ?3)).
const statsNextGroupSQL = `SELECT * FROM (SELECT priority, kind FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority = ?2 AND kind > ?3 ORDER BY kind LIMIT 1)
UNION ALL SELECT * FROM (SELECT priority, kind FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority > ?2 ORDER BY priority, kind LIMIT 1)
LIMIT 1`

// statsLaterSQL counts the pending rows of one (queue, priority, kind) range
// of lq_jobs_kind_due that are due after ?4 and by ?5 (the end of the due
// bucket holding ?4).
const statsLaterSQL = `SELECT count(*) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority = ?2 AND kind = ?3 AND visible_at > ?4 AND visible_at <= ?5 AND state = 0`

// statsNextSQL is the earliest visibility of the range's pending rows due
// after ?4: the range in due order from ?4, stepping only over running rows
// (whose visible_at is their lease's end).
const statsNextSQL = `SELECT visible_at FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1)
	AND priority = ?2 AND kind = ?3 AND visible_at > ?4 AND state = 0 ORDER BY visible_at LIMIT 1`

// countsVersion is the schema version that added lq_counts.
const countsVersion = 10

// Stats implements store.Admin, in one snapshot.
func (s *Store) Stats(ctx context.Context, now int64) ([]store.QueueStats, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if s.w == nil {
		v, _, err := sqlitefile.Identify(ctx, tx)
		if err != nil {
			return nil, err
		}
		if v < countsVersion {
			return statsScan(ctx, tx, now)
		}
	}
	rows, err := tx.QueryContext(ctx, statsCountsSQL)
	if err != nil {
		return nil, err
	}
	nowDue := dueBucket(now)
	var out []store.QueueStats
	var current []int // per queue of out: its pending rows in the bucket holding now
	for rows.Next() {
		var queue string
		var st store.State
		var due int64
		var n int
		if err := rows.Scan(&queue, &st, &due, &n); err != nil {
			rows.Close()
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
			q.Cancelled = n
		case store.Waiting:
			q.Waiting = n
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
		if out[i].Ready+out[i].Scheduled+current[i] == 0 {
			continue
		}
		if err := splitCurrent(ctx, tx, &out[i], current[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dueEnd is the last visibility of the due bucket holding now.
func dueEnd(now int64) int64 {
	b := dueBucket(now)
	if b == dueBucket(math.MaxInt64) {
		return math.MaxInt64
	}
	return (b+1)<<dueShift - 1
}

// splitCurrent adds the current pending rows of q (those of the due bucket
// holding now) to Ready or Scheduled, and sets OldestReadySince and
// NextDue, one (priority, kind) range at a time.
func splitCurrent(ctx context.Context, tx *sql.Tx, q *store.QueueStats, current int, now int64) error {
	end := dueEnd(now)
	q.Ready += current
	// The oldest ready row, as QueueSummaries finds it (oldest.go): past
	// lapsed running rows only as far as the oldest found.
	oldest := store.QueueSummary{Queue: q.Queue}
	var rest []oldestRange
	var prio int64
	var kind string
	err := tx.QueryRowContext(ctx, statsFirstGroupSQL, q.Queue).Scan(&prio, &kind)
	for ; err == nil; err = tx.QueryRowContext(ctx, statsNextGroupSQL, q.Queue, prio, kind).Scan(&prio, &kind) {
		if current > 0 {
			var later int
			if err := tx.QueryRowContext(ctx, statsLaterSQL, q.Queue, prio, kind, now, end).Scan(&later); err != nil {
				return err
			}
			q.Ready -= later
			q.Scheduled += later
		}
		if err := earliest(ctx, tx, statsNextSQL, &q.NextDue, q.Queue, prio, kind, now); err != nil {
			return err
		}
		from, done, err := oldestHead(ctx, tx, &oldest, prio, kind, now)
		if err != nil {
			return err
		}
		if !done {
			rest = append(rest, oldestRange{prio, kind, from})
		}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err := oldestRest(ctx, tx, &oldest, rest, now); err != nil {
		return err
	}
	if oldest.OldestReadyID != 0 {
		q.OldestReadySince = oldest.OldestReadyAt
	}
	return nil
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

// statsScan is Stats on a file of a schema before lq_counts (opened
// read-only, so not migrated): it counts every row.
func statsScan(ctx context.Context, tx *sql.Tx, now int64) ([]store.QueueStats, error) {
	rows, err := tx.QueryContext(ctx, `SELECT queue,
		sum(state = 0 AND visible_at <= :now), sum(state = 0 AND visible_at > :now),
		sum(state = 1), sum(state = 2), sum(state = 3), sum(state = 4),
		min(CASE WHEN state = 0 AND visible_at <= :now THEN visible_at END),
		min(CASE WHEN state = 0 AND visible_at > :now THEN visible_at END)
		FROM lq_jobs GROUP BY queue ORDER BY queue`, sql.Named("now", now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueueStats
	for rows.Next() {
		var st store.QueueStats
		var oldest, next sql.NullInt64
		if err := rows.Scan(&st.Queue, &st.Ready, &st.Scheduled, &st.Running, &st.Completed, &st.Dead, &st.Cancelled, &oldest, &next); err != nil {
			return nil, err
		}
		st.OldestReadySince, st.NextDue = oldest.Int64, next.Int64
		out = append(out, st)
	}
	return out, rows.Err()
}

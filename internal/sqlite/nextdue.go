package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
)

// A page of live jobs in next-due order (visible_at, priority, id) is the
// merge of ranges of the claim index lq_jobs_kind_due (queue, priority,
// kind, visible_at) WHERE state IN (0, 1) (migration 0009): within one
// queue, priority and kind the index holds the rows in visible_at, id
// order, so each (queue, priority, kind) gives its first rows after the
// cursor by an index range, and the merge of those few sorts no table. At
// a million pending jobs this reads a page in milliseconds where ORDER BY
// visible_at sorted every live row.

// liveOnly reports whether states name only live listing states (ready,
// scheduled, running), the rows of the claim index; none is not live.
func liveOnly(states []store.ListState) bool {
	if len(states) == 0 {
		return false
	}
	for _, st := range states {
		if st != store.ListReady && st != store.ListScheduled && st != store.ListRunning {
			return false
		}
	}
	return true
}

// nextRangeSQL finds the next (queue, priority, kind) of live rows after
// (?1, ?2, ?3): the next kind of the priority, else the first of the next
// priority, else the first of the next queue, each one seek of the claim
// index (a row value (queue, priority, kind) > (...) would step over every
// row of the queue).
const nextRangeSQL = `SELECT * FROM (SELECT queue, priority, kind FROM lq_jobs WHERE state IN (0, 1)
	AND queue = ?1 AND priority = ?2 AND kind > ?3 ORDER BY kind LIMIT 1)
UNION ALL SELECT * FROM (SELECT queue, priority, kind FROM lq_jobs WHERE state IN (0, 1)
	AND queue = ?1 AND priority > ?2 ORDER BY priority, kind LIMIT 1)
UNION ALL SELECT * FROM (SELECT queue, priority, kind FROM lq_jobs WHERE state IN (0, 1)
	AND queue > ?1 ORDER BY queue, priority, kind LIMIT 1)
LIMIT 1`

// firstRangeSQL finds the first (queue, priority, kind) of live rows.
const firstRangeSQL = `SELECT queue, priority, kind FROM lq_jobs WHERE state IN (0, 1)
	ORDER BY queue, priority, kind LIMIT 1`

// firstQueueRangeSQL finds the first (queue, priority, kind) of queue ?'s
// live rows.
const firstQueueRangeSQL = `SELECT queue, priority, kind FROM lq_jobs WHERE state IN (0, 1) AND queue = ?
	ORDER BY queue, priority, kind LIMIT 1`

// nextDueLive lists the page f selects (f.Order NextDue, f.Limit > 0,
// f.States live only) by merging claim index ranges in one read
// transaction.
func (s *Store) nextDueLive(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	type rng struct {
		queue, kind string
		prio        int
	}
	var ranges []rng
	var r rng
	row := tx.QueryRowContext(ctx, firstRangeSQL)
	if f.Queue != "" {
		row = tx.QueryRowContext(ctx, firstQueueRangeSQL, f.Queue)
	}
	for {
		err := row.Scan(&r.queue, &r.prio, &r.kind)
		if errors.Is(err, sql.ErrNoRows) || (f.Queue != "" && r.queue != f.Queue) {
			break
		}
		if err != nil {
			return nil, err
		}
		if f.Kind == "" || r.kind == f.Kind {
			ranges = append(ranges, r)
		}
		row = tx.QueryRowContext(ctx, nextRangeSQL, r.queue, r.prio, r.kind)
	}

	need := f.Limit + max(f.Offset, 0)
	var out []store.Job
	for _, r := range ranges {
		query := nextDuePageSQL(s.jobColumns(), f, r.prio)
		args := []any{sql.Named("now", f.Now), sql.Named("queue", r.queue), sql.Named("prio", r.prio),
			sql.Named("kind", r.kind), sql.Named("limit", need)}
		if c := f.After; c != nil {
			args = append(args, sql.Named("due", c.Due), sql.Named("id", c.ID))
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			j, err := ScanJob(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, j)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b store.Job) int {
		return cmp.Or(cmp.Compare(a.VisibleAt, b.VisibleAt), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.ID, b.ID))
	})
	out = out[min(max(f.Offset, 0), len(out)):]
	return out[:min(f.Limit, len(out))], nil
}

// nextDuePageSQL selects columns of the first :limit rows after f.After of
// one queue :queue, priority prio (:prio) and kind :kind in f's states, in
// visible_at, id order: one range of the claim index.
func nextDuePageSQL(columns string, f store.JobFilter, prio int) string {
	var ors []string
	for _, st := range f.States {
		ors = append(ors, StateSQL(st))
	}
	query := "SELECT " + columns + " FROM lq_jobs WHERE state IN (0, 1) AND queue = :queue AND priority = :prio AND kind = :kind AND (" +
		strings.Join(ors, " OR ") + ")"
	if c := f.After; c != nil {
		switch {
		case prio > c.Priority:
			query += " AND visible_at >= :due"
		case prio < c.Priority:
			query += " AND visible_at > :due"
		default:
			query += " AND (visible_at, id) > (:due, :id)"
		}
	}
	return query + " ORDER BY visible_at, id LIMIT :limit"
}

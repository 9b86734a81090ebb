// Package sqlkit is what the backends on database/sql (internal/sqlite,
// postgres) share: reading rows into the seam's types, and the schedule
// writes (the rules of store.Schedules) over each backend's statements. The
// seam itself (internal/store) holds no SQL.
package sqlkit

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/store"
)

// Querier is what both backends' reads run on: a *sql.DB, a *sql.Tx, or the
// SQLite store's writer transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query on db and returns every row, each read by scan. It
// closes the rows; an error from the query, a scan or the iteration ends it
// with no rows.
func QueryAll[T any](ctx context.Context, db Querier, query string, args []any, scan func(*sql.Rows, *T) error) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ScanID reads a row of one integer column, such as an id.
func ScanID(rows *sql.Rows, id *int64) error { return rows.Scan(id) }

// ScanDeadMessage reads a row of (id, queue, kind, finished_at, message).
func ScanDeadMessage(rows *sql.Rows, m *store.DeadMessage) error {
	return rows.Scan(&m.ID, &m.Queue, &m.Kind, &m.FinishedAt, &m.Message)
}

// ScanHistoryCount reads a row of (queue, minute, enqueued, succeeded,
// retried, dead).
func ScanHistoryCount(rows *sql.Rows, c *store.HistoryCount) error {
	return rows.Scan(&c.Queue, &c.Minute, &c.Enqueued, &c.Succeeded, &c.Retried, &c.Dead)
}

// pausedAt is one row of the paused queues.
type pausedAt struct {
	queue string
	at    int64
}

// QueryPaused runs query, which selects (queue, paused_at) of the paused
// queues, and returns paused_at by queue.
func QueryPaused(ctx context.Context, db Querier, query string) (map[string]int64, error) {
	rows, err := QueryAll(ctx, db, query, nil, func(r *sql.Rows, p *pausedAt) error { return r.Scan(&p.queue, &p.at) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, p := range rows {
		out[p.queue] = p.at
	}
	return out, nil
}

// AddFinished runs query, which counts the newest limit rows of state st
// (Completed or Dead) per queue as (queue, count) rows, and sets each
// queue's count of st in m. When the counts reach limit in all, every summary's
// count of st is marked capped: it may be more.
func AddFinished(ctx context.Context, m store.Summaries, db Querier, st store.State, limit int, query string, args ...any) error {
	type count struct {
		queue string
		n     int
	}
	counts, err := QueryAll(ctx, db, query, args, func(r *sql.Rows, c *count) error { return r.Scan(&c.queue, &c.n) })
	if err != nil {
		return err
	}
	total := 0
	for _, c := range counts {
		total += c.n
		if st == store.Completed {
			m.Get(c.queue).Completed = c.n
		} else {
			m.Get(c.queue).Dead = c.n
		}
	}
	if total >= limit {
		for _, sum := range m {
			if st == store.Completed {
				sum.CompletedCapped = true
			} else {
				sum.DeadCapped = true
			}
		}
	}
	return nil
}

// ScanCancelled reads a row of (id, queue, kind, payload, attempt,
// priority, key (empty for none), created_at): a row a bulk cancel cancelled.
func ScanCancelled(rows *sql.Rows, c *store.CancelledJob) error {
	return rows.Scan(&c.ID, &c.Queue, &c.Kind, &c.Payload, &c.Attempt, &c.Priority, &c.Key, &c.CreatedAt)
}

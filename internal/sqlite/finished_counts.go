package sqlite

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// cancelledCountSQL counts the latest cancelled rows by queue through the
// partial index of cancelled rows (its WHERE is the index's own).
const cancelledCountSQL = `SELECT queue, count(*) FROM
	(SELECT queue FROM lq_jobs WHERE state = 4 ORDER BY finished_at DESC LIMIT ?) GROUP BY queue`

// FinishedCounts implements store.Dashboard.
func (s *Store) FinishedCounts(ctx context.Context, st store.State, limit int) (map[string]int, bool, error) {
	var query string
	switch st {
	case store.Completed:
		query = completedCountSQL
	case store.Dead:
		query = deadCountSQL
	case store.Cancelled:
		query = cancelledCountSQL
	default:
		return map[string]int{}, false, nil
	}
	return finishedCounts(ctx, s.db, query, limit)
}

// finishedCounts runs one of the count queries above and totals it.
func finishedCounts(ctx context.Context, db sqlkit.Querier, query string, limit int) (map[string]int, bool, error) {
	type count struct {
		queue string
		n     int
	}
	rows, err := sqlkit.QueryAll(ctx, db, query, []any{limit}, func(r *sql.Rows, c *count) error { return r.Scan(&c.queue, &c.n) })
	if err != nil {
		return nil, false, err
	}
	out := make(map[string]int, len(rows))
	total := 0
	for _, c := range rows {
		out[c.queue] = c.n
		total += c.n
	}
	return out, total >= limit, nil
}

package postgres

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// FinishedCounts implements store.Dashboard through the finished and
// cancelled indexes (finishedCountsSQL orders by finished_at within one
// state).
func (s *pgStore) FinishedCounts(ctx context.Context, st store.State, limit int) (map[string]int, bool, error) {
	out := map[string]int{}
	if st != store.Completed && st != store.Dead && st != store.Cancelled {
		return out, false, nil
	}
	total := 0
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		type count struct {
			queue string
			n     int
		}
		rows, err := sqlkit.QueryAll(ctx, tx, s.q(finishedCountsSQL), []any{int16(st), limit}, func(r *sql.Rows, c *count) error { return r.Scan(&c.queue, &c.n) })
		if err != nil {
			return err
		}
		clear(out)
		total = 0
		for _, c := range rows {
			out[c.queue] = c.n
			total += c.n
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, total >= limit, nil
}

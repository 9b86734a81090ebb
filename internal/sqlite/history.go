package sqlite

import (
	"context"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// The per-minute history of outcomes per queue, in lq_history (migration
// 0003).

const (
	addHistorySQL = `INSERT INTO lq_history (queue, minute, enqueued, succeeded, retried, dead)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (queue, minute) DO UPDATE SET
		enqueued = enqueued + excluded.enqueued, succeeded = succeeded + excluded.succeeded,
		retried = retried + excluded.retried, dead = dead + excluded.dead`
	pruneHistorySQL = `DELETE FROM lq_history WHERE minute < ?`
	// historySQL reads history rows from a minute on, through the minute
	// index.
	historySQL = `SELECT queue, minute, enqueued, succeeded, retried, dead FROM lq_history WHERE minute >= ?`
)

// noHistory maps the error of a file without lq_history (an older schema
// opened read-only) to store.ErrNoHistory.
func noHistory(err error) error {
	if err != nil && strings.Contains(err.Error(), "no such table: lq_history") {
		return store.ErrNoHistory
	}
	return err
}

// AddHistory implements store.Dashboard.
func (s *Store) AddHistory(ctx context.Context, counts []store.HistoryCount, pruneBefore int64) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		for _, c := range counts {
			if _, err := tx.ExecContext(ctx, addHistorySQL, c.Queue, c.Minute, c.Enqueued, c.Succeeded, c.Retried, c.Dead); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, pruneHistorySQL, pruneBefore)
		return err
	})
	if err := noHistory(err); err != nil {
		return sqlitefile.ClassifyWriteError(err)
	}
	return nil
}

// History implements store.Dashboard.
func (s *Store) History(ctx context.Context, queue string, since int64) ([]store.HistoryCount, error) {
	query := historySQL
	args := []any{since}
	if queue != "" {
		query += ` AND queue = ?`
		args = append(args, queue)
	}
	out, err := sqlkit.QueryAll(ctx, s.db, query+` ORDER BY minute, queue`, args, sqlkit.ScanHistoryCount)
	return out, noHistory(err)
}

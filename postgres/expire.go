package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// expiryWhere renders e's selection (state $1, queues $2).
func expiryWhere(e store.Expiry) (string, []any) {
	names, cond := e.Queues, "queue = ANY ($2)"
	if len(names) == 0 {
		names, cond = e.Except, "NOT (queue = ANY ($2))"
	}
	if names == nil {
		names = []string{}
	}
	return "state = $1 AND finished_at IS NOT NULL AND " + cond, []any{int16(e.State), names}
}

// Expire implements store.Admin.
func (s *pgStore) Expire(ctx context.Context, e store.Expiry) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	where, args := expiryWhere(e)
	query := fmt.Sprintf(deleteWithHistorySQL, `DELETE FROM lq_jobs WHERE id IN (SELECT id FROM lq_jobs WHERE `+where+
		` AND finished_at < $3 ORDER BY finished_at LIMIT $4) RETURNING id`)
	var n int
	err := s.db.QueryRowContext(ctx, s.q(query), append(args, e.Before, e.Limit)...).Scan(&n)
	return n, err
}

// OldestFinished implements store.Admin.
func (s *pgStore) OldestFinished(ctx context.Context, e store.Expiry) (int64, bool, error) {
	where, args := expiryWhere(e)
	at, err := readValue(s, ctx, func() (sql.NullInt64, error) {
		var at sql.NullInt64
		err := s.db.QueryRowContext(ctx, s.q(`SELECT min(finished_at) FROM lq_jobs WHERE `+where), args...).Scan(&at)
		return at, err
	})
	if err != nil || !at.Valid {
		return 0, false, err
	}
	return at.Int64, true, nil
}

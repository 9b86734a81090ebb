package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/litequeue/litequeue/internal/store"
)

// Reads of flow control (store.LimitsReader): why a job waits and what each
// group holds, computed from the stored jobs in one read-only transaction
// (the same statements as SQLite's internal/sqlite/limits_read.go).

const (
	// jobGroupSQL is the group of job $1.
	jobGroupSQL = `SELECT grp FROM lq_jobs WHERE id = $1`
	// countedSQL counts the running rows of queue $1 that a limited claim
	// started and whose lease has not lapsed at $2: a range of
	// lq_jobs_flow.
	countedSQL = `SELECT count(*) FROM lq_jobs WHERE queue = $1 AND state = 1 AND flow IS NOT NULL AND visible_at > $2`
	// countedGroupSQL is countedSQL for the group $3.
	countedGroupSQL = countedSQL + ` AND grp = $3`
	// startsSQL counts the starts of queue $1 after $2, with the earliest.
	startsSQL = `SELECT count(*), coalesce(min(at), 0) FROM lq_flow_starts WHERE queue = $1 AND at > $2`
	// startsGroupSQL is startsSQL for the group $3.
	startsGroupSQL = startsSQL + ` AND grp = $3`
	// groupHeadSQL is the first live row of group $2 of queue $1: one seek
	// of lq_jobs_group_live.
	groupHeadSQL = `SELECT id, state, visible_at, attempt FROM lq_jobs
		WHERE queue = $1 AND grp = $2 AND state IN (0, 1) AND grp IS NOT NULL ORDER BY id LIMIT 1`
	// nextGroupSQL is the first group of queue $1 with live rows after $2:
	// one seek of lq_jobs_group_live.
	nextGroupSQL = `SELECT grp FROM lq_jobs
		WHERE queue = $1 AND state IN (0, 1) AND grp IS NOT NULL AND grp > $2 ORDER BY grp LIMIT 1`
	// groupLiveSQL counts the live rows of group $2 of queue $1, at most
	// $3, a range of lq_jobs_group_live, with the
	// CreatedAt of the group's first pending row.
	groupLiveSQL = `SELECT count(*), coalesce((SELECT created_at FROM lq_jobs
			WHERE queue = $1 AND grp = $2 AND state IN (0, 1) AND grp IS NOT NULL AND state = 0 ORDER BY id LIMIT 1), 0)
		FROM (SELECT 1 FROM lq_jobs WHERE queue = $1 AND grp = $2 AND state IN (0, 1) AND grp IS NOT NULL ORDER BY id LIMIT $3) p`
	// groupMarkedSQL counts the running rows of group $2 of queue $1 that a
	// limited claim started, lapsed or not: a range of lq_jobs_flow.
	groupMarkedSQL = `SELECT count(*) FROM lq_jobs WHERE queue = $1 AND grp = $2 AND state = 1 AND flow IS NOT NULL`
)

// readTx runs fn in a read-only transaction, as a read (see read).
func readTx[T any](s *pgStore, ctx context.Context, fn func(tx *sql.Tx) (T, error)) (T, error) {
	return readValue(s, ctx, func() (T, error) {
		var zero T
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return zero, err
		}
		defer tx.Rollback()
		return fn(tx)
	})
}

// WaitFacts implements store.LimitsReader.
func (s *pgStore) WaitFacts(ctx context.Context, queue string, id, now int64) (store.WaitFacts, error) {
	return readTx(s, ctx, func(tx *sql.Tx) (store.WaitFacts, error) {
		var f store.WaitFacts
		err := scanLimits(tx.QueryRowContext(ctx, s.q(`SELECT `+limitsCols+` FROM lq_queues WHERE queue = $1`), queue), &f.Limits)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return f, err
		}
		var g sql.NullString
		if err := tx.QueryRowContext(ctx, s.q(jobGroupSQL), id).Scan(&g); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return f, err
		}
		f.Group = g.String
		if err := tx.QueryRowContext(ctx, s.q(countedSQL), queue, now).Scan(&f.Running); err != nil {
			return f, err
		}
		if f.Limits.RateN > 0 {
			if err := tx.QueryRowContext(ctx, s.q(startsSQL), queue, now-f.Limits.RatePer).Scan(&f.Starts, &f.FirstStart); err != nil {
				return f, err
			}
		}
		if !g.Valid {
			return f, nil
		}
		if err := tx.QueryRowContext(ctx, s.q(countedGroupSQL), queue, now, g.String).Scan(&f.GroupRunning); err != nil {
			return f, err
		}
		if f.Limits.KeyRateN > 0 {
			if err := tx.QueryRowContext(ctx, s.q(startsGroupSQL), queue, now-f.Limits.KeyRatePer, g.String).Scan(&f.GroupStarts, &f.GroupFirstStart); err != nil {
				return f, err
			}
		}
		f.Head, err = s.groupHead(ctx, tx, queue, g.String)
		return f, err
	})
}

// groupHead reads the first live row of group g of queue.
func (s *pgStore) groupHead(ctx context.Context, tx *sql.Tx, queue, g string) (store.GroupHead, error) {
	var h store.GroupHead
	err := tx.QueryRowContext(ctx, s.q(groupHeadSQL), queue, g).Scan(&h.ID, &h.State, &h.VisibleAt, &h.Attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.GroupHead{}, nil
	}
	return h, err
}

// Groups implements store.LimitsReader.
func (s *pgStore) Groups(ctx context.Context, queue, after string, limit int, now int64) ([]store.GroupRow, error) {
	return readTx(s, ctx, func(tx *sql.Tx) ([]store.GroupRow, error) {
		out := []store.GroupRow{}
		from := after
		for len(out) < limit {
			var g string
			err := tx.QueryRowContext(ctx, s.q(nextGroupSQL), queue, from).Scan(&g)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return nil, err
			}
			r := store.GroupRow{Group: g}
			if err := tx.QueryRowContext(ctx, s.q(countedGroupSQL), queue, now, g).Scan(&r.Running); err != nil {
				return nil, err
			}
			var live, marked int
			if err := tx.QueryRowContext(ctx, s.q(groupLiveSQL), queue, g, store.GroupCountCap+1).Scan(&live, &r.OldestPending); err != nil {
				return nil, err
			}
			if err := tx.QueryRowContext(ctx, s.q(groupMarkedSQL), queue, g).Scan(&marked); err != nil {
				return nil, err
			}
			r.Pending = max(live-marked, 0)
			if r.Head, err = s.groupHead(ctx, tx, queue, g); err != nil {
				return nil, err
			}
			out = append(out, r)
			from = g
		}
		return out, nil
	})
}

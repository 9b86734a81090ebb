package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// The reads and writes of the test kit (package litequeuetest): how busy
// the handled jobs are, and a job stored as already claimed.

// loadSQL counts, at :now, the live jobs of the handled pairs (a JSON array
// of [queue, kind]) that are ready or running, finds the earliest due time of
// their scheduled ones, and counts the live jobs of no handled pair.
const loadSQL = `WITH h(queue, kind) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:pairs))
SELECT
  count(*) FILTER (WHERE handled AND (state = 1 OR visible_at <= :now)),
  min(visible_at) FILTER (WHERE handled AND state = 0 AND visible_at > :now),
  count(*) FILTER (WHERE NOT handled)
FROM (SELECT state, visible_at, (queue, kind) IN (SELECT queue, kind FROM h) AS handled
      FROM lq_jobs WHERE state IN (0, 1))`

// LoadOf implements store.Testing.
func (s *Store) LoadOf(ctx context.Context, handled []store.Handled, now int64) (store.Load, error) {
	b := []byte{'['}
	for i, p := range handled {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "[%q,%q]", p.Queue, p.Kind)
	}
	b = append(b, ']')
	var l store.Load
	var next sql.NullInt64
	err := s.db.QueryRowContext(ctx, loadSQL, sql.Named("pairs", string(b)), sql.Named("now", now)).
		Scan(&l.Busy, &next, &l.Unhandled)
	if err != nil {
		return store.Load{}, err
	}
	l.Next, l.HasNext = next.Int64, next.Valid
	return l, nil
}

// claimRunningSQL makes the job just inserted a claimed one: running under
// a lease, at the given attempt.
const claimRunningSQL = `UPDATE lq_jobs SET state = 1, lease = ?1, attempt = ?2, attempted_at = ?3, visible_at = ?4, last_error = ?5
WHERE id = ?6 AND state = 0`

// InsertRunning implements store.Testing.
func (s *Store) InsertRunning(ctx context.Context, job store.NewJob, r store.RunningClaim) (int64, error) {
	if s.w == nil {
		return 0, store.ErrReadOnly
	}
	var id int64
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		if id, err = insertOne(ctx, tx, &job, nil); err != nil {
			return err
		}
		var lastErr any
		if r.LastError != "" {
			lastErr = r.LastError
		}
		if _, err = tx.ExecContext(ctx, claimRunningSQL, r.Lease, r.Attempt, r.At, r.Until, lastErr, id); err != nil {
			return err
		}
		return moveCount(ctx, tx, countOf(job.Queue, store.Pending, job.VisibleAt), countOf(job.Queue, store.Running, 0), 1)
	})
	if err != nil {
		return 0, sqlitefile.ClassifyWriteError(err)
	}
	return id, nil
}

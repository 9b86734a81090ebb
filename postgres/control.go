package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// Live control: paused queues in lq_queues, cancelled jobs
// in state 4, snoozes.

// pauseLock takes, in tx, the lock that claims of queue take shared
// (pauseLockSQL): a Pause waits for claims in flight, and claims after it
// see it.
func (s *pgStore) pauseLock(ctx context.Context, tx *sql.Tx, queue string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('litequeue pause ' || $1::text || ' ' || $2::text, 0))`, s.schema, queue)
	return err
}

// Pause implements store.Admin.
func (s *pgStore) Pause(ctx context.Context, queue string, at int64) (bool, error) {
	if err := s.writable(); err != nil {
		return false, err
	}
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.pauseLock(ctx, tx, queue); err != nil {
			return err
		}
		var n int64
		err := tx.QueryRowContext(ctx, s.q(`WITH u AS (INSERT INTO lq_queues AS q (queue, paused_at) VALUES ($1, $2)
			ON CONFLICT (queue) DO UPDATE SET paused_at = excluded.paused_at WHERE q.paused_at IS NULL RETURNING 1)
			SELECT count(*) FROM u`), queue, at).Scan(&n)
		changed = n == 1
		return err
	})
	return changed, err
}

// Resume implements store.Admin.
func (s *pgStore) Resume(ctx context.Context, queue string) (bool, error) {
	if err := s.writable(); err != nil {
		return false, err
	}
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var n int64
		err := tx.QueryRowContext(ctx, s.q(`WITH u AS (UPDATE lq_queues SET paused_at = NULL WHERE queue = $1 AND paused_at IS NOT NULL RETURNING 1)
			SELECT count(*) FROM u`), queue).Scan(&n)
		if err != nil {
			return err
		}
		changed = n == 1
		if changed {
			_, err = tx.ExecContext(ctx, notifySQL, s.channel, queue)
		}
		return err
	})
	return changed, err
}

// Paused implements store.Admin.
func (s *pgStore) Paused(ctx context.Context) (map[string]int64, error) {
	return readValue(s, ctx, func() (map[string]int64, error) {
		return sqlkit.QueryPaused(ctx, s.db, s.q(`SELECT queue, paused_at FROM lq_queues WHERE paused_at IS NOT NULL`))
	})
}

// Cancel implements store.Admin.
func (s *pgStore) Cancel(ctx context.Context, ids []int64, now int64, hook store.CancelHook) ([]store.CancelledJob, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var out []store.CancelledJob
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, s.q(`SELECT id, state, queue, kind, lease, payload, attempt, priority, coalesce(idem_key, ''), created_at
			FROM lq_jobs WHERE id = ANY ($1) FOR UPDATE`), ids)
		if err != nil {
			return err
		}
		type row struct {
			state int16
			lease sql.NullInt64
			c     store.CancelledJob
		}
		m := map[int64]row{}
		for rows.Next() {
			var id int64
			var r row
			if err := rows.Scan(&id, &r.state, &r.c.Queue, &r.c.Kind, &r.lease, &r.c.Payload, &r.c.Attempt, &r.c.Priority, &r.c.Key, &r.c.CreatedAt); err != nil {
				rows.Close()
				return err
			}
			m[id] = r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		seen := map[int64]bool{}
		for _, id := range ids {
			r, ok := m[id]
			switch {
			case !ok:
				return fmt.Errorf("litequeue: cancel job %d: %w", id, store.ErrNotFound)
			case r.state != 0 && r.state != 1 && r.state != 5:
				return fmt.Errorf("litequeue: cancel job %d: it is %s already: %w", id, stateWord(r.state), store.ErrWrongState)
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			c := r.c
			c.ID, c.Running = id, r.state == 1
			if c.Running {
				c.Lease = r.lease.Int64
			}
			out = append(out, c)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_jobs SET state = 4, finished_at = $1,
			lease = CASE WHEN state = 1 THEN lease END WHERE id = ANY ($2) AND state IN (0, 1, 5)`), now, ids)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(flowCancelledSQL), ids, now, s.channel); err != nil {
			return err
		}
		return s.followCancelled(ctx, tx, out, hook)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WhichCancelled implements store.Runtime.
func (s *pgStore) WhichCancelled(ctx context.Context, leases []store.Lease) ([]int, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, ls := leaseArrays(leases)
	return readAll(s, ctx, s.q(`SELECT c.i - 1 FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS c(id, lease, i)
		JOIN lq_jobs j ON j.id = c.id AND j.lease = c.lease AND j.state = 4 ORDER BY c.i`), []any{ids, ls},
		func(rows *sql.Rows, i *int) error { return rows.Scan(i) })
}

// PurgeCancelled implements store.Admin.
func (s *pgStore) PurgeCancelled(ctx context.Context, before int64) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	var n int
	err := s.db.QueryRowContext(ctx, s.q(fmt.Sprintf(deleteWithHistorySQL,
		"DELETE FROM lq_jobs WHERE state = 4 AND finished_at < $1 RETURNING id")), before).Scan(&n)
	return n, err
}

// snoozeSQL reschedules a running row without using an attempt, with its
// history record, unless it snoozed max times already; it answers the
// row's queue, or no row.
const snoozeSQL = `WITH u AS (
    UPDATE lq_jobs SET state = 0, visible_at = $1, lease = NULL, attempt = greatest(attempt - 1, 0), snoozes = snoozes + 1
    WHERE id = $2 AND lease = $3 AND state = 1 AND snoozes < $4 RETURNING id, queue),
a AS (
    INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
    SELECT id, $5, $6, $7, $8, $9, $10, NULLIF($12::bigint, 0), NULLIF($13::text, ''), NULLIF($14::bigint, 0) FROM u RETURNING job_id)
SELECT pg_notify($11, u.queue) FROM u, a`

// Snooze implements store.Runtime.
func (s *pgStore) Snooze(ctx context.Context, sn store.Snooze) error {
	if err := s.writable(); err != nil {
		return err
	}
	var done bool
	o := &op{ctx: ctx, add: func(b *pgx.Batch) {
		b.Queue(s.q(snoozeSQL), sn.Due, sn.ID, sn.Lease.Lease, sn.Max,
			sn.Record.Attempt, sn.Record.StartedAt, sn.Record.FinishedAt, sn.Record.Error, sn.Record.Decision, sn.Record.Delay,
			s.channel, sn.Record.Process, sn.Record.Host, int64(sn.Record.PID)).Fn = func(br pgx.BatchResults) error {
			ct, err := br.Exec()
			done = err == nil && ct.RowsAffected() == 1
			return err
		}
	}}
	if err := s.fin.submit(o); err != nil {
		return err
	}
	if done {
		return nil
	}
	held, err := s.Holds(ctx, sn.Lease)
	switch {
	case err != nil:
		return err
	case held:
		return fmt.Errorf("litequeue: snooze job %d: %w", sn.ID, store.ErrSnoozeLimit)
	}
	return fmt.Errorf("litequeue: snooze job %d: %w", sn.ID, store.ErrLeaseLost)
}

// followCancelled asks hook (when non-nil) for the follow-up of each job of
// cs and inserts it on tx (one whose key or uniqueness a live job holds is
// not: FollowUpID 0), then notifies the queues of cs and of the follow-ups:
// the processes running cancelled jobs learn of it by the notification, as
// they learn of new jobs.
func (s *pgStore) followCancelled(ctx context.Context, tx *sql.Tx, cs []store.CancelledJob, hook store.CancelHook) error {
	queues := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		queues[c.Queue] = true
		if hook == nil {
			continue
		}
		c.FollowUp, c.FollowUpID = hook(*c), 0
		if c.FollowUp == nil {
			continue
		}
		ids, dups, err := s.insertEach(ctx, tx, []store.NewJob{*c.FollowUp})
		switch {
		case err != nil:
			return fmt.Errorf("follow-up of cancelled job %d: %w", c.ID, err)
		case dups[0] == nil:
			c.FollowUpID = ids[0]
			queues[c.FollowUp.Queue] = true
		case !errors.Is(dups[0], store.ErrDuplicate):
			return fmt.Errorf("follow-up of cancelled job %d: %w", c.ID, dups[0])
		}
	}
	return s.notifyTx(ctx, tx, queues)
}

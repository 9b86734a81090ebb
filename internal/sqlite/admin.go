package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// The reads and writes of inspection and recovery: listings, one job with
// its history, cancel, requeue, purge and the per-queue counts.

// JobColumns are the columns ScanJob reads, in order.
const JobColumns = `id, queue, kind, state, attempt, priority, idem_key, payload, created_at, run_at,
	visible_at, attempted_at, finished_at, last_error, dead_reason, meta`

// StateSQL is the SQL condition of a listing state at time :now.
func StateSQL(s store.ListState) string {
	switch s {
	case store.ListReady:
		return "(state = 0 AND visible_at <= :now)"
	case store.ListScheduled:
		return "(state = 0 AND visible_at > :now)"
	case store.ListRunning:
		return "state = 1"
	case store.ListCompleted:
		return "state = 2"
	case store.ListCancelled:
		return "state = 4"
	case store.ListWaiting:
		return "state = 5"
	default:
		return "state = 3"
	}
}

// ScanJob reads a row of JobColumns.
func ScanJob(rows interface{ Scan(...any) error }) (store.Job, error) {
	var j store.Job
	var key, lastErr, reason, meta sql.NullString
	var attempted, finished sql.NullInt64
	if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.State, &j.Attempt, &j.Priority, &key, &j.Payload,
		&j.CreatedAt, &j.RunAt, &j.VisibleAt, &attempted, &finished, &lastErr, &reason, &meta); err != nil {
		return store.Job{}, err
	}
	j.Key, j.LastError, j.DeadReason, j.Meta = key.String, lastErr.String, reason.String, meta.String
	j.AttemptedAt, j.FinishedAt = attempted.Int64, finished.Int64
	return j, nil
}

// Jobs implements store.Admin.
func (s *Store) Jobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	var where []string
	args := []any{sql.Named("now", f.Now)}
	if f.Queue != "" {
		where = append(where, "queue = :queue")
		args = append(args, sql.Named("queue", f.Queue))
	}
	if f.Kind != "" {
		where = append(where, "kind = :kind")
		args = append(args, sql.Named("kind", f.Kind))
	}
	if f.Group != "" {
		if s.noFlow {
			return nil, nil // no groups before flowVersion
		}
		where = append(where, "grp = :grp")
		args = append(args, sql.Named("grp", f.Group))
	}
	if len(f.States) > 0 {
		var ors []string
		for _, st := range f.States {
			ors = append(ors, StateSQL(st))
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if c := f.After; c != nil {
		if f.Order == store.NextDue {
			where = append(where, "(visible_at, priority, id) > (:after_due, :after_prio, :after_id)")
			args = append(args, sql.Named("after_due", c.Due), sql.Named("after_prio", c.Priority))
		} else {
			where = append(where, "id < :after_id")
		}
		args = append(args, sql.Named("after_id", c.ID))
	}
	// A group's rows are few next to a queue's and the claim index does
	// not hold grp: the query below reads them through lq_jobs_group_live.
	if f.Order == store.NextDue && f.Limit > 0 && liveOnly(f.States) && f.Group == "" {
		return s.nextDueLive(ctx, f)
	}
	query := "SELECT " + s.jobColumns() + " FROM lq_jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Order == store.NextDue {
		query += " ORDER BY visible_at, priority, id"
	} else {
		query += " ORDER BY id DESC"
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query += " LIMIT :limit OFFSET :offset"
	args = append(args, sql.Named("limit", limit), sql.Named("offset", max(f.Offset, 0)))
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Job
	for rows.Next() {
		j, err := ScanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Job implements store.Admin.
func (s *Store) Job(ctx context.Context, id int64) (store.Job, []store.Attempt, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Job{}, nil, err
	}
	defer tx.Rollback()
	j, err := ScanJob(tx.QueryRowContext(ctx, "SELECT "+s.jobColumns()+" FROM lq_jobs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Job{}, nil, fmt.Errorf("litequeue: job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Job{}, nil, err
	}
	attempts := attemptsNoProcsSQL
	if !s.noProcs {
		attempts = attemptsSQL
		var proc sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT process FROM lq_jobs WHERE id = ?", id).Scan(&proc); err != nil {
			return store.Job{}, nil, err
		}
		j.Process = proc.Int64
	}
	rows, err := tx.QueryContext(ctx, attempts, id)
	if err != nil {
		return store.Job{}, nil, err
	}
	defer rows.Close()
	var as []store.Attempt
	for rows.Next() {
		var a store.Attempt
		if err := rows.Scan(&a.Attempt, &a.StartedAt, &a.FinishedAt, &a.Error, &a.Decision, &a.Delay,
			&a.Process, &a.Host, &a.PID); err != nil {
			return store.Job{}, nil, err
		}
		as = append(as, a)
	}
	return j, as, rows.Err()
}

// StateName names a stored state for error messages.
func StateName(st store.State) string {
	switch st {
	case store.Running:
		return "running"
	case store.Completed:
		return "completed"
	case store.Dead:
		return "dead"
	case store.Cancelled:
		return "cancelled"
	case store.Waiting:
		return "waiting"
	}
	return "ready"
}

// requeueSQL ignores (changes no row) a requeue that the unique index of
// unique jobs refuses; the idempotency key is checked before it.
const requeueSQL = `UPDATE OR IGNORE lq_jobs SET state = 0, attempt = 0, snoozes = 0, visible_at = ?, lease = NULL,
	finished_at = NULL, dead_reason = NULL WHERE id = ? AND state = ?`

// Requeue implements store.Admin.
func (s *Store) Requeue(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return s.requeueFrom(ctx, ids, now, store.Dead)
}

// RequeueCancelled implements store.Dashboard.
func (s *Store) RequeueCancelled(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return s.requeueFrom(ctx, ids, now, store.Cancelled)
}

// requeueFrom makes the rows of state from pending, as Requeue does for
// dead ones.
func (s *Store) requeueFrom(ctx context.Context, ids []int64, now int64, from store.State) ([]store.Moved, error) {
	if s.w == nil {
		return nil, store.ErrReadOnly
	}
	var moved []store.Moved
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		moved = moved[:0]
		for _, id := range ids {
			var state store.State
			var queue, kind string
			var key sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT state, queue, kind, idem_key FROM lq_jobs WHERE id = ?`, id).Scan(&state, &queue, &kind, &key)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("litequeue: requeue job %d: %w", id, store.ErrNotFound)
			case err != nil:
				return err
			case state != from:
				return fmt.Errorf("litequeue: requeue job %d: it is %s, not %s: %w", id, StateName(state), StateName(from), store.ErrWrongState)
			}
			if key.Valid {
				var holder int64
				err := tx.QueryRowContext(ctx, liveKeySQL, key.String).Scan(&holder)
				if err == nil {
					return fmt.Errorf("litequeue: requeue job %d: %w", id, &store.DuplicateError{Key: key.String, ID: holder})
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			unmet := 0
			if from == store.Cancelled {
				// A workflow's dependant waits again for its parents that
				// have not finished; one that a failed parent blocks stays.
				if unmet, err = requeueWaits(ctx, tx, id); err != nil {
					return err
				}
			}
			if ok, err := execHolds(ctx, tx, requeueSQL, now, id, from); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("litequeue: requeue job %d: %w", id, uniqueTwin(ctx, tx, id))
			}
			to := countOf(queue, store.Pending, now)
			if unmet > 0 {
				if _, err := tx.ExecContext(ctx, `UPDATE lq_jobs SET state = 5, waits = ?2 WHERE id = ?1`, id, unmet); err != nil {
					return err
				}
				to = countOf(queue, store.Waiting, 0)
			}
			if err := moveCount(ctx, tx, countOf(queue, from, 0), to, 1); err != nil {
				return err
			}
			// A workflow's parent: the dependants its death (or cancel)
			// cancelled wait again.
			if err := reviveFlow(ctx, tx, id); err != nil {
				return err
			}
			moved = append(moved, store.Moved{ID: id, Queue: queue, Kind: kind})
		}
		return keepDeadErrors(ctx, tx, moved)
	})
	if err != nil {
		return nil, sqlitefile.ClassifyWriteError(err)
	}
	return moved, nil
}

package litequeue

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Dead letters are jobs that gave up: their attempts were used up, they
// failed with a Permanent error, a retry Strategy refused them, or their
// payload could not be decoded. They stay in the file, in state dead, with
// their queue, kind, payload, attempt history, reason (JobInfo.DeadReason)
// and time (JobInfo.FinishedAt) until requeued or purged. There is no hidden
// cap: nothing is dropped silently.

// DeadFilter selects dead letters for RequeueAll and PurgeDead. Zero fields
// select all.
type DeadFilter struct {
	Queue string
	Kind  string
	// OlderThan selects dead letters that died more than this long ago
	// (PurgeDead only); 0 means any age.
	OlderThan time.Duration
	// IDs, when not empty, restricts the selection to these ids.
	IDs []int64
}

// DeadLetters lists dead letters, newest first unless f.Order says
// otherwise. f.States is ignored. Like Jobs it returns every match unless
// f.Limit asks for fewer: a zero JobFilter lists them all.
func (q *Queue) DeadLetters(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	f.States = []State{StateDead}
	return q.Jobs(ctx, f)
}

// DeadLetter returns one dead letter with its attempt history. It wraps
// ErrNotFound if no job has the id and ErrWrongState if the job is not dead.
func (q *Queue) DeadLetter(ctx context.Context, id int64) (JobInfo, error) {
	j, err := q.Job(ctx, id)
	if err != nil {
		return JobInfo{}, err
	}
	if j.State != StateDead {
		return JobInfo{}, wrapf("litequeue: job %d is %s, not a dead letter: %w", id, j.State, ErrWrongState)
	}
	return j, nil
}

const requeueSQL = `UPDATE lq_jobs SET state = 0, attempt = 0, visible_at = ?, lease = NULL,
	finished_at = NULL, dead_reason = NULL WHERE id = ? AND state = 3`

// Requeue moves dead letters back to ready, due now, with their attempts
// reset (their history is kept), and returns how many moved. It is all or
// nothing: an unknown id (ErrNotFound), a job that is not dead
// (ErrWrongState), or a dead letter whose idempotency key is now held by a
// live job (ErrDuplicate) moves nothing, and the error names the id.
func (q *Queue) Requeue(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	now := unixNanos(q.clock)
	var moved []JobInfo
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		moved = moved[:0]
		for _, id := range ids {
			var state int
			var queue, kind string
			var key sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT state, queue, kind, idem_key FROM lq_jobs WHERE id = ?`, id).Scan(&state, &queue, &kind, &key)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return wrapf("litequeue: requeue job %d: %w", id, ErrNotFound)
			case err != nil:
				return err
			case state != 3:
				return wrapf("litequeue: requeue job %d: it is %s, not dead: %w", id, stateName(state), ErrWrongState)
			}
			if key.Valid {
				var holder int64
				err := tx.QueryRowContext(ctx, `SELECT id FROM lq_jobs WHERE idem_key = ? AND state IN (0, 1)`, key.String).Scan(&holder)
				if err == nil {
					return wrapf("litequeue: requeue job %d: %w", id, &DuplicateError{Key: key.String, ID: holder})
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, requeueSQL, now, id); err != nil {
				return err
			}
			moved = append(moved, JobInfo{ID: id, Queue: queue, Kind: kind})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	q.afterRequeue(moved)
	return len(moved), nil
}

// RequeueAll moves every dead letter f selects (f.OlderThan is ignored) back
// to ready as Requeue does, and returns how many moved. A dead letter whose
// idempotency key is now held by a live job stays dead and is not counted.
func (q *Queue) RequeueAll(ctx context.Context, f DeadFilter) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	now := unixNanos(q.clock)
	f.OlderThan = 0
	where, args := deadWhere(f, now)
	var moved []JobInfo
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		moved = moved[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE OR IGNORE lq_jobs SET state = 0, attempt = 0, visible_at = ?, lease = NULL,
			finished_at = NULL, dead_reason = NULL WHERE `+where+` RETURNING id, queue, kind`, append([]any{now}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j JobInfo
			if err := rows.Scan(&j.ID, &j.Queue, &j.Kind); err != nil {
				return err
			}
			moved = append(moved, j)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, wrapf("litequeue: requeue dead letters: %w", classifyWriteError(err))
	}
	q.afterRequeue(moved)
	return len(moved), nil
}

func (q *Queue) afterRequeue(moved []JobInfo) {
	queues := map[string]bool{}
	for _, j := range moved {
		queues[j.Queue] = true
		q.emit(Event{Type: EventRequeued, JobID: j.ID, Queue: j.Queue, Kind: j.Kind})
	}
	for name := range queues {
		q.wake(name)
	}
}

// PurgeDead deletes the dead letters f selects, with their history, and
// returns how many it deleted.
func (q *Queue) PurgeDead(ctx context.Context, f DeadFilter) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	where, args := deadWhere(f, unixNanos(q.clock))
	var n int64
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE `+where, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, wrapf("litequeue: purge dead letters: %w", classifyWriteError(err))
	}
	return int(n), nil
}

func deadWhere(f DeadFilter, now int64) (string, []any) {
	where := []string{"state = 3"}
	var args []any
	if f.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, f.Queue)
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	if f.OlderThan > 0 {
		where = append(where, "finished_at < ?")
		args = append(args, now-int64(f.OlderThan))
	}
	if len(f.IDs) > 0 {
		where = append(where, "id IN (SELECT value FROM json_each(?))")
		args = append(args, idsJSON(f.IDs))
	}
	return strings.Join(where, " AND "), args
}

// idsJSON renders ids as a JSON array for json_each, as TEXT: json_each
// would read a BLOB as JSONB.
func idsJSON(ids []int64) string {
	return string(appendIDsJSON(nil, len(ids), func(i int) int64 { return ids[i] }))
}

// appendIDsJSON appends the JSON array of the n ids id(0)…id(n-1) to b.
func appendIDsJSON(b []byte, n int, id func(i int) int64) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id(i), 10)
	}
	return append(b, ']')
}

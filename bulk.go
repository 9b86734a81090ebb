package litequeue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// bulkChunk is how many jobs one writer transaction of a bulk action
// changes, so that an action on a million jobs never holds the writer (and
// every enqueue and claim behind it) for long.
const bulkChunk = 500

// RequeueMatching moves every dead letter that f selects back to ready, due
// now, with its attempts reset (as Requeue does), and returns how many
// moved. f.States is ignored: only dead letters move. A dead letter whose
// idempotency key is now held by a live job stays dead and is not counted.
// The work is done in transactions of a few hundred jobs, newest first, so
// other writes of the queue go on meanwhile; a job that changes state
// between two of them is judged by its state when its turn comes.
func (q *Queue) RequeueMatching(ctx context.Context, f JobQuery) (int, error) {
	f.States = []State{StateDead}
	now := unixNanos(q.clock)
	total := 0
	var moved []store.Moved
	err := q.bulk(ctx, f, func(ctx context.Context, tx sqlite.Execer, ids string) error {
		moved = moved[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE OR IGNORE lq_jobs SET state = 0, attempt = 0, visible_at = ?, lease = NULL,
			finished_at = NULL, dead_reason = NULL WHERE state = 3 AND id IN (SELECT value FROM json_each(?)) RETURNING id, queue, kind`, now, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m store.Moved
			if err := rows.Scan(&m.ID, &m.Queue, &m.Kind); err != nil {
				return err
			}
			moved = append(moved, m)
		}
		return rows.Err()
	}, func() {
		total += len(moved)
		q.afterRequeue(moved)
	})
	if err != nil {
		return total, fmt.Errorf("litequeue: requeue matching jobs: %w", err)
	}
	return total, nil
}

// CancelMatching deletes every pending (ready or scheduled) job that f
// selects and returns how many. Jobs in other states are never touched,
// whatever f.States says: f.States may narrow the selection to ready or to
// scheduled jobs. It works in chunks like RequeueMatching.
func (q *Queue) CancelMatching(ctx context.Context, f JobQuery) (int, error) {
	f.States = narrow(f.States, StateReady, StateScheduled)
	if len(f.States) == 0 {
		return 0, nil
	}
	total := 0
	var n int64
	err := q.bulk(ctx, f, func(ctx context.Context, tx sqlite.Execer, ids string) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE state = 0 AND id IN (SELECT value FROM json_each(?))`, ids)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	}, func() { total += int(n) })
	if err != nil {
		return total, fmt.Errorf("litequeue: cancel matching jobs: %w", err)
	}
	return total, nil
}

// DeleteMatching deletes every dead or completed job that f selects, with
// its history, and returns how many. Live jobs (pending or running) are
// never touched, whatever f.States says: cancel pending jobs with
// CancelMatching. It works in chunks like RequeueMatching.
func (q *Queue) DeleteMatching(ctx context.Context, f JobQuery) (int, error) {
	f.States = narrow(f.States, StateCompleted, StateDead)
	if len(f.States) == 0 {
		return 0, nil
	}
	total := 0
	var n int64
	err := q.bulk(ctx, f, func(ctx context.Context, tx sqlite.Execer, ids string) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE state IN (2, 3) AND id IN (SELECT value FROM json_each(?))`, ids)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	}, func() { total += int(n) })
	if err != nil {
		return total, fmt.Errorf("litequeue: delete matching jobs: %w", err)
	}
	return total, nil
}

// narrow returns the states of want that have also been asked for (all of
// want when asked is empty).
func narrow(asked []State, want ...State) []State {
	if len(asked) == 0 {
		return want
	}
	var out []State
	for _, w := range want {
		for _, a := range asked {
			if a == w {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// bulk selects the ids f matches, newest first, a chunk at a time, and runs
// apply on each chunk (as a JSON array of ids) in its own writer
// transaction, selecting and applying in the same transaction; committed
// runs after each chunk's transaction committed.
func (q *Queue) bulk(ctx context.Context, f JobQuery, apply func(ctx context.Context, tx sqlite.Execer, ids string) error, committed func()) error {
	if err := q.writable(); err != nil {
		return err
	}
	where, args, err := queryWhere(f)
	if err != nil {
		return err
	}
	where = append(where, "id < :cursor")
	query := "SELECT id FROM lq_jobs WHERE " + strings.Join(where, " AND ") + " ORDER BY id DESC LIMIT :chunk"
	cursor := int64(1<<63 - 1)
	for {
		now := unixNanos(q.clock)
		var ids []int64
		err := q.lite.Do(ctx, func(ctx context.Context, tx sqlite.Execer) error {
			ids = ids[:0]
			a := append(args[:len(args):len(args)], sql.Named("now", now), sql.Named("cursor", cursor), sql.Named("chunk", bulkChunk))
			rows, err := tx.QueryContext(ctx, query, a...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids) == 0 {
				return nil
			}
			return apply(ctx, tx, idsJSON(ids))
		})
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			committed()
		}
		if len(ids) < bulkChunk {
			return nil
		}
		cursor = ids[len(ids)-1]
	}
}

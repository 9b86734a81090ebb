package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// The statements of Bulk, each applied to a chunk of ids (a JSON array).
// UPDATE OR IGNORE skips a dead row whose key a live row now holds (the
// unique index of live keys refuses it).
const (
	bulkRequeueSQL = `UPDATE OR IGNORE lq_jobs SET state = 0, attempt = 0, snoozes = 0, visible_at = ?, lease = NULL,
		finished_at = NULL, dead_reason = NULL WHERE state = 3 AND id IN (SELECT value FROM json_each(?)) RETURNING id, queue, kind`
	bulkCancelSQL = `UPDATE lq_jobs SET state = 4, lease = NULL, finished_at = ?
		WHERE state = 0 AND id IN (SELECT value FROM json_each(?))
		RETURNING id, queue, kind, payload, attempt, priority, coalesce(idem_key, ''), created_at`
	bulkDeleteSQL = `DELETE FROM lq_jobs WHERE state IN (2, 3, 4) AND id IN (SELECT value FROM json_each(?)) RETURNING queue, state, visible_at`
)

// bulkSelectSQL selects the next chunk of a bulk action: the highest ids
// below :cursor among those the filter's conditions select.
func bulkSelectSQL(where []string) string {
	where = append(where, "id < :cursor")
	return "SELECT id FROM lq_jobs WHERE " + strings.Join(where, " AND ") + " ORDER BY id DESC LIMIT :chunk"
}

// Bulk implements store.Admin: it selects and applies in the same writer
// transaction.
func (s *Store) Bulk(ctx context.Context, op store.BulkOp, q store.JobQuery, before int64, n int, hook store.CancelHook) (store.BulkResult, error) {
	if s.w == nil {
		return store.BulkResult{}, store.ErrReadOnly
	}
	if op != store.BulkRequeue && op != store.BulkCancel && op != store.BulkDelete {
		return store.BulkResult{}, fmt.Errorf("litequeue: unknown bulk operation %d", op)
	}
	where, args := queryWhere(q)
	args = append(args, sql.Named("cursor", before), sql.Named("chunk", n))
	query := bulkSelectSQL(where)
	var res store.BulkResult
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		res = store.BulkResult{}
		ids, err := sqlkit.QueryAll(ctx, tx, query, args, sqlkit.ScanID)
		if err != nil || len(ids) == 0 {
			return err
		}
		res.Selected, res.Last = len(ids), ids[len(ids)-1]
		list := idsJSON(ids)
		switch op {
		case store.BulkRequeue:
			return requeueChunk(ctx, tx, list, q.Now, &res)
		case store.BulkCancel:
			return cancelChunk(ctx, tx, list, q.Now, hook, &res)
		}
		if _, err := tx.ExecContext(ctx, bulkDeleteEdgesSQL, list); err != nil {
			return err
		}
		res.Changed, err = execCounted(ctx, tx, bulkDeleteSQL, gone, list)
		return err
	})
	if err != nil {
		return store.BulkResult{}, sqlitefile.ClassifyWriteError(err)
	}
	return res, nil
}

func requeueChunk(ctx context.Context, tx Execer, ids string, now int64, res *store.BulkResult) error {
	from := len(res.Moved)
	rows, err := tx.QueryContext(ctx, bulkRequeueSQL, now, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var m store.Moved
		if err := rows.Scan(&m.ID, &m.Queue, &m.Kind); err != nil {
			return err
		}
		res.Moved = append(res.Moved, m)
		if err := moveCount(ctx, tx, countOf(m.Queue, store.Dead, 0), countOf(m.Queue, store.Pending, now), 1); err != nil {
			return err
		}
	}
	res.Changed = len(res.Moved)
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, m := range res.Moved[from:] {
		if err := reviveFlow(ctx, tx, m.ID); err != nil {
			return err
		}
	}
	return keepDeadErrors(ctx, tx, res.Moved[from:])
}

// cancelChunk cancels the pending rows of ids, lists them in res.Cancelled
// and inserts their follow-ups (see followCancelled).
func cancelChunk(ctx context.Context, tx Execer, ids string, now int64, hook store.CancelHook, res *store.BulkResult) error {
	// The kept counts move first, from the rows as they are now (the
	// update below returns them without their due time).
	rows, err := sqlkit.QueryAll(ctx, tx, `SELECT queue, visible_at FROM lq_jobs WHERE state = 0 AND id IN (SELECT value FROM json_each(?))`,
		[]any{ids}, func(r *sql.Rows, k *countKey) error {
			var visible int64
			if err := r.Scan(&k.queue, &visible); err != nil {
				return err
			}
			*k = countOf(k.queue, store.Pending, visible)
			return nil
		})
	if err != nil {
		return err
	}
	for _, k := range rows {
		if err := moveCount(ctx, tx, k, countOf(k.queue, store.Cancelled, 0), 1); err != nil {
			return err
		}
	}
	cs, err := sqlkit.QueryAll(ctx, tx, bulkCancelSQL, []any{now, ids}, sqlkit.ScanCancelled)
	if err != nil {
		return err
	}
	res.Cancelled, res.Changed = cs, len(cs)
	cancelled := make([]int64, len(cs))
	for i, c := range cs {
		cancelled[i] = c.ID
	}
	if err := resolveCancelled(ctx, tx, cancelled, now); err != nil {
		return err
	}
	return followCancelled(ctx, tx, cs, hook)
}

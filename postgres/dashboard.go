package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// The dashboard's reads, bulk actions, history and test-kit methods of
// store.Dashboard. Each read is bounded by its limits through the
// primary key or an index, as on SQLite.

// jobQueryWhere renders q's conditions on lq_jobs (alias t).
func jobQueryWhere(q store.JobQuery, a *args, t string) ([]string, error) {
	var where []string
	if q.Queue != "" {
		where = append(where, t+".queue = "+a.add(q.Queue))
	}
	if q.Kind != "" {
		where = append(where, t+".kind = "+a.add(q.Kind))
	}
	if len(q.Kinds) > 0 {
		where = append(where, t+".kind = ANY ("+a.add(q.Kinds)+")")
	}
	for _, b := range []struct {
		cond string
		at   int64
	}{
		{".created_at >= ", q.CreatedFrom}, {".created_at < ", q.CreatedBefore},
		{".finished_at >= ", q.FinishedFrom}, {".finished_at < ", q.FinishedBefore},
	} {
		if b.at != 0 {
			where = append(where, t+b.cond+a.add(b.at))
		}
	}
	if len(q.States) > 0 {
		var ors []string
		for _, st := range q.States {
			c, err := stateCond(st, q.Now, a, t)
			if err != nil {
				return nil, err
			}
			ors = append(ors, c)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if q.Text != "" {
		// The first store.TextSearchChars characters of each, as on SQLite.
		p, n := a.add(strings.ToLower(q.Text)), strconv.Itoa(store.TextSearchChars)
		where = append(where, "(strpos(lower(left(convert_from("+t+".payload, 'UTF8'), "+n+")), "+p+") > 0 OR strpos(lower(left(coalesce("+t+".last_error, ''), "+n+")), "+p+") > 0)")
	}
	if len(q.IDs) > 0 {
		where = append(where, t+".id = ANY ("+a.add(q.IDs)+")")
	}
	return metaWhere(q, where, a, t), nil
}

// stateCond is the condition of one listing state.
func stateCond(st store.ListState, now int64, a *args, t string) (string, error) {
	switch st {
	case store.ListReady:
		return "(" + t + ".state = 0 AND " + t + ".visible_at <= " + a.add(now) + ")", nil
	case store.ListScheduled:
		return "(" + t + ".state = 0 AND " + t + ".visible_at > " + a.add(now) + ")", nil
	case store.ListRunning:
		return t + ".state = 1", nil
	case store.ListCompleted:
		return t + ".state = 2", nil
	case store.ListDead:
		return t + ".state = 3", nil
	case store.ListDead + 1: // cancelled
		return t + ".state = 4", nil
	case store.ListWaiting:
		return t + ".state = 5", nil
	}
	return "", fmt.Errorf("litequeue: unknown list state %d", st)
}

func and(where []string) string {
	if len(where) == 0 {
		return "true"
	}
	return strings.Join(where, " AND ")
}

// Search implements store.Admin.
func (s *pgStore) Search(ctx context.Context, q store.JobQuery, p store.PageQuery) (store.Page, error) {
	var page store.Page
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var lo, hi sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT (SELECT min(id) FROM lq_jobs ), (SELECT max(id) FROM lq_jobs )`)).Scan(&lo, &hi); err != nil {
			return err
		}
		if !hi.Valid {
			page = store.MakePage(p, nil, 0, 0, true)
			return nil
		}
		before, floor := p.Window(lo.Int64, hi.Int64)
		if before <= lo.Int64 {
			page = store.MakePage(p, nil, lo.Int64, hi.Int64, false)
			return nil
		}
		var a args
		where, err := jobQueryWhere(q, &a, "t")
		if err != nil {
			return err
		}
		where = append([]string{"t.id < " + a.add(before), "t.id >= " + a.add(floor)}, where...)
		rows, err := tx.QueryContext(ctx, s.q("SELECT "+jobColumns+" FROM lq_jobs t WHERE "+and(where)+" ORDER BY t.id DESC LIMIT "+a.add(p.Limit)), a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var jobs []store.Job
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		page = store.MakePage(p, jobs, lo.Int64, hi.Int64, false)
		return nil
	})
	return page, err
}

// Count implements store.Admin.
func (s *pgStore) Count(ctx context.Context, q store.JobQuery, limit int) (int, error) {
	var a args
	where, err := jobQueryWhere(q, &a, "t")
	if err != nil {
		return 0, err
	}
	query := "SELECT 1 FROM lq_jobs t WHERE " + and(where)
	if limit > 0 {
		query += " LIMIT " + a.add(limit)
	}
	return readValue(s, ctx, func() (int, error) {
		var n int
		err := s.db.QueryRowContext(ctx, s.q("SELECT count(*) FROM ("+query+") c"), a...).Scan(&n)
		return n, err
	})
}

const (
	// liveQueuesSQL lists the queues with live rows: one seek of the claim
	// index per queue.
	liveQueuesSQL = `WITH RECURSIVE q(name) AS (
    SELECT min(queue) FROM lq_jobs WHERE state IN (0, 1)
    UNION ALL
    SELECT (SELECT min(queue) FROM lq_jobs WHERE state IN (0, 1) AND queue > q.name) FROM q WHERE q.name IS NOT NULL
)
SELECT name FROM q WHERE name IS NOT NULL`
	// liveCountsSQL counts a queue's live rows up to $3 and finds the
	// oldest ready one among them (exact when the count did not stop at
	// $3).
	liveCountsSQL = `WITH c AS MATERIALIZED (SELECT id, priority, state, visible_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1) LIMIT $3),
o AS (SELECT id, visible_at FROM c WHERE state = 0 AND visible_at <= $2 ORDER BY visible_at, priority, id LIMIT 1)
SELECT count(*) FILTER (WHERE state = 1), count(*) FILTER (WHERE state = 0 AND visible_at <= $2),
    count(*) FILTER (WHERE state = 0 AND visible_at > $2), count(*), (SELECT id FROM o), (SELECT visible_at FROM o)
FROM c`
	// oldestReadySQL: the earliest due pending row of each of the $3
	// lowest priority levels, the earliest of those; and whether the queue
	// has more levels. It walks the (priority, kind) pairs of the queue's
	// live rows in order (one seek of lq_jobs_kind_due each) and takes the
	// first ready row of each pair's range.
	oldestReadySQL = `WITH RECURSIVE p(prio, kind, n) AS (
    (SELECT priority, kind, 1 FROM lq_jobs WHERE queue = $1 AND state IN (0, 1) ORDER BY priority, kind LIMIT 1)
    UNION ALL
    SELECT x.priority, x.kind, CASE WHEN x.priority = p.prio THEN p.n ELSE p.n + 1 END
    FROM p CROSS JOIN LATERAL (
        SELECT priority, kind FROM lq_jobs WHERE queue = $1 AND state IN (0, 1) AND (priority, kind) > (p.prio, p.kind)
        ORDER BY priority, kind LIMIT 1) x
    WHERE p.n <= $3
),
o AS (SELECT d.id, d.visible_at, p.prio FROM p CROSS JOIN LATERAL (
    SELECT id, visible_at FROM lq_jobs
    WHERE queue = $1 AND state IN (0, 1) AND priority = p.prio AND kind = p.kind AND visible_at <= $2 AND state = 0
    ORDER BY visible_at, id LIMIT 1) d
  WHERE p.n <= $3
  ORDER BY d.visible_at, p.prio, d.id LIMIT 1)
SELECT (SELECT id FROM o), (SELECT visible_at FROM o), EXISTS (SELECT 1 FROM p WHERE p.n > $3)`
	finishedCountsSQL = `SELECT queue, count(*) FROM
    (SELECT queue FROM lq_jobs WHERE state = $1 ORDER BY finished_at DESC LIMIT $2) f GROUP BY queue`
)

// Summaries implements store.Dashboard.
func (s *pgStore) Summaries(ctx context.Context, now int64, limit int) ([]store.QueueSummary, error) {
	var sums store.Summaries
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		sums = store.Summaries{}
		live, err := sqlkit.QueryAll(ctx, tx, s.q(liveQueuesSQL), nil, func(r *sql.Rows, name *string) error { return r.Scan(name) })
		if err != nil {
			return err
		}
		for _, name := range live {
			sum := sums.Get(name)
			var n int
			var id, at sql.NullInt64
			if err := tx.QueryRowContext(ctx, s.q(liveCountsSQL), name, now, limit).Scan(&sum.Running, &sum.Ready, &sum.Scheduled, &n, &id, &at); err != nil {
				return err
			}
			sum.LiveCapped = n >= limit
			if sum.LiveCapped {
				// Not every live row was counted: search the lowest
				// priority levels one by one instead.
				err := tx.QueryRowContext(ctx, s.q(oldestReadySQL), name, now, store.OldestReadyLevels).Scan(&id, &at, &sum.OldestReadyCapped)
				if err != nil {
					return err
				}
			}
			sum.OldestReadyID, sum.OldestReadyAt = id.Int64, at.Int64
		}
		for _, st := range []store.State{store.Completed, store.Dead} {
			if err := sqlkit.AddFinished(ctx, sums, tx, st, limit, s.q(finishedCountsSQL), int16(st), limit); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sums.List(), nil
}

// Bulk implements store.Admin.
func (s *pgStore) Bulk(ctx context.Context, op store.BulkOp, q store.JobQuery, before int64, n int, hook store.CancelHook) (store.BulkResult, error) {
	if err := s.writable(); err != nil {
		return store.BulkResult{}, err
	}
	if op != store.BulkRequeue && op != store.BulkCancel && op != store.BulkDelete {
		return store.BulkResult{}, fmt.Errorf("litequeue: unknown bulk operation %d", op)
	}
	var a args
	where, err := jobQueryWhere(q, &a, "t")
	if err != nil {
		return store.BulkResult{}, err
	}
	where = append(where, "t.id < "+a.add(before))
	sel := s.q("SELECT t.id FROM lq_jobs t WHERE " + and(where) + " ORDER BY t.id DESC LIMIT " + a.add(n))
	var res store.BulkResult
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res = store.BulkResult{}
		ids, err := sqlkit.QueryAll(ctx, tx, sel, a, sqlkit.ScanID)
		if err != nil || len(ids) == 0 {
			return err
		}
		res.Selected, res.Last = len(ids), ids[len(ids)-1]
		switch op {
		case store.BulkRequeue:
			return s.bulkRequeue(ctx, tx, ids, q.Now, &res)
		case store.BulkCancel:
			// Pending rows become cancelled (kept), as Cancel makes them.
			cs, err := sqlkit.QueryAll(ctx, tx, s.q(`UPDATE lq_jobs SET state = 4, lease = NULL, finished_at = $1
				WHERE state = 0 AND id = ANY ($2)
				RETURNING id, queue, kind, payload, attempt, priority, coalesce(idem_key, ''), created_at`), []any{q.Now, ids}, sqlkit.ScanCancelled)
			if err != nil {
				return err
			}
			res.Cancelled, res.Changed = cs, len(cs)
			cancelled := make([]int64, len(cs))
			for i, c := range cs {
				cancelled[i] = c.ID
			}
			if _, err := tx.ExecContext(ctx, s.q(flowCancelledSQL), cancelled, q.Now, s.channel); err != nil {
				return err
			}
			if hook == nil {
				return nil
			}
			return s.followCancelled(ctx, tx, cs, hook)
		default:
			return tx.QueryRowContext(ctx, s.q(fmt.Sprintf(deleteWithHistorySQL,
				"DELETE FROM lq_jobs WHERE state IN (2, 3, 4) AND id = ANY ($1) RETURNING id")), ids).Scan(&res.Changed)
		}
	})
	if err != nil {
		return store.BulkResult{}, err
	}
	return res, nil
}

// bulkRequeueSQL requeues the dead rows of $2 whose key no live row holds;
// of dead rows sharing a key, the lowest id.
const bulkRequeueSQL = `UPDATE lq_jobs j SET state = 0, attempt = 0, snoozes = 0, visible_at = $1, lease = NULL,
    finished_at = NULL, dead_reason = NULL
WHERE j.state = 3 AND j.id IN (
    SELECT d.id FROM lq_jobs d WHERE d.id = ANY ($2) AND d.state = 3 AND d.idem_key IS NULL
    UNION ALL
    SELECT min(d.id) FROM lq_jobs d WHERE d.id = ANY ($2) AND d.state = 3 AND d.idem_key IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM lq_jobs l WHERE l.idem_key = d.idem_key AND l.state IN (0, 1))
    GROUP BY d.idem_key)
  AND NOT (j.unique_key IS NOT NULL AND (j.unique_states & 1) = 1 AND EXISTS (SELECT 1 FROM lq_jobs u
    WHERE u.unique_key = j.unique_key AND ((u.unique_states >> u.state) & 1) = 1 AND u.id <> j.id))
RETURNING j.id, j.queue, j.kind`

func (s *pgStore) bulkRequeue(ctx context.Context, tx *sql.Tx, ids []int64, now int64, res *store.BulkResult) error {
	from := len(res.Moved)
	rows, err := tx.QueryContext(ctx, s.q(bulkRequeueSQL), now, ids)
	if err != nil {
		return err
	}
	queues := map[string]bool{}
	for rows.Next() {
		var m store.Moved
		if err := rows.Scan(&m.ID, &m.Queue, &m.Kind); err != nil {
			rows.Close()
			return err
		}
		res.Moved = append(res.Moved, m)
		queues[m.Queue] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := s.keepDeadErrors(ctx, tx, res.Moved[from:]); err != nil {
		return err
	}
	revive := make([]int64, 0, len(res.Moved)-from)
	for _, m := range res.Moved[from:] {
		revive = append(revive, m.ID)
	}
	if _, err := tx.ExecContext(ctx, s.q(flowReviveSQL), revive); err != nil {
		return err
	}
	slices.SortFunc(res.Moved, func(a, b store.Moved) int { return int(b.ID - a.ID) })
	res.Changed = len(res.Moved)
	return s.notifyTx(ctx, tx, queues)
}

// deadMessageCols read a dead row's message: its last error, else its dead
// reason; the first store.DeadMessageChars characters of it.
var deadMessageCols = `t.id, t.queue, t.kind, coalesce(t.finished_at, 0), left(coalesce(nullif(t.last_error, ''), t.dead_reason, ''), ` +
	strconv.Itoa(store.DeadMessageChars) + `)`

// deadQueryWhere is q's conditions on dead rows (alias t).
func deadQueryWhere(q store.JobQuery, a *args) (string, error) {
	q.States = []store.ListState{store.ListDead}
	where, err := jobQueryWhere(q, a, "t")
	return and(where), err
}

// LatestDead implements store.Dashboard.
func (s *pgStore) LatestDead(ctx context.Context, q store.JobQuery, limit int) ([]store.DeadMessage, error) {
	var a args
	where, err := deadQueryWhere(q, &a)
	if err != nil {
		return nil, err
	}
	return s.deadMessages(ctx, "SELECT "+deadMessageCols+" FROM lq_jobs t WHERE "+where+
		" ORDER BY t.finished_at DESC, t.id DESC LIMIT "+a.add(limit), a)
}

// DeadBefore implements store.Dashboard.
func (s *pgStore) DeadBefore(ctx context.Context, q store.JobQuery, before int64, limit int) ([]store.DeadMessage, error) {
	var a args
	where, err := deadQueryWhere(q, &a)
	if err != nil {
		return nil, err
	}
	return s.deadMessages(ctx, "SELECT "+deadMessageCols+" FROM lq_jobs t WHERE t.id < "+a.add(before)+" AND "+where+
		" ORDER BY t.id DESC LIMIT "+a.add(limit), a)
}

func (s *pgStore) deadMessages(ctx context.Context, query string, a args) ([]store.DeadMessage, error) {
	return readAll(s, ctx, s.q(query), a, sqlkit.ScanDeadMessage)
}

// addHistorySQL adds per-(queue, minute) counts, given as parallel arrays
// with one element per key.
const addHistorySQL = `INSERT INTO lq_history AS h (queue, minute, enqueued, succeeded, retried, dead)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
ON CONFLICT (queue, minute) DO UPDATE SET
    enqueued = h.enqueued + excluded.enqueued, succeeded = h.succeeded + excluded.succeeded,
    retried = h.retried + excluded.retried, dead = h.dead + excluded.dead`

// AddHistory implements store.Dashboard.
func (s *pgStore) AddHistory(ctx context.Context, counts []store.HistoryCount, pruneBefore int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	type key struct {
		queue  string
		minute int64
	}
	sum := map[key]*store.HistoryCount{}
	var order []key
	for _, c := range counts {
		k := key{c.Queue, c.Minute}
		t, ok := sum[k]
		if !ok {
			t = &store.HistoryCount{Queue: c.Queue, Minute: c.Minute}
			sum[k] = t
			order = append(order, k)
		}
		t.Enqueued += c.Enqueued
		t.Succeeded += c.Succeeded
		t.Retried += c.Retried
		t.Dead += c.Dead
	}
	var queues []string
	var minutes, enq, succ, retr, dead []int64
	for _, k := range order {
		t := sum[k]
		queues, minutes = append(queues, t.Queue), append(minutes, t.Minute)
		enq, succ, retr, dead = append(enq, int64(t.Enqueued)), append(succ, int64(t.Succeeded)), append(retr, int64(t.Retried)), append(dead, int64(t.Dead))
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if len(order) > 0 {
			if _, err := tx.ExecContext(ctx, s.q(addHistorySQL), queues, minutes, enq, succ, retr, dead); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, s.q(`DELETE FROM lq_history WHERE minute < $1`), pruneBefore)
		return err
	})
}

// History implements store.Dashboard.
func (s *pgStore) History(ctx context.Context, queue string, since int64) ([]store.HistoryCount, error) {
	var a args
	query := `SELECT queue, minute, enqueued, succeeded, retried, dead FROM lq_history WHERE minute >= ` + a.add(since)
	if queue != "" {
		query += ` AND queue = ` + a.add(queue)
	}
	return readAll(s, ctx, s.q(query+` ORDER BY minute, queue`), a, sqlkit.ScanHistoryCount)
}

const loadSQL = `WITH h AS (SELECT * FROM unnest($1::text[], $2::text[]) AS h(queue, kind))
SELECT
    count(*) FILTER (WHERE handled AND (state = 1 OR visible_at <= $3)),
    min(visible_at) FILTER (WHERE handled AND state = 0 AND visible_at > $3),
    count(*) FILTER (WHERE NOT handled)
FROM (SELECT j.state, j.visible_at, EXISTS (SELECT 1 FROM h WHERE h.queue = j.queue AND h.kind = j.kind) AS handled
      FROM lq_jobs j WHERE j.state IN (0, 1)) l`

// LoadOf implements store.Testing.
func (s *pgStore) LoadOf(ctx context.Context, handled []store.Handled, now int64) (store.Load, error) {
	queues, kinds := make([]string, len(handled)), make([]string, len(handled))
	for i, h := range handled {
		queues[i], kinds[i] = h.Queue, h.Kind
	}
	return readValue(s, ctx, func() (store.Load, error) {
		var l store.Load
		var next sql.NullInt64
		if err := s.db.QueryRowContext(ctx, s.q(loadSQL), queues, kinds, now).Scan(&l.Busy, &next, &l.Unhandled); err != nil {
			return store.Load{}, err
		}
		l.Next, l.HasNext = next.Int64, next.Valid
		return l, nil
	})
}

// InsertRunning implements store.Testing.
func (s *pgStore) InsertRunning(ctx context.Context, job store.NewJob, r store.RunningClaim) (int64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	var id int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ids, dups, err := s.insertTx(ctx, tx, []store.NewJob{job})
		if err != nil {
			return err
		}
		if dups[0] != nil {
			id = ids[0]
			return dups[0]
		}
		id = ids[0]
		var lastErr any
		if r.LastError != "" {
			lastErr = r.LastError
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_jobs SET state = 1, lease = $1, attempt = $2, attempted_at = $3, visible_at = $4, last_error = $5
			WHERE id = $6 AND state = 0`), r.Lease, r.Attempt, r.At, r.Until, lastErr, id)
		return err
	})
	if err != nil {
		var de *store.DuplicateError
		if errors.As(err, &de) {
			return id, err
		}
		return 0, err
	}
	return id, nil
}

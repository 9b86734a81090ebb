package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// Flow control (store.Limiter): the limits stored in lq_queues and the claims
// of limited queues. The writer serialises every claim of the file, so a
// limited claim counts, decides and marks in one transaction that no other
// claim interleaves with.

const limitsCols = `concurrency, key_concurrency, ordered, rate_n, rate_per, key_rate_n, key_rate_per`

// scanLimits scans the columns limitsCols names.
func scanLimits(row interface{ Scan(...any) error }, l *store.Limits) error {
	return row.Scan(&l.Concurrency, &l.KeyConcurrency, &l.Ordered, &l.RateN, &l.RatePer, &l.KeyRateN, &l.KeyRatePer)
}

// readLimits reads queue's stored limits on tx; zero when it has none.
func readLimits(ctx context.Context, tx Execer, queue string) (store.Limits, error) {
	var l store.Limits
	err := scanLimits(tx.QueryRowContext(ctx, `SELECT `+limitsCols+` FROM lq_queues WHERE queue = ?`, queue), &l)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Limits{}, nil
	}
	return l, err
}

// markRunningSQL marks the running rows of queue ?1 that no limited claim
// started, so that claims count them once limits are set.
const markRunningSQL = `UPDATE lq_jobs SET flow = 1 WHERE queue = ?1 AND state = 1 AND flow IS NULL`

// SetLimits implements store.Limiter.
func (s *Store) SetLimits(ctx context.Context, queue string, l store.Limits) (store.Limits, error) {
	if s.w == nil {
		return store.Limits{}, store.ErrReadOnly
	}
	var prev store.Limits
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		if prev, err = readLimits(ctx, tx, queue); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lq_queues (queue, `+limitsCols+`) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
			ON CONFLICT (queue) DO UPDATE SET concurrency = ?2, key_concurrency = ?3, ordered = ?4, rate_n = ?5,
			rate_per = ?6, key_rate_n = ?7, key_rate_per = ?8`,
			queue, l.Concurrency, l.KeyConcurrency, l.Ordered, l.RateN, l.RatePer, l.KeyRateN, l.KeyRatePer); err != nil {
			return err
		}
		if l.Any() && !prev.Any() {
			_, err = tx.ExecContext(ctx, markRunningSQL, queue)
		}
		return err
	})
	return prev, sqlitefile.ClassifyWriteError(err)
}

// Limits implements store.Limiter.
func (s *Store) Limits(ctx context.Context) (map[string]store.Limits, error) {
	if s.noFlow {
		return map[string]store.Limits{}, nil // no limits before flowVersion
	}
	rows, err := s.db.QueryContext(ctx, `SELECT queue, `+limitsCols+` FROM lq_queues
		WHERE concurrency <> 0 OR key_concurrency <> 0 OR ordered <> 0 OR rate_n <> 0 OR key_rate_n <> 0`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]store.Limits{}
	for rows.Next() {
		var q string
		var l store.Limits
		if err := rows.Scan(&q, &l.Concurrency, &l.KeyConcurrency, &l.Ordered, &l.RateN, &l.RatePer, &l.KeyRateN, &l.KeyRatePer); err != nil {
			return nil, err
		}
		out[q] = l
	}
	return out, rows.Err()
}

// flowNextFreeSQL is the earliest lease end, after ?2, of the counted
// running rows of queue ?1: a range of lq_jobs_flow.
const flowNextFreeSQL = `SELECT min(visible_at) FROM lq_jobs WHERE queue = ?1 AND state = 1 AND flow IS NOT NULL AND visible_at > ?2`

// LimitsNextFree implements store.Limiter.
func (s *Store) LimitsNextFree(ctx context.Context, queue string, kinds []string, now int64) (int64, bool, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, flowNextFreeSQL, queue, now).Scan(&v); err != nil {
		return 0, false, err
	}
	l, err := readLimits(ctx, tx, queue)
	if err != nil {
		return 0, false, err
	}
	for _, r := range [][2]int64{{int64(l.RateN), l.RatePer}, {int64(l.KeyRateN), l.KeyRatePer}} {
		if r[0] <= 0 {
			continue
		}
		var at sql.NullInt64
		if err := tx.QueryRowContext(ctx, rateNextSQL, queue, now-r[1]).Scan(&at); err != nil {
			return 0, false, err
		}
		if at.Valid && (!v.Valid || at.Int64+r[1] < v.Int64) {
			v = sql.NullInt64{Int64: at.Int64 + r[1], Valid: true}
		}
	}
	err = priorities(ctx, tx, queue, func(prio int64) (bool, error) {
		for _, k := range kinds {
			var due int64
			err := tx.QueryRowContext(ctx, nextDueAfterSQL, queue, prio, k, now).Scan(&due)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return false, err
			}
			if !v.Valid || due < v.Int64 {
				v = sql.NullInt64{Int64: due, Valid: true}
			}
		}
		return true, nil
	})
	return v.Int64, v.Valid, err
}

// nextDueAfterSQL is the earliest VisibleAt after ?4 of the live rows of
// queue ?1, priority ?2 and kind ?3: one seek of lq_jobs_kind_due.
const nextDueAfterSQL = `SELECT visible_at FROM lq_jobs
	WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind = ?3 AND visible_at > ?4
	ORDER BY visible_at LIMIT 1`

// flowRunningSQL counts the running rows of queue ?1 that a limited claim
// started and whose lease has not lapsed at ?2, by group: a range of
// lq_jobs_flow, which holds no other rows.
const flowRunningSQL = `SELECT grp, count(*) FROM lq_jobs INDEXED BY lq_jobs_flow
	WHERE queue = ?1 AND state = 1 AND flow IS NOT NULL AND visible_at > ?2 GROUP BY grp`

// flowRunning returns how many counted rows of queue run at now, in all
// and per group.
func flowRunning(ctx context.Context, tx Execer, queue string, now int64) (int, map[string]int, error) {
	rows, err := tx.QueryContext(ctx, flowRunningSQL, queue, now)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	total, byGroup := 0, map[string]int{}
	for rows.Next() {
		var g sql.NullString
		var n int
		if err := rows.Scan(&g, &n); err != nil {
			return 0, nil, err
		}
		total += n
		if g.Valid {
			byGroup[g.String] = n
		}
	}
	return total, byGroup, rows.Err()
}

// claimLimitedTx claims per q on tx for a queue that may have limits: it
// reads the stored limits (none: the usual claim), counts what runs, and
// claims no more than they allow, marking the rows it starts.
func claimLimitedTx(ctx context.Context, tx Execer, q store.ClaimQuery) ([]store.Claimed, error) {
	l, err := readLimits(ctx, tx, q.Queue)
	if err != nil || !l.Any() {
		if err != nil {
			return nil, err
		}
		return claimTx(ctx, tx, q)
	}
	total, byGroup, err := flowRunning(ctx, tx, q.Queue, q.Now)
	if err != nil {
		return nil, err
	}
	if l.Concurrency > 0 {
		q.N = min(q.N, l.Concurrency-total)
	}
	starts := map[string]int{}
	if l.RateN > 0 || l.KeyRateN > 0 {
		n, err := rateStarts(ctx, tx, q.Queue, l, q.Now, starts)
		if err != nil {
			return nil, err
		}
		if l.RateN > 0 {
			q.N = min(q.N, l.RateN-n)
		}
	}
	if q.N <= 0 || len(q.Kinds) == 0 {
		return nil, nil
	}
	var cs []store.Claimed
	groups := map[int64]string{}
	if l.Grouped() {
		cs, err = claimByGroupTx(ctx, tx, q, l, store.NewRoom(l, byGroup, starts), groups)
	} else {
		cs, err = claimTx(ctx, tx, q)
	}
	if err != nil || len(cs) == 0 {
		return cs, err
	}
	ids := make([]int64, len(cs))
	for i := range cs {
		ids[i] = cs[i].ID
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lq_jobs SET flow = 1 WHERE id IN (SELECT value FROM json_each(?1))`, idsJSON(ids)); err != nil {
		return nil, err
	}
	if l.RateN > 0 || l.KeyRateN > 0 {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `INSERT INTO lq_flow_starts (queue, grp, at, id) VALUES (?, ?, ?, ?)`,
				q.Queue, groups[id], q.Now, id); err != nil {
				return nil, err
			}
		}
	}
	return cs, nil
}

// pruneMargin keeps starts this long past the longest window: a claim
// whose time was read before it waited for the lock counts its window
// from that earlier time, and must still find the starts in it that a
// later claim could have pruned.
const pruneMargin = int64(time.Minute)

// window is the longest window of l's rates, in nanoseconds.
func window(l store.Limits) int64 {
	var w int64
	if l.RateN > 0 {
		w = l.RatePer
	}
	if l.KeyRateN > 0 {
		w = max(w, l.KeyRatePer)
	}
	return w
}

// rateStarts deletes the starts of queue older than l's longest window at
// now, and returns how many started in the window of l.RatePer, filling
// byGroup with the starts of each group in the window of l.KeyRatePer:
// ranges of lq_flow_starts' primary key.
func rateStarts(ctx context.Context, tx Execer, queue string, l store.Limits, now int64, byGroup map[string]int) (int, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM lq_flow_starts WHERE queue = ?1 AND at <= ?2`, queue, now-window(l)-pruneMargin); err != nil {
		return 0, err
	}
	var n int
	if l.RateN > 0 {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM lq_flow_starts WHERE queue = ?1 AND at > ?2`, queue, now-l.RatePer).Scan(&n); err != nil {
			return 0, err
		}
	}
	if l.KeyRateN > 0 {
		rows, err := tx.QueryContext(ctx, `SELECT grp, count(*) FROM lq_flow_starts WHERE queue = ?1 AND at > ?2 AND grp <> '' GROUP BY grp`, queue, now-l.KeyRatePer)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			var c int
			if err := rows.Scan(&g, &c); err != nil {
				return 0, err
			}
			byGroup[g] = c
		}
		return n, rows.Err()
	}
	return n, nil
}

// rateNextSQL is the earliest start of queue ?1 after ?2 (the start of a
// window): that start leaves the window Per after it.
const rateNextSQL = `SELECT min(at) FROM lq_flow_starts WHERE queue = ?1 AND at > ?2`

// dueGroupSQL reads the due rows of one priority ?2 and kind ?3 of queue
// ?1 at ?4, in claim order, with their groups, leaving out those of the
// saturated groups of the JSON list ?5: a range of lq_jobs_kind_due that
// the caller stops reading once it has what it takes. The rows of a
// saturated group are stepped over inside SQLite, not returned.
const dueGroupSQL = `SELECT id, grp, visible_at FROM lq_jobs
	WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind = ?3 AND visible_at <= ?4
	  AND (grp IS NULL OR grp NOT IN (SELECT value FROM json_each(?5)))
	ORDER BY visible_at, id`

// dueOrderedSQL is dueGroupSQL for ordered groups: a row of a group is
// taken only when it is the group's first live row (lq_jobs_group_live),
// so a group's jobs start one at a time in id order, and a pending job
// waiting for its retry (or snoozed) holds the later ones back until it
// ran, died or was cancelled.
const dueOrderedSQL = `SELECT id, grp, visible_at FROM lq_jobs j
	WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind = ?3 AND visible_at <= ?4
	  AND (grp IS NULL OR (grp NOT IN (SELECT value FROM json_each(?5))
	    AND id = (SELECT min(h.id) FROM lq_jobs h WHERE h.queue = ?1 AND h.grp = j.grp AND h.state IN (0, 1))))
	ORDER BY visible_at, id`

// claimByIDsSQL claims the rows of the JSON id list ?4 as claimSQL claims
// its rows.
const claimByIDsSQL = `UPDATE lq_jobs
SET state = 1, visible_at = ?1 - (state = 1), lease = ?2, attempt = attempt + 1, attempted_at = ?3, due_at = visible_at, process = ?5,
    last_error = CASE WHEN state = 1 THEN 'lease expired: the worker of attempt ' || attempt || ' was lost' ELSE last_error END
WHERE id IN (SELECT value FROM json_each(?4))
RETURNING id, kind, attempt, priority, payload, idem_key, created_at, last_error, due_at, meta, visible_at < ?1`

// candidate is a due row a group-limited claim may take.
type candidate struct {
	id, due int64
	grp     sql.NullString
}

// claimByGroupTx claims up to q.N due rows, most urgent first, taking a
// row of a group only while fewer than perGroup rows of its group run
// (running counts them): rows of a saturated group are stepped over, so
// they never hold back the rows of other groups behind them.
func claimByGroupTx(ctx context.Context, tx Execer, q store.ClaimQuery, l store.Limits, room store.Room, groups map[int64]string) ([]store.Claimed, error) {
	query := dueGroupSQL
	if l.Ordered {
		query = dueOrderedSQL
	}
	var chosen []int64
	taken := map[string]int{}
	satJSON, _ := json.Marshal(room.Saturated())
	sat := string(satJSON)
	err := priorities(ctx, tx, q.Queue, func(prio int64) (bool, error) {
		// Per kind, the first rows that the limits allow as they stand;
		// merged in claim order, each group's allowance is then shared.
		var all []candidate
		for _, kind := range q.Kinds {
			cands, err := groupCandidates(ctx, tx, query, q, prio, kind, sat, room, taken, q.N-len(chosen))
			if err != nil {
				return false, err
			}
			all = append(all, cands...)
		}
		slices.SortFunc(all, func(a, b candidate) int {
			if a.due != b.due {
				return cmpInt(a.due, b.due)
			}
			return cmpInt(a.id, b.id)
		})
		for _, c := range all {
			if len(chosen) == q.N {
				break
			}
			if c.grp.Valid {
				if room.Of(c.grp.String)-taken[c.grp.String] <= 0 {
					continue
				}
				taken[c.grp.String]++
				groups[c.id] = c.grp.String
			}
			chosen = append(chosen, c.id)
		}
		return len(chosen) < q.N, nil
	})
	if err != nil || len(chosen) == 0 {
		return nil, err
	}
	return claimIDs(ctx, tx, q, chosen)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupCandidates reads up to n due rows of one priority and kind that the
// group limit allows, given what runs and what this claim took already.
func groupCandidates(ctx context.Context, tx Execer, query string, q store.ClaimQuery, prio int64, kind, sat string, room store.Room, taken map[string]int, n int) ([]candidate, error) {
	rows, err := tx.QueryContext(ctx, query, q.Queue, prio, kind, q.Now, sat)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	mine := map[string]int{}
	for len(out) < n && rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.grp, &c.due); err != nil {
			return nil, err
		}
		if c.grp.Valid && !room.Take(c.grp.String, taken, mine) {
			continue
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// claimIDs claims the rows ids (chosen on tx by the caller) and moves
// their counts.
func claimIDs(ctx context.Context, tx Execer, q store.ClaimQuery, ids []int64) ([]store.Claimed, error) {
	rows, err := tx.QueryContext(ctx, claimByIDsSQL, q.Until, q.Lease, q.Now, idsJSON(ids), q.Process)
	if err != nil {
		return nil, err
	}
	var cs []store.Claimed
	fresh := map[int64]int{}
	for rows.Next() {
		var c store.Claimed
		var key, lastErr, meta sql.NullString
		var lapsed bool
		if err := rows.Scan(&c.ID, &c.Kind, &c.Attempt, &c.Priority, &c.Payload, &key, &c.CreatedAt, &lastErr, &c.DueAt, &meta, &lapsed); err != nil {
			rows.Close()
			return nil, err
		}
		c.Key, c.LastError, c.Meta = key.String, lastErr.String, meta.String
		cs = append(cs, c)
		if !lapsed {
			fresh[dueBucket(c.DueAt)]++
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(cs) != len(ids) {
		return nil, fmt.Errorf("litequeue: a limited claim chose %d rows and claimed %d", len(ids), len(cs))
	}
	slices.SortFunc(cs, func(a, b store.Claimed) int {
		if a.Priority != b.Priority {
			return cmpInt(int64(a.Priority), int64(b.Priority))
		}
		if a.DueAt != b.DueAt {
			return cmpInt(a.DueAt, b.DueAt)
		}
		return cmpInt(a.ID, b.ID)
	})
	for due, n := range fresh {
		from := countKey{queue: q.Queue, state: store.Pending, due: due}
		if err := moveCount(ctx, tx, from, countOf(q.Queue, store.Running, 0), n); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// setGroupSQL stores the group of a job just inserted.
const setGroupSQL = `UPDATE lq_jobs SET grp = ?2 WHERE id = ?1`
